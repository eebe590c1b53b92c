//! Stress: a race and an exhaustion that must end in errors, never in a
//! panic or a signal.
//!
//! - An id reused by a set of another size while other threads use it
//!   (the ABA of a lookup without the registry lock): the readers must get
//!   errors or the new set's values, never index past its end.
//! - A namespace on a tmpfs that fills up: calls must fail with ENOSPC or
//!   ENOMEM, never die of SIGBUS on a page the file system cannot supply.
//! - A segment larger than the tmpfs it is on: refused at shmget, never a
//!   SIGBUS at a touch of the attachment.
//!
//! IPCNS_STRESS_MS: how long the race runs (default 2000).
//!
//! # Safety
//! `mount_tmpfs` makes plain system calls (unshare, mount) in a forked
//! child, with NUL-terminated strings that outlive each call.
#![allow(unsafe_code)]

use crate::corrupt::{IPC_PRIVATE, env_u64, getall, setall};
use crate::support::{self, TestNs};
use ipcns::Mech;
use ipcns::abi::*;
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Cred, Namespace};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The id both sets of the race take: index 7, sequence 0.
const ABA_ID: i32 = 7;

/// Raises `stop` when dropped: at a thread's end, or as it unwinds (then
/// noting when the first panic came).
struct StopOnDrop<'a> {
    stop: &'a AtomicBool,
    start: Instant,
    first_panic: &'a std::sync::OnceLock<Duration>,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.first_panic.set(self.start.elapsed());
        }
        self.stop.store(true, Relaxed);
    }
}

/// Swaps a 1-semaphore set and a 30-semaphore set at the same id until
/// the deadline; returns how many sets took the id.
fn churn(ns: &Namespace, root: &Cred, stop: &AtomicBool, deadline: Instant) -> u64 {
    let mut swaps = 0;
    while !stop.load(Relaxed) && Instant::now() < deadline {
        for nsems in [1, 30] {
            let _ = ns.sysctl_write(root, "sem_next_id", &ABA_ID.to_string());
            if let Ok(id) = ns.semget(root, IPC_PRIVATE, nsems, IPC_CREAT | 0o600) {
                swaps += u64::from(id == ABA_ID);
                std::thread::yield_now();
                let _ = ns.semctl(root, id, 0, IPC_RMID, SemArg::None);
            }
        }
    }
    swaps
}

/// GETVAL and SETVAL on semaphores 0 to 29 and GETALL of the id found at
/// the index, until `stop`; returns (calls, successes).
fn hammer(ns: &Namespace, root: &Cred, stop: &AtomicBool) -> (u64, u64) {
    let (mut calls, mut ok) = (0u64, 0u64);
    while !stop.load(Relaxed) {
        let mut ds = semid64_ds::default();
        let seen = ns.semctl(root, ABA_ID, 0, SEM_STAT_ANY, SemArg::Ds(&mut ds));
        let id = seen.unwrap_or(ABA_ID);
        for semnum in 0..30 {
            ok += u64::from(ns.semctl(root, id, semnum, GETVAL, SemArg::None).is_ok());
            ok += u64::from(
                ns.semctl(root, id, semnum, SETVAL, SemArg::Val(semnum))
                    .is_ok(),
            );
        }
        let mut vals = vec![0u16; (ds.sem_nsems as usize).max(1)];
        ok += u64::from(getall(ns, root, id, &mut vals).is_ok());
        calls += 62;
    }
    (calls, ok)
}

/// The race, in a forked child (so that a panic's location is reported
/// and its locks die with it): one churner, two readers, `ms` long.
/// Writes `aba: ...` and one `panic ...` line per panicked thread; 0 when
/// nothing panicked.
fn aba_child(ns: &Namespace, sink: UnixStream, ms: u64) -> i32 {
    support::child_reports_to(sink.try_clone().expect("clone the report socket"));
    let start = Instant::now();
    let deadline = start + Duration::from_millis(ms);
    let stop = AtomicBool::new(false);
    let first_panic = std::sync::OnceLock::new();
    let root = Cred::root(std::process::id() as i32);
    let (mut swaps, mut calls, mut ok, mut panicked) = (0, 0, 0, 0);
    let guard = || StopOnDrop {
        stop: &stop,
        start,
        first_panic: &first_panic,
    };
    std::thread::scope(|s| {
        let churner = s.spawn(|| {
            let _stop = guard();
            churn(ns, &root, &stop, deadline)
        });
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let _stop = guard();
                    hammer(ns, &root, &stop)
                })
            })
            .collect();
        match churner.join() {
            Ok(n) => swaps = n,
            Err(_) => panicked += 1,
        }
        for r in readers {
            match r.join() {
                Ok((c, k)) => {
                    calls += c;
                    ok += k;
                }
                Err(_) => panicked += 1,
            }
        }
    });
    let first = first_panic.get().map_or(String::new(), |d| {
        format!(", the first after {:.3} s", d.as_secs_f64())
    });
    let _ = writeln!(
        &sink,
        "aba: {swaps} sets took id {ABA_ID} (1 and 30 semaphores in turn), \
         {calls} calls by 2 readers ({ok} ok), {panicked} threads panicked{first}, {:.1} s",
        start.elapsed().as_secs_f64()
    );
    i32::from(panicked > 0)
}

#[test]
fn an_id_reused_by_a_set_of_another_size_is_an_error_not_a_panic() {
    let t = TestNs::with(
        "aba",
        CreateOptions {
            heap_size: 64 << 20,
            ..CreateOptions::default()
        },
    );
    let ms = env_u64("IPCNS_STRESS_MS", 2000);
    let (mut mine, theirs) = UnixStream::pair().expect("socketpair");
    let pid = support::fork_child(|| aba_child(&t.ns, theirs, ms));
    let status = support::wait_child_deadline(pid, Duration::from_millis(ms + 30_000));
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    let summary = report.lines().find(|l| l.starts_with("aba: "));
    let _ = writeln!(
        std::io::stderr(),
        "{}",
        summary.unwrap_or("aba: no summary")
    );
    let panics: Vec<&str> = report.lines().filter(|l| l.starts_with("panic ")).collect();
    assert!(
        panics.is_empty() && status == Ok(0),
        "a reader used a reused set by its old size (child {status:?}):\n{}",
        panics.join("\n")
    );
    assert!(
        summary.is_some_and(|s| !s.starts_with("aba: 0 sets")),
        "no set ever took id {ABA_ID}: the race never ran"
    );
    t.ns.check().expect("consistent after the race");
}

/// In a forked child: a private mount namespace with a tmpfs of `opts`
/// mounted on `dir`.
fn mount_tmpfs(dir: &Path, opts: &str) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let err = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let target = CString::new(dir.as_os_str().as_bytes())?;
    let data = CString::new(opts)?;
    // SAFETY: a flag argument only; affects this (forked) process alone.
    err(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // SAFETY: static NUL-terminated strings and null pointers mount(2)
    // accepts for a propagation change.
    err(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })?;
    // SAFETY: NUL-terminated strings that live across the call.
    err(unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    })
}

fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ipcns-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// Whether a forked child can mount a tmpfs in a mount namespace of its
/// own (root). With IPCNS_REQUIRE_KERNEL=1 a skip is a failure.
fn tmpfs_or_skip(test: &str) -> bool {
    let dir = scratch_dir("tmpfs-probe");
    let d = dir.clone();
    let ok = support::fork_run(move || i32::from(mount_tmpfs(&d, "size=64k").is_err()));
    let _ = std::fs::remove_dir(&dir);
    if ok == 0 {
        return true;
    }
    let why = "cannot mount a tmpfs in a new mount namespace: this test needs root";
    if std::env::var("IPCNS_REQUIRE_KERNEL").as_deref() == Ok("1") {
        panic!("{test}: IPCNS_REQUIRE_KERNEL=1 but {why}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    false
}

/// Counts results by errno, keeping the first error's name.
#[derive(Default)]
struct Fill {
    made: Vec<i32>,
    first_error: Option<&'static str>,
}

impl Fill {
    fn note(&mut self, r: ipcns::SysResult<i32>) -> bool {
        match r {
            Ok(id) => {
                self.made.push(id);
                true
            }
            Err(e) => {
                self.first_error.get_or_insert(e.name());
                false
            }
        }
    }

    fn text(&self, what: &str) -> String {
        format!(
            "{} {what} (then {})",
            self.made.len(),
            self.first_error.unwrap_or("no error")
        )
    }
}

/// The child of the tmpfs test: fills a namespace on a 4 MiB tmpfs with
/// sets of 200 semaphores, queues and segments until calls fail, then
/// removes half, creates again and checks. Returns 0 when every call
/// returned (and the namespace is consistent).
fn full_tmpfs_child(dir: &Path, sink: UnixStream) -> i32 {
    support::child_reports_to(sink.try_clone().expect("clone the report socket"));
    let say = |s: String| {
        let _ = writeln!(&sink, "{s}");
    };
    if let Err(e) = mount_tmpfs(dir, "size=4m") {
        say(format!("mount: {e}"));
        return 2;
    }
    let ns = match Namespace::create_at(&dir.join("ipcns.full"), CreateOptions::default()) {
        Ok(ns) => ns,
        Err(e) => {
            say(format!("create: {e}"));
            return 3;
        }
    };
    let root = Cred::root(std::process::id() as i32);
    for (name, value) in [
        ("sem", "32000 2147483647 500 32768"),
        ("msgmni", "32768"),
        ("shmmni", "32768"),
    ] {
        if let Err(e) = ns.sysctl_write(&root, name, value) {
            say(format!("sysctl {name}: {e}"));
        }
    }
    let (mut sems, mut msgs, mut shms) = (Fill::default(), Fill::default(), Fill::default());
    let mut vals = [5u16; 200];
    for i in 0..40_000 {
        let key = if i % 2 == 0 { IPC_PRIVATE } else { 0x10000 + i };
        let open = [&sems, &msgs, &shms].map(|f| f.first_error.is_none());
        if open == [false; 3] {
            break;
        }
        if open[0] && sems.note(ns.semget(&root, key, 200, IPC_CREAT | 0o600)) {
            let _ = setall(&ns, &root, *sems.made.last().unwrap(), &mut vals);
        }
        if open[1] {
            msgs.note(ns.msgget(&root, key, IPC_CREAT | 0o600));
        }
        if open[2] {
            shms.note(ns.shmget(&root, key, 4096, IPC_CREAT | 0o600));
        }
        if i % 256 == 0 {
            // Where it got to, should the next call kill the process.
            say(format!(
                "progress: {} sets, {} queues, {} segments",
                sems.made.len(),
                msgs.made.len(),
                shms.made.len()
            ));
        }
    }
    say(format!(
        "filled: {}, {}, {}",
        sems.text("sets"),
        msgs.text("queues"),
        shms.text("segments")
    ));
    // Half of everything removed: removal needs no new memory.
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    let mut count = |what: &str, r: ipcns::SysResult<i32>| {
        if let Err(e) = r {
            *failed.entry(format!("{what} {}", e.name())).or_default() += 1;
        }
    };
    for &id in sems.made.iter().step_by(2) {
        count("sem rmid", ns.semctl(&root, id, 0, IPC_RMID, SemArg::None));
    }
    for &id in msgs.made.iter().step_by(2) {
        count("msg rmid", ns.msgctl(&root, id, IPC_RMID, MsgArg::None));
    }
    for &id in shms.made.iter().step_by(2) {
        count("shm rmid", ns.shmctl(&root, id, IPC_RMID, ShmArg::None));
    }
    // The rest still usable; new objects where memory allows.
    let mut out = [0u16; 200];
    for &id in sems.made.iter().skip(1).step_by(2) {
        count("getall", getall(&ns, &root, id, &mut out));
        count("setall", setall(&ns, &root, id, &mut vals));
    }
    let (mut sems2, mut msgs2, mut shms2) = (Fill::default(), Fill::default(), Fill::default());
    for _ in 0..100 {
        sems2.note(ns.semget(&root, IPC_PRIVATE, 200, IPC_CREAT | 0o600));
        msgs2.note(ns.msgget(&root, IPC_PRIVATE, IPC_CREAT | 0o600));
        shms2.note(ns.shmget(&root, IPC_PRIVATE, 4096, IPC_CREAT | 0o600));
    }
    for m in Mech::ALL {
        count("proc_text", ns.proc_text(&root, m).map(|_| 0));
    }
    say(format!(
        "after removing half: {}, {}, {}; failures {failed:?}",
        sems2.text("sets"),
        msgs2.text("queues"),
        shms2.text("segments")
    ));
    match ns.check() {
        Ok(c) => {
            say(format!("check: {c:?}"));
            0
        }
        Err(e) => {
            say(format!("check: {e}"));
            5
        }
    }
}

#[test]
fn a_full_file_system_gives_errors_not_sigbus() {
    let test = "a_full_file_system_gives_errors_not_sigbus";
    if !tmpfs_or_skip(test) {
        return;
    }
    let dir = scratch_dir("tmpfs");
    let (mut mine, theirs) = UnixStream::pair().expect("socketpair");
    let start = Instant::now();
    let d = dir.clone();
    let pid = support::fork_child(move || full_tmpfs_child(&d, theirs));
    let status = support::wait_child_deadline(pid, Duration::from_secs(120));
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    let _ = std::fs::remove_dir(&dir);
    let report = report.trim_end().replace('\n', "\n    ");
    let _ = writeln!(
        std::io::stderr(),
        "tmpfs: child {status:?} after {:.1} s\n    {report}",
        start.elapsed().as_secs_f64()
    );
    match status {
        Ok(0) => {}
        Ok(s) if s == -libc::SIGBUS => {
            panic!("the namespace's process died of SIGBUS on a full tmpfs:\n    {report}")
        }
        Ok(s) if s < 0 => panic!("killed by signal {}:\n    {report}", -s),
        Ok(c) => panic!("child exit {c}:\n    {report}"),
        Err(doing) => panic!("still running after 120 s ({doing}):\n    {report}"),
    }
}

/// Runs `body(dir, report)` in a forked child (a tmpfs is mounted on `dir`
/// there), waiting at most `limit`; panics with the child's report unless
/// it exits 0 (SIGBUS named as such).
fn in_tmpfs_child(test: &str, limit: Duration, body: fn(&Path, &UnixStream) -> i32) {
    if !tmpfs_or_skip(test) {
        return;
    }
    let dir = scratch_dir("tmpfs");
    let (mut mine, theirs) = UnixStream::pair().expect("socketpair");
    let d = dir.clone();
    let pid = support::fork_child(move || {
        support::child_reports_to(theirs.try_clone().expect("clone the report socket"));
        body(&d, &theirs)
    });
    let status = support::wait_child_deadline(pid, limit);
    let mut report = String::new();
    let _ = mine.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = mine.read_to_string(&mut report);
    let _ = std::fs::remove_dir(&dir);
    let report = report.trim_end().replace('\n', "\n    ");
    let _ = writeln!(std::io::stderr(), "{test}: child {status:?}\n    {report}");
    match status {
        Ok(0) => {}
        Ok(s) if s == -libc::SIGBUS => panic!("{test}: the child died of SIGBUS:\n    {report}"),
        Ok(s) if s < 0 => panic!("{test}: killed by signal {}:\n    {report}", -s),
        Ok(c) => panic!("{test}: child exit {c}:\n    {report}"),
        Err(doing) => panic!("{test}: still running after {limit:?} ({doing}):\n    {report}"),
    }
}

/// Writes a byte to every page of the attachment `[addr, addr + len)`.
fn touch_pages(addr: usize, len: usize) {
    for at in (0..len).step_by(4096) {
        // SAFETY: `[addr, addr + len)` is a live read-write attachment.
        unsafe { *((addr + at) as *mut u8) = 1 };
    }
}

/// A segment larger than the tmpfs its namespace is on: shmget grants it
/// only if its pages are there (they are reserved at shmget), so writing
/// the whole attachment never dies of SIGBUS. On a 16 MiB tmpfs a 32 MiB
/// segment is ENOMEM (shmem's setup failing), a 4 MiB one is granted and
/// written whole, then a second 16 MiB one is refused too (the first
/// holds its pages); with SHM_NORESERVE the 32 MiB segment is granted
/// sparse (a touch past the room left would fault, as with Linux's
/// MAP_NORESERVE: not touched here). Two 7 MiB segments then both fit at
/// shmget, but only the first's shmat finds room for its pages: the
/// second is ENOMEM. Refused segments leave no pages taken on the tmpfs (segments live in the namespace's pool file,
/// `shm/pool.rs`, whose reserved pages the tmpfs counts as used).
#[test]
fn a_segment_larger_than_its_tmpfs_is_refused_not_sigbus() {
    in_tmpfs_child(
        "a_segment_larger_than_its_tmpfs_is_refused_not_sigbus",
        Duration::from_secs(60),
        |dir, sink| {
            let say = |s: String| {
                let _ = writeln!(&*sink, "{s}");
            };
            if let Err(e) = mount_tmpfs(dir, "size=16m") {
                say(format!("mount: {e}"));
                return 2;
            }
            let opts = CreateOptions {
                heap_size: 1 << 20,
                ..CreateOptions::default()
            };
            let ns = match Namespace::create_at(&dir.join("ipcns.small"), opts) {
                Ok(ns) => ns,
                Err(e) => {
                    say(format!("create: {e}"));
                    return 3;
                }
            };
            let root = Cred::root(std::process::id() as i32);
            // Bytes the tmpfs has given out (statvfs).
            let used = || {
                let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                    .expect("a path without NUL");
                // SAFETY: plain data, all zeros valid.
                let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
                // SAFETY: a NUL-terminated path and a buffer of the
                // structure's size for the call.
                let r = unsafe { libc::statvfs(c.as_ptr(), &mut v) };
                assert_eq!(r, 0, "statvfs");
                (v.f_blocks - v.f_bfree) * v.f_frsize
            };
            let before = used();
            // At most a few pages beside the segments' own (the pool's
            // size table, the heap's growth).
            let near = |want: u64| {
                let got = used() - before;
                say(format!("tmpfs: {got} bytes used, {want} in segments"));
                got >= want && got <= want + (256 << 10)
            };
            let attach_all = |size: u64, flg: i32| -> Result<(), String> {
                let id = ns.shmget(&root, IPC_PRIVATE, size, flg | 0o600);
                say(format!("shmget({size}) = {id:?}"));
                let id = id.map_err(|e| e.name().to_string())?;
                let a = ns
                    .shmat(&root, id, 0, 0)
                    .map_err(|e| format!("shmat {e:?}"))?;
                touch_pages(a, size as usize);
                say(format!("wrote {size} bytes"));
                Ok(())
            };
            if attach_all(32 << 20, 0) != Err("ENOMEM".into()) || !near(0) {
                return 4;
            }
            if attach_all(4 << 20, 0).is_err() {
                return 5;
            }
            if attach_all(16 << 20, 0) != Err("ENOMEM".into()) || !near(4 << 20) {
                return 6;
            }
            let sparse = ns.shmget(&root, IPC_PRIVATE, 32 << 20, SHM_NORESERVE | 0o600);
            say(format!("shmget(32 MiB, SHM_NORESERVE) = {sparse:?}"));
            if sparse.is_err() || !near(4 << 20) {
                return 7;
            }
            // Two segments that fit one at a time but not both: each
            // shmget finds room (the pages come with the first shmat), the
            // first shmat takes them and is written whole, the second is
            // ENOMEM, never a SIGBUS at a touch.
            let x = ns.shmget(&root, IPC_PRIVATE, 7 << 20, 0o600);
            let y = ns.shmget(&root, IPC_PRIVATE, 7 << 20, 0o600);
            say(format!("shmget(7 MiB) twice = {x:?}, {y:?}"));
            let (Ok(x), Ok(y)) = (x, y) else {
                return 8;
            };
            match ns.shmat(&root, x, 0, 0) {
                Ok(a) => touch_pages(a, 7 << 20),
                Err(e) => {
                    say(format!("shmat of the first: {e:?}"));
                    return 9;
                }
            }
            let second = ns.shmat(&root, y, 0, 0);
            say(format!("shmat of the second = {second:?}"));
            if second != Err(ipcns::Errno::ENOMEM) || !near(11 << 20) {
                return 10;
            }
            0
        },
    );
}
