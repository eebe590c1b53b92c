//! The core never calls an interposable libc function for its own file,
//! process and credential work (design: "The library does its own file
//! and process work through raw system calls").
//!
//! A preload standing for fakeroot (count.c: open*, stat*, statx, mkdir,
//! chmod, chown, unlink, link, readlink, opendir, fopen, getuid and the
//! other id calls, getgroups, `syscall`, ftruncate, fallocate, read,
//! write, close, mmap, getpid, kill... each recorded, then forwarded) is
//! compiled with `cc` and this program re-executes itself under it. The
//! child resolves the preload's gate with dlsym, opens it, does a whole
//! life of namespaces (its first ipcns call is inside, so one-time
//! initialisation counts too; the private directory, create, open, list,
//! credentials read and refreshed, sem, msg and shm with attach and
//! detach, a timed sleep, /proc text, IPC_RMIDs, drop and remove), closes
//! it, and must find zero calls recorded. Then a control window: the
//! std and libc calls the core used to make, which the preload must see
//! (so zero is not a preload that sees nothing).
//!
//! A test without the libtest harness: the child must run its work on the
//! main thread with nothing else running, and the gate counts every
//! thread.

use ipcns::abi::{IPC_CREAT, IPC_NOWAIT, IPC_RMID, IPC_STAT, SEM_UNDO, sembuf, shmid64_ds};
use ipcns::msg::MsgArg;
use ipcns::sem::SemArg;
use ipcns::shm::ShmArg;
use ipcns::{CreateOptions, Mech, Namespace};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const IPC_PRIVATE: i32 = 0;

const CHILD: &str = "IPCNS_PRELOAD_PROBE_CHILD";

fn main() -> ExitCode {
    let r = if std::env::var_os(CHILD).is_some() {
        child()
    } else {
        parent()
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("preload: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Compiles the preload, runs this program under it, checks its report.
fn parent() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("ipcns-preload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let lib = dir.join("libcount.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/preload/count.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-w", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| format!("{cc}: {e} (a C compiler is needed: apt-get install gcc)"))?;
    if !out.status.success() {
        return Err(format!(
            "{cc} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .env(CHILD, "1")
        .env("LD_PRELOAD", &lib)
        .env_remove("IPCNS_DIR")
        .env_remove("IPCNS")
        .env_remove("IPCNS_SHARED")
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    if !out.status.success() {
        return Err(format!("the child failed ({})", out.status));
    }
    let line = |tag: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .map(str::to_string)
            .ok_or(format!("no {tag:?} line from the child"))
    };
    let work = line("work: ")?;
    if work != "0 calls" {
        return Err(format!(
            "the core called interposable libc functions: {work}"
        ));
    }
    // The control must show what the old code paths would have shown.
    let control = line("control: ")?;
    let seen: Vec<&str> = control
        .split_once(": ")
        .map_or(vec![], |(_, names)| names.split(',').collect());
    // Each group: the names one call may reach libc by (glibc and the
    // libc crate pick the 64-bit names or not).
    let groups: [&[&str]; 23] = [
        &["open64", "open"],
        &[
            "statx", "fstat64", "fstat", "lstat64", "lstat", "stat64", "stat",
        ],
        &["mkdir"],
        &["fchmod"],
        &["chmod"],
        &["ftruncate64", "ftruncate"],
        &["fallocate64", "fallocate"],
        &["linkat", "link"],
        &["unlink"],
        &["rmdir"],
        &["opendir"],
        &["readdir64", "readdir"],
        &["read"],
        &["close"],
        &["geteuid"],
        &["getuid"],
        &["getresuid"],
        &["getgroups"],
        &["syscall"],
        &["getpid"],
        &["kill"],
        &["mmap64", "mmap"],
        &["munmap"],
    ];
    for g in groups {
        if !g.iter().any(|n| seen.contains(n)) {
            return Err(format!(
                "the control window did not see {}: the preload is not interposing ({control})",
                g.join(" or ")
            ));
        }
    }
    println!(
        "preload: 0 interposable calls by the core; the control saw {} calls",
        seen.len()
    );
    Ok(())
}

type Begin = unsafe extern "C" fn();
type End = unsafe extern "C" fn(*mut u8, usize) -> i64;

/// The preload's gate.
struct Gate {
    begin: Begin,
    end: End,
}

impl Gate {
    #[allow(unsafe_code)]
    fn find() -> Result<Gate, String> {
        // SAFETY: dlsym with NUL-terminated names; the symbols, when
        // present, are count.c's functions of these signatures.
        unsafe {
            let b = libc::dlsym(libc::RTLD_DEFAULT, c"ipcns_probe_begin".as_ptr());
            let e = libc::dlsym(libc::RTLD_DEFAULT, c"ipcns_probe_end".as_ptr());
            if b.is_null() || e.is_null() {
                return Err("the preload's gate is not there: not run under LD_PRELOAD?".into());
            }
            Ok(Gate {
                begin: std::mem::transmute::<*mut libc::c_void, Begin>(b),
                end: std::mem::transmute::<*mut libc::c_void, End>(e),
            })
        }
    }

    /// Runs `f` with the gate open; "N calls: name,name...".
    #[allow(unsafe_code)]
    fn watch<T>(&self, f: impl FnOnce() -> T) -> (T, String) {
        let mut names = vec![0u8; 16384];
        // SAFETY: count.c's gate functions; `end` writes at most the
        // buffer's length, NUL included.
        let (t, n) = unsafe {
            (self.begin)();
            let t = f();
            let n = (self.end)(names.as_mut_ptr(), names.len());
            (t, n)
        };
        let len = names.iter().position(|&b| b == 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&names[..len]);
        let report = if n == 0 {
            "0 calls".to_string()
        } else {
            format!("{n} calls: {text}")
        };
        (t, report)
    }
}

fn child() -> Result<(), String> {
    let gate = Gate::find()?;
    // Everything that prints or formats output stays outside the gate.
    let tag = format!("preload-{}", std::process::id());
    let (r, work) = gate.watch(|| life(&tag));
    println!("work: {work}");
    r?;
    let scratch = std::env::temp_dir().join(format!("ipcns-preload-control-{tag}"));
    let (r, control) = gate.watch(|| control(&scratch));
    let _ = std::fs::remove_dir_all(&scratch);
    println!("control: {control}");
    r
}

/// A whole life of namespaces, every error a string (no printing).
fn life(tag: &str) -> Result<(), String> {
    let e = |what: &'static str| move |e: ipcns::Errno| format!("{what}: {e}");
    // The private directory /dev/shm/ipcns-UID, a private namespace and
    // a shared one (whose segment directory is made at creation).
    let own = format!("{tag}-own");
    let shared = format!("{tag}-shared");
    let ns = Namespace::create(&own, CreateOptions::default()).map_err(|e| e.to_string())?;
    let sh = Namespace::create(
        &shared,
        CreateOptions {
            mode: 0o666,
            ..CreateOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let again = Namespace::open(&own).map_err(|e| e.to_string())?;
    let names = Namespace::list().map_err(|e| e.to_string())?;
    if !names.contains(&own) || !names.contains(&shared) {
        return Err(format!("list: {names:?}"));
    }
    let cred = ns.cred().map_err(|e| e.to_string())?;
    ipcns::creds::refresh();
    let cred = {
        let c = again.cred().map_err(|e| e.to_string())?;
        if c.euid != cred.euid {
            return Err("credentials changed".into());
        }
        c
    };

    // Semaphores: semget, semop with and without SEM_UNDO, a timed wait
    // that runs out (a futex sleep), semctl.
    let id = ns
        .semget(&cred, IPC_PRIVATE, 2, IPC_CREAT | 0o600)
        .map_err(e("semget"))?;
    let up = [sembuf {
        sem_num: 0,
        sem_op: 1,
        sem_flg: SEM_UNDO,
    }];
    ns.semop(&cred, id, &up).map_err(e("semop"))?;
    let down = [sembuf {
        sem_num: 1,
        sem_op: -1,
        sem_flg: 0,
    }];
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 30_000_000,
    };
    match ns.semtimedop(&cred, id, &down, Some(&ts)) {
        Err(ipcns::Errno::EAGAIN) => {}
        r => return Err(format!("semtimedop: {r:?}, expected EAGAIN")),
    }
    ns.semctl(&cred, id, 0, IPC_RMID, SemArg::None)
        .map_err(e("semctl"))?;

    // Messages.
    let q = ns
        .msgget(&cred, IPC_PRIVATE, IPC_CREAT | 0o600)
        .map_err(e("msgget"))?;
    ns.msgsnd(&cred, q, 1, b"hello", 0).map_err(e("msgsnd"))?;
    let mut buf = [0u8; 16];
    let (_, n) = ns
        .msgrcv(&cred, q, &mut buf, 0, IPC_NOWAIT)
        .map_err(e("msgrcv"))?;
    if &buf[..n] != b"hello" {
        return Err("msgrcv: wrong text".into());
    }
    ns.msgctl(&cred, q, IPC_RMID, MsgArg::None)
        .map_err(e("msgctl"))?;

    // Shared memory, in both namespaces; /proc text reads the segment's
    // blocks.
    for n in [&ns, &sh] {
        let s = n
            .shmget(&cred, IPC_PRIVATE, 8192, IPC_CREAT | 0o600)
            .map_err(e("shmget"))?;
        let addr = n.shmat(&cred, s, 0, 0).map_err(e("shmat"))?;
        let mut ds = shmid64_ds::default();
        n.shmctl(&cred, s, IPC_STAT, ShmArg::Ds(&mut ds))
            .map_err(e("shmctl"))?;
        n.proc_text(&cred, Mech::Shm).map_err(e("proc_text"))?;
        n.shmctl(&cred, s, IPC_RMID, ShmArg::None)
            .map_err(e("shmctl rmid"))?;
        n.shmdt(&cred, addr).map_err(e("shmdt"))?;
    }
    drop(again);
    drop(ns);
    drop(sh);
    Namespace::remove(&own).map_err(|e| e.to_string())?;
    Namespace::remove(&shared).map_err(|e| e.to_string())?;
    match Namespace::open(&own) {
        Err(ipcns::ArenaError::NotFound { .. }) => Ok(()),
        Err(e) => Err(format!("open after remove: {e}")),
        Ok(_) => Err("open after remove succeeded".into()),
    }
}

/// What the core's files, ids and processes used to go through: std and
/// libc. The preload must see these.
#[allow(unsafe_code)]
fn control(scratch: &PathBuf) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let s = |e: std::io::Error| e.to_string();
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(scratch)
        .map_err(s)?;
    std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o700)).map_err(s)?;
    let f = scratch.join("f");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&f)
        .map_err(s)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(s)?;
    file.set_len(4096).map_err(s)?;
    file.metadata().map_err(s)?;
    std::fs::symlink_metadata(&f).map_err(s)?;
    std::fs::hard_link(&f, scratch.join("g")).map_err(s)?;
    std::fs::read_dir(scratch).map_err(s)?.for_each(drop);
    std::fs::read_to_string("/proc/self/stat").map_err(s)?;
    std::fs::remove_file(scratch.join("g")).map_err(s)?;
    use std::os::fd::AsRawFd;
    // SAFETY: plain libc calls on our own file, ids and process; the
    // mapping is made and unmapped here, never referenced.
    unsafe {
        libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, 4096);
        let p = libc::mmap(
            core::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if p != libc::MAP_FAILED {
            libc::munmap(p, 4096);
        }
        libc::geteuid();
        libc::getuid();
        let (mut r, mut e, mut sv) = (0, 0, 0);
        libc::getresuid(&mut r, &mut e, &mut sv);
        libc::getgroups(0, core::ptr::null_mut());
        libc::syscall(libc::SYS_gettid);
        libc::kill(std::process::id() as i32, 0);
    }
    drop(file);
    std::fs::remove_file(&f).map_err(s)?;
    std::fs::remove_dir(scratch).map_err(s)
}
