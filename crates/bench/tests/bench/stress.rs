//! `ipcns-bench stress` without stress-ng: a line saying it is skipped and
//! how to install it, exit 0 (scripts running every benchmark go on). Its
//! parser of stress-ng's metrics is tested on stress-ng's own output
//! (tests/stress-ng) by the unit tests in src/stress.rs: this crate is a
//! program, with no library for these tests to call.

use crate::{TempDir, text};

#[test]
fn without_stress_ng_it_is_skipped_not_failed() {
    let d = TempDir::new("stress-skip");
    let empty = TempDir::new("stress-path");
    let o = d
        .command(&["stress"])
        .env("PATH", &empty.0)
        .output()
        .expect("run ipcns-bench");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "ipcns bench stress: skipped: stress-ng not installed (apt-get install stress-ng)\n"
    );
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let o = d
        .command(&["stress", "--json"])
        .env("PATH", &empty.0)
        .output()
        .expect("run ipcns-bench");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "{\"bench\":\"stress\",\"skipped\":\"stress-ng not installed (apt-get install stress-ng)\"}\n"
    );
    assert!(d.entries().is_empty(), "{:?}", d.entries());
}
