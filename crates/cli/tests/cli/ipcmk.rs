//! `ipcns ipcmk` against util-linux `ipcmk` on the kernel: output, messages
//! and exit codes, then the objects made (keys aside: both draw them at
//! random).

use crate::kernel::{Ns, in_fresh_ipc_ns, real, same};

/// Listing lines start with the random key: blank it out.
fn without_keys(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| match l.strip_prefix("0x") {
            Some(rest) if rest.len() > 8 => format!("KEY{}\n", &rest[8..]),
            _ => format!("{l}\n"),
        })
        .collect()
}

#[test]
fn ipcmk_matches_util_linux() {
    in_fresh_ipc_ns("ipcmk_matches_util_linux", || {
        let ns = Ns::new();
        let cases: &[&[&str]] = &[
            &["-M", "4096"],
            &["-Q"],
            &["-S", "3", "-p", "600"],
            &["-M", "1M", "-Q", "-S", "2"],
            &["--shmem=2k", "--mode=0640"],
            &["--queue", "--mode", "7777"],
            &["--semaphore", "1", "-p", "0"],
            &["-M", "1.5K"],
            &["-M", "0.25M"],
            &["-M", "1KB"],
            &["-M", "0x10"],
            &["-M", "010"],
            &["-M", "1KiB"],
            &["-M", " 5"],
            &["-Q", "extra"],
            &["-QS2"],
            &[],
            &["-M", "abc"],
            &["-M", "5 "],
            &["-M", "1Q"],
            &["-M", "-1"],
            &["-M", ""],
            &["-M", "20E"],
            &["-M", "99999999999999999999"],
            &["-M", "0"],
            &["-S", "abc"],
            &["-S", "99999999999"],
            &["-S", "0"],
            &["-S", "-1"],
            &["-S", "40000"],
            &["-p", "abc", "-Q"],
            &["-p", "9", "-Q"],
            &["-p", "", "-Q"],
            &["-p", "0x1", "-Q"],
            &["-x"],
            &["-Q", "-x"],
            &["--foo"],
            &["--sh", "1"],
            &["--queue=1"],
            &["-M"],
            &["--mode"],
        ];
        for args in cases {
            ns.check("ipcmk", args);
        }
        for args in [&["-c"][..], &["-u"], &["-l"]] {
            ns.check("ipcs", args);
        }
        for args in [&[][..], &["-b"], &["--human"]] {
            same(
                &format!("ipcs {} (keys blanked)", args.join(" ")),
                &strip(real("ipcs", args)),
                &strip(ns.ours("ipcs", args)),
            );
        }
    });
}

fn strip(mut o: std::process::Output) -> std::process::Output {
    o.stdout = without_keys(&o.stdout).into_bytes();
    o
}
