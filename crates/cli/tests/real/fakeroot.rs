//! fakeroot's System V flavour: `fakeroot-sysv` preloads libfakeroot,
//! which asks the `faked-sysv` daemon (started in the background, it
//! forks) for the faked owners over two message queues (keys K and K+1,
//! the daemon in a blocking msgrcv) and serialises its clients with a
//! semaphore taken with SEM_UNDO (key K+2).
//!
//! As `nobody` in a directory of its own: touch, chown 1234:5678, mknod,
//! mkdir and chown 42:43, then tar. Inside, tar lists the faked owners and
//! the character device; on disk nothing changed (nobody's files, the
//! device a plain file), and the archive keeps the faked owners for a
//! plain `tar tvf` outside. While the daemon runs, the namespace holds its
//! two queues and its semaphore set, owned by nobody; when it is gone,
//! nothing.

use crate::harness::{self, Mode, TempDir, User};
use crate::ipcs::Tables;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::Command;
use std::time::Duration;

/// Runs inside fakeroot, in the directory `$1`: announces the daemon's
/// key, waits (at most 20 s) for the test to look at the namespace, then
/// does the work.
const SCRIPT: &str = r#"set -e
cd "$1"
echo "$FAKEROOTKEY" > key.tmp
mv key.tmp key
i=0
while [ ! -e go ]; do
  i=$((i + 1))
  [ "$i" -lt 400 ] || { echo "no go file" >&2; exit 9; }
  sleep 0.05
done
echo "ids: $(id -u) $(id -g)"
touch f
chown 1234:5678 f
mknod dev c 1 3
mkdir d
chown 42:43 d
tar --numeric-owner -cf a.tar f dev d
tar --numeric-owner -tvf a.tar
"#;

pub fn test() {
    harness::both(
        "fakeroot_sysv",
        true,
        || {
            harness::need_programs(&["fakeroot-sysv", "faked-sysv", "tar", "setpriv"])?;
            User::lookup("nobody")
        },
        scenario,
    );
}

fn scenario(m: &Mode, nobody: &User) -> String {
    let tmp = TempDir::new("fakeroot");
    let work = tmp.join("work");
    std::fs::create_dir(&work).unwrap();
    harness::chown(&work, nobody);

    let mut c = m.as_user(nobody, &work, harness::which("fakeroot-sysv").unwrap());
    c.args(["sh", "-c", SCRIPT, "sh"]).arg(&work);
    let child = std::thread::scope(|s| {
        let run = s.spawn(|| harness::run(&mut c, Duration::from_secs(60), "fakeroot-sysv"));
        let key: u32 = harness::wait_for(Duration::from_secs(30), "faked's key", || {
            if run.is_finished() {
                return Some(0);
            }
            std::fs::read_to_string(work.join("key"))
                .ok()
                .and_then(|k| k.trim().parse().ok())
        });
        if key != 0 {
            daemon_objects(m, key, nobody);
            std::fs::write(work.join("go"), "").unwrap();
        }
        run.join().unwrap()
    });
    let out = child.ok("fakeroot-sysv sh -c SCRIPT");

    assert!(
        out.stdout.contains("ids: 0 0\n"),
        "inside fakeroot, id should say root:\n{}\n--- stderr\n{}",
        out.stdout,
        out.stderr
    );
    let listing = tar_listing(&out.stdout);
    check_listing(&listing, "inside fakeroot");

    // On disk: nothing was really changed.
    let f = std::fs::metadata(work.join("f")).unwrap();
    assert_eq!((f.uid(), f.gid()), (nobody.uid, nobody.gid), "f on disk");
    let dev = std::fs::metadata(work.join("dev")).unwrap();
    assert!(
        dev.file_type().is_file() && !dev.file_type().is_char_device(),
        "dev on disk should be a plain file"
    );
    let d = std::fs::metadata(work.join("d")).unwrap();
    assert_eq!(d.uid(), nobody.uid, "d on disk");

    // Outside fakeroot, plain tar reads the faked owners from the archive.
    let plain = harness::run(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("-tvf")
            .arg(work.join("a.tar")),
        Duration::from_secs(20),
        "tar tvf",
    )
    .ok("tar tvf outside fakeroot");
    check_listing(&tar_listing(&plain.stdout), "plain tar tvf of the archive");

    // The daemon removes its queues and its set when fakeroot ends it.
    harness::wait_for(Duration::from_secs(20), "faked's objects gone", || {
        Tables::parse(&m.ipcs(&["-q", "-s"]))
            .is_empty()
            .then_some(())
    });
    format!(
        "faked owners in tar: {}",
        listing
            .iter()
            .map(|(name, owner, _)| format!("{name} {owner}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// While faked runs (with key `key`): its two queues and its semaphore
/// set, owned and created by nobody, and nothing else.
fn daemon_objects(m: &Mode, key: u32, nobody: &User) {
    let t = Tables::parse(&m.ipcs(&["-q", "-s", "-m"]));
    let hex = |k: u32| format!("0x{k:08x}");
    let mut qkeys: Vec<&str> = t.queues.iter().map(|r| r.key.as_str()).collect();
    qkeys.sort_unstable();
    assert_eq!(
        qkeys,
        vec![hex(key).as_str(), hex(key.wrapping_add(1)).as_str()],
        "faked's message queues"
    );
    assert_eq!(t.sets.len(), 1, "faked's semaphore set: {t:?}");
    assert_eq!(t.sets[0].key, hex(key.wrapping_add(2)));
    assert_eq!(t.sets[0].num(0), 1, "nsems");
    assert!(t.segments.is_empty(), "faked makes no segment: {t:?}");
    for r in t.queues.iter().chain(&t.sets) {
        assert_eq!(r.owner, nobody.name, "owner of {r:?}");
        assert_eq!(r.perms, "600", "perms of {r:?}");
    }
}

/// `(name, owner, type letter)` for each line of `tar -tv`.
fn tar_listing(text: &str) -> Vec<(String, String, char)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let kind = f.first()?.chars().next()?;
            if !"-cdbl".contains(kind) || f.len() < 6 || !f[1].contains('/') {
                return None;
            }
            Some((f.last()?.to_string(), f[1].to_string(), kind))
        })
        .collect()
}

fn check_listing(l: &[(String, String, char)], what: &str) {
    let want = [
        ("f".to_string(), "1234/5678".to_string(), '-'),
        ("dev".to_string(), "0/0".to_string(), 'c'),
        ("d/".to_string(), "42/43".to_string(), 'd'),
    ];
    assert_eq!(l, want, "{what}");
}
