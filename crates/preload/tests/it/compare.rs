//! Each C program on the kernel and through the library: the same output,
//! and nothing left in the kernel's System V IPC by the library's run.

use crate::support::{
    cc_or_skip, compile, is_root, kernel_or_skip, on_kernel, same_lines, scratch, skip, split_dump,
    text, through_lib,
};
use ipcns_core::{CreateOptions, Namespace};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Runs `tests/c/PROG.c` both ways and compares. `shared`: the library's
/// namespace is made first with mode 0666 (see `credentials`).
fn differential(test: &str, prog: &str, shared: bool) {
    if !cc_or_skip(test) {
        return;
    }
    let s = scratch(test);
    let bin = compile(prog, s.path(), &[]);
    if shared {
        Namespace::create_at(
            &s.path().join("ipcns.t"),
            CreateOptions {
                mode: 0o666,
                heap_size: 64 << 20,
                ..CreateOptions::default()
            },
        )
        .expect("create the shared namespace");
    }
    let kernel = kernel_or_skip(test);
    // Inside a fresh IPC namespace whenever unshare works (the kernel runs
    // need the same).
    let ours = through_lib(&bin, s.path(), "t", &[], kernel);
    let (out, dump) = split_dump(&text(&ours.stdout));
    assert!(
        ours.status.success(),
        "{test}: through libipcns.so: {}\nstdout:\n{out}\nstderr:\n{}",
        ours.status,
        text(&ours.stderr)
    );
    assert_eq!(text(&ours.stderr), "", "{test}: the library said something");
    assert!(!out.is_empty(), "{test}: no output");
    if !kernel {
        return;
    }
    // The kernel's /proc/sysvipc in the namespace the library's run had:
    // the three header lines and no object.
    assert_eq!(
        dump.len(),
        3,
        "{test}: the kernel saw objects:\n{}",
        dump.join("\n")
    );
    assert!(
        dump.iter().all(|l| l.trim_start().starts_with("key")),
        "{test}: the kernel saw objects:\n{}",
        dump.join("\n")
    );
    let k = on_kernel(&bin);
    assert!(
        k.status.success(),
        "{test}: on the kernel: {}\n{}",
        k.status,
        text(&k.stderr)
    );
    same_lines(test, &text(&k.stdout), &out);
}

/// Every exported call through glibc's declarations: successes, errnos,
/// buffers on the stack, in static storage and on the heap.
#[test]
fn calls() {
    differential("calls", "calls", false);
}

/// `syscall(SYS_...)` forms: semctl's union by value, IPC_64 commands,
/// shmat's address as the return value, other numbers passed through.
#[test]
fn raw_system_calls() {
    differential("raw", "raw", false);
}

/// Bad pointers: EFAULT exactly where the kernel gives it, never a fault.
#[test]
fn bad_pointers() {
    differential("efault", "efault", false);
}

/// fork and nattch, SEM_UNDO at exit, exec, sleepers woken by IPC_RMID
/// and by a send.
#[test]
fn processes() {
    differential("procs", "procs", false);
}

/// A process's end and its exec seen by another process right after EOF
/// on a pipe the process held, or right after a line from its new image
/// (never after waitpid): `_exit`, `_Exit`, `syscall(SYS_exit_group)` and
/// SIGKILL (through its death word) apply SEM_UNDO (sempid the dead
/// process's) and drop attachments, and a killed holder's lock is free to
/// an IPC_NOWAIT take; an
/// exec'd image that never calls System V IPC has its predecessor's
/// attachment dropped before `main` and its undo applied at `exit`; the
/// environment mark that arranges it is gone from the new image's
/// environment; a vfork child's exec leaves its parent's attachment.
#[test]
fn deaths_seen_by_others() {
    differential("deaths", "deaths", false);
}

/// The program's robust mutexes with the library's entry in the same
/// robust futex lists (`process/death.rs`): locked and unlocked in any
/// order around it, on several threads; a thread and a process (exit, and
/// SIGKILL) dying with one locked: EOWNERDEAD to the next locker, as
/// without the library.
#[test]
fn robust_mutexes_beside_the_death_words() {
    differential("robust", "robust", false);
}

/// remap_file_pages on attachments: the segment's own pages from pgoff
/// (never the pool file's table or another segment's range), atime,
/// dtime and lpid as the attachment's close and open set them, EINVAL and
/// the range unmapped for the last attachment of a removed segment (LTP's
/// shmctl05), the kernel's answers for refused arguments and other
/// mappings.
#[test]
fn remap_file_pages() {
    differential("remap", "remap", false);
}

/// First calls from sixteen threads at once, per-thread work on stack and
/// heap buffers, 300 short-lived threads.
#[test]
fn threads() {
    differential("threads", "threads", false);
}

/// Signal handlers: SIGUSR1 (SA_RESTART) 0 to 20 µs after a blocking
/// semop or msgrcv starts, 30 trials each, is EINTR within 200 ms every
/// time, as on the kernel; sigaction's oact (SA_RESETHAND's reset
/// included, siginterrupt), signal(), bsd_signal, sysv_signal and
/// sigset's return values, and the raw rt_sigaction read back exactly as
/// the program set them, with the kernel's errors.
#[test]
fn signal_handlers() {
    differential("signals", "signals", false);
}

/// unshare(CLONE_NEWIPC) in one thread of several moves that thread
/// alone, as on Linux: the threads it creates and the children it forks
/// follow it; the main thread keeps its set and removes it.
#[test]
fn unshare_in_a_thread() {
    differential("threadns", "threadns", false);
}

/// The memory calls on attachments: mprotect of a read-only attachment
/// to PROT_WRITE is EACCES as on the kernel, the other protections and
/// madvise answer as there; munmap and MAP_FIXED of a whole attachment
/// detach it (a removed segment's last: destroyed), mremap moves, shrinks
/// and grows one, and shmdt leaves the program's own pages put where
/// part of an attachment was.
#[test]
fn memory_calls_on_attachments() {
    differential("attachments", "attachments", false);
}

/// A stop and a continue (SIGSTOP, SIGCONT, no handler) of a process
/// blocked in semop or semtimedop: EINTR, as on the kernel (one thread,
/// two threads, a stop longer than the timeout, a SIGCONT handler); a
/// SIGCONT alone changes nothing; msgrcv and msgsnd go on waiting and
/// succeed.
#[test]
fn stop_and_continue() {
    differential("stops", "stops", false);
}

/// SIGSEGV and SIGBUS with the library's copies that may fault: bad
/// pointers on the heap, in mappings, past a file's end are EFAULT on
/// every thread (fault signals blocked, inside a SIGSEGV handler too); the
/// program's actions for both read back as it set them (sigaction,
/// signal, sysv_signal, the raw rt_sigaction) and run as the kernel runs
/// them (mask, SA_NODEFER, SA_RESETHAND, si_code and si_addr, a handler
/// that mends the page and returns); SIG_DFL and SIG_IGN children die of
/// a fault, SIG_IGN survives a sent SIGSEGV and is kept across exec.
#[test]
fn fault_signals() {
    differential("faults", "faults", false);
}

/// Credentials as of each call: seteuid, setgroups, raw setresuid,
/// setfsuid, setresuid for good, a child of nobody. Needs root. The
/// namespace is made shared (mode 0666): a process that drops to another
/// uid opens the namespace's files by their paths as that uid, and the
/// files' permissions are the namespace's boundary (in a private namespace
/// reached by its path shmat then fails with EACCES, where the kernel
/// would attach; through `ipcns run`'s descriptors it does not:
/// `uid_change_through_the_descriptors`).
#[test]
fn credentials() {
    if !is_root() {
        skip("credentials", "setuid and setgroups need root");
        return;
    }
    differential("creds", "creds", true);
}

/// A child that changes uid and execs, in a private namespace (mode
/// 0600) it reaches only through the descriptors `ipcns run` hands down
/// (`IPCNS_FD`, `IPCNS_POOL_FD`, made here as `ipcns run` makes them):
/// it attaches, makes and removes segments, takes a semaphore and makes a
/// queue as the objects' permissions allow, as in a kernel IPC namespace.
/// Needs root.
#[test]
fn uid_change_through_the_descriptors() {
    let test = "uid_change_through_the_descriptors";
    if !is_root() {
        skip(test, "setuid needs root");
        return;
    }
    if !cc_or_skip(test) {
        return;
    }
    // On tmpfs, where the segment pool can be made (a sparse file of
    // 2^63 bytes), as in ipcns run's default directory.
    let s = ipcns_testkit::TempDir::new_in(Path::new("/dev/shm"), "ipcns-preload-uidfd");
    let bin = compile("uidfd", s.path(), &[]);
    // The program runs as nobody after its exec: its directory must let
    // it through.
    let exe = std::env::temp_dir().join(format!("ipcns-uidfd-{}", std::process::id()));
    std::fs::copy(&bin, &exe).expect("copy the program");
    let ns = Namespace::create_at(
        &s.path().join("ipcns.t"),
        CreateOptions {
            mode: 0o600,
            ..CreateOptions::default()
        },
    )
    .expect("create the namespace");
    let fd = ns.file_dup().expect("the arena's descriptor");
    let pool = ns.pool_dup().expect("the pool's descriptor");
    for d in [&fd, &pool] {
        ipcns_sys::Fd::with_raw(d.as_raw_fd(), |f| f.set_cloexec(false))
            .expect("hand the descriptor down");
    }
    let (fd_s, pool_s) = (fd.as_raw_fd().to_string(), pool.as_raw_fd().to_string());
    let kernel = kernel_or_skip(test);
    let ours = through_lib(
        &exe,
        s.path(),
        "t",
        &[("IPCNS_FD", &fd_s), ("IPCNS_POOL_FD", &pool_s)],
        kernel,
    );
    let (out, _) = split_dump(&text(&ours.stdout));
    assert!(
        ours.status.success(),
        "{test}: through libipcns.so: {}\n{out}\n{}",
        ours.status,
        text(&ours.stderr)
    );
    assert_eq!(text(&ours.stderr), "", "{test}: the library said something");
    if kernel {
        let k = on_kernel(&exe);
        assert!(k.status.success(), "{test}: on the kernel: {}", k.status);
        same_lines(test, &text(&k.stdout), &out);
    }
    let _ = std::fs::remove_file(&exe);
}

/// unshare(CLONE_NEWIPC), its `syscall` form and a fork-like
/// `syscall(SYS_clone, CLONE_NEWIPC | SIGCHLD, 0...)`: a fresh namespace
/// (old keys ENOENT, ids from 0, /proc/sysvipc the new one's), kept
/// across exec, the clone's parent keeping its own. The kernel's side
/// needs root (CAP_SYS_ADMIN); the library's does not.
#[test]
fn unshare_ipc() {
    differential("unshare", "unshare", false);
}

/// `/proc/sysvipc/*` and the ipc sysctls through open, open64, openat
/// (relative to /proc and /proc/sys/kernel), the syscall() forms (openat2
/// too), write(2) with EINVAL and EFAULT, writes at a later offset ignored,
/// duplicates (dup, dup2, F_DUPFD), the limits taking effect, and stdio
/// (fopen for writing: the error at fclose).
#[test]
fn proc_files() {
    differential("procfs", "procfs", false);
}

/// SHM_HUGETLB's errnos where the kernel has no huge pages configured
/// (this machine and CI: HugePages_Total 0): EINVAL, EPERM, ENOMEM in the
/// kernel's order. Needs root (setresuid); with huge pages configured the
/// kernel would grant them and the outputs would differ: skipped then.
#[test]
fn hugetlb_refused() {
    if !is_root() {
        skip("hugetlb_refused", "setresuid needs root");
        return;
    }
    // The core's tests raise the pool for a while
    // (crates/ipc/tests/it/hugetlb.rs): not meanwhile.
    let lock = std::fs::File::create("/tmp/ipcns-nr_hugepages.lock");
    let _held = lock.as_ref().map(|f| f.lock());
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("HugePages_Total:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    if total != 0 {
        skip(
            "hugetlb_refused",
            "the kernel has huge pages configured (HugePages_Total != 0)",
        );
        return;
    }
    differential("hugetlb", "hugetlb", true);
}

/// RLIMIT_NOFILE lowered to the descriptors the program has (its soft
/// limit at the lowest free number; tests/c/nofile.c): the kernel needs no
/// descriptor for System V IPC, and through the library semaphores and
/// messages work the same. With the namespace handed down (`IPCNS_FD`,
/// here 0: the arena is the program's standard input), the first call at
/// the limit maps it through that descriptor itself, which it cannot
/// duplicate (before: ENOSYS for every call); with a first call before
/// the limit ("early"), without a handed-down descriptor. Segments: the
/// library answers shmget ENOMEM (no descriptor to make the file and
/// reserve its pages with) where the kernel grants it; with SHM_NORESERVE
/// it grants it (the file made by path) and shmat is ENOMEM (no
/// descriptor to map it with) until the program has one to spare; then
/// the segment maps and works. Every other line is the kernel's.
#[test]
fn no_descriptor_to_spare() {
    use std::process::{Command, Stdio};
    const TEST: &str = "no_descriptor_to_spare";
    if !cc_or_skip(TEST) {
        return;
    }
    let s = scratch(TEST);
    let bin = compile("nofile", s.path(), &[]);
    let arena = s.path().join("ipcns.t");
    Namespace::create_at(&arena, CreateOptions::default()).expect("create the namespace");
    let run = |args: &[&str], handed_down: bool| {
        let mut c = Command::new(&bin);
        c.args(args)
            .env("LD_PRELOAD", crate::support::lib())
            .env("IPCNS_DIR", s.path())
            .env("IPCNS", "t")
            .env_remove("IPCNS_SHARED");
        if handed_down {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&arena)
                .expect("open the arena");
            c.env("IPCNS_FD", "0").stdin(Stdio::from(f));
        } else {
            c.env_remove("IPCNS_FD").stdin(Stdio::null());
        }
        let o = c.output().expect("run the program");
        assert!(o.status.success(), "{TEST} {args:?}: {}", o.status);
        assert_eq!(
            text(&o.stderr),
            "",
            "{TEST} {args:?}: the library said something"
        );
        text(&o.stdout)
    };
    let ours = [
        run(&[], true),
        run(&["early"], false),
        run(&["early", "shm"], false),
    ];
    // What only the library answers, in the order of the program's lines.
    let shm_differs = [
        (
            "shmget(IPC_PRIVATE, 4096, 0600) = 0",
            "shmget(IPC_PRIVATE, 4096, 0600) = -1 ENOMEM",
        ),
        ("shmat(id, 0, 0) = ok", "shmat(id, 0, 0) = -1 ENOMEM"),
    ];
    let mut shm_lines = ours[2].clone();
    for (kernel, lib) in shm_differs {
        assert!(
            shm_lines.contains(lib),
            "{TEST}: no {lib:?} in\n{}",
            ours[2]
        );
        shm_lines = shm_lines.replacen(lib, kernel, 1);
    }
    for line in [
        "p = ok",
        "p[4095] = 1",
        "shmdt(p) = 0",
        "shmctl(id, IPC_RMID, 0) = 0",
    ] {
        assert!(
            shm_lines.lines().any(|l| l == line),
            "{TEST}: no {line:?} in\n{}",
            ours[2]
        );
    }
    if !kernel_or_skip(TEST) {
        return;
    }
    for (args, ours) in [
        (&[][..], &ours[0]),
        (&["early"][..], &ours[1]),
        (&["early", "shm"][..], &shm_lines),
    ] {
        let k = Command::new("unshare")
            .arg("--ipc")
            .arg(&bin)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run unshare");
        assert!(k.status.success(), "{TEST}: on the kernel: {}", k.status);
        same_lines(TEST, &text(&k.stdout), ours);
    }
}
