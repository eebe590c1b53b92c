//! PHP's System V extensions (sysvsem, sysvshm, sysvmsg: shared modules
//! of Debian's `php-common`) with `pcntl_fork` (built into Debian's
//! `php-cli`), and a C program speaking to PHP through a queue.
//!
//! Which path serves PHP under `ipcns run`: the supervisor. PHP loads its
//! extensions with `dlopen(RTLD_DEEPBIND)` on glibc, so sysvsem.so's
//! `semget` binds to libc's own, not to the one the preloaded
//! `libipcns.so` exports: its calls reach the kernel's system calls,
//! which the supervisor serves (`Mode::command_served`). With the library alone
//! (`--no-supervisor`) they fail with ENOSYS under `--strict`, which the
//! ipcns mode looks at first and reports. The C program (`php_peer.c`,
//! built with gcc, dynamic glibc) is served by the library: it prints the
//! file its `msgrcv` binds to (libc.so.6 on the kernel, libipcns.so under
//! ipcns). Both meet in the one namespace of the run.
//!
//! `php_sysv.php` checks every figure itself and prints them; the lines
//! must be [`expected`] in both modes:
//!
//! - sem_get/sem_acquire/sem_release around a counter kept with
//!   shm_attach/shm_put_var/shm_get_var by 4 forked processes x 100
//!   increments: 400 exactly, each value read by one increment; a held
//!   semaphore refuses another process's non-blocking sem_acquire;
//! - 3 forked processes asleep in msg_receive (seen in /proc/PID/syscall),
//!   20 serialized messages each from the parent, checked in order, and
//!   their reports back; msg_stat_queue, MSG_IPC_NOWAIT's ENOMSG,
//!   msg_remove_queue;
//! - PHP to C while the C program sleeps in msgrcv (and its answer), C to
//!   PHP while PHP sleeps in msg_receive (512 bytes, 0 to 255 twice), with
//!   `msg_lspid` the C program's and `msg_lrpid` PHP's (the thread a
//!   message was handed to asleep: `pipelined_send`).

use crate::harness::{self, Mode, TempDir};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = include_str!("php_sysv.php");
const PEER: &str = include_str!("php_peer.c");

/// What the script prints in mode `m`.
fn expected(m: &Mode) -> String {
    let lib = if m.is_ipcns() {
        "libipcns.so"
    } else {
        "libc.so.6"
    };
    format!(
        "\
sem_acquire: a held semaphore refuses another process's non-blocking acquire
counter: 400 = 4 processes x 100 increments under sem_acquire, each value read once
shm_remove, sem_remove: done
msg_receive: 3 processes blocked in msgrcv
receiver 1: 20 messages in order, 1330 bytes
receiver 2: 20 messages in order, 1330 bytes
receiver 3: 20 messages in order, 1330 bytes
msg_stat_queue: msg_qnum 0, msg_lspid a receiver's, msg_perm.mode 600
msg_receive MSG_IPC_NOWAIT: ENOMSG
msg_remove_queue: gone
peer: msgrcv and msgsnd bound to {lib}
php -> C: 316 bytes received by the sleeping peer, its answer back
C -> php: 512 bytes, 0 to 255 twice, received while sleeping; msg_lspid the peer's, msg_lrpid ours
peer: 316 bytes from php while asleep, answered; 512 bytes to php while it slept; bye
ok
"
    )
}

pub fn test() {
    harness::both("php_sysv", false, setup, |m, s| {
        let alone = if m.is_ipcns() {
            library_alone(m, s)
        } else {
            String::new()
        };
        let t0 = Instant::now();
        let mut c = m.command_served(&s.php);
        c.arg(&s.script).arg(&s.peer);
        let out = harness::run(&mut c, Duration::from_secs(120), "php_sysv.php");
        let want = expected(m);
        assert!(
            out.status.success() && out.stdout == want,
            "php_sysv [{}]: php {}\n--- stdout\n{}\n--- expected\n{want}--- stderr\n{}",
            m.name(),
            out.status,
            out.stdout,
            out.stderr
        );
        format!(
            "{} ran in {:.2} s: counter 400 = 4 x 100, 60 messages to 3 sleepers, PHP <-> C{alone}",
            s.version,
            t0.elapsed().as_secs_f64()
        )
    });
}

/// Under ipcns: what PHP's sem_get does with the library alone.
fn library_alone(m: &Mode, s: &Php) -> String {
    let mut c = m.command(&s.php);
    c.args([
        "-r",
        "if (@sem_get(0x70687099) === false) { echo error_get_last()['message']; exit(3); }",
    ]);
    let out = harness::run(&mut c, Duration::from_secs(60), "php -r sem_get");
    if out.status.code() == Some(3) && out.stdout.contains("Function not implemented") {
        "; library alone: sem_get fails with ENOSYS (RTLD_DEEPBIND)".to_string()
    } else {
        format!(
            "; library alone: sem_get ends {} ({})",
            out.status,
            out.stdout.trim()
        )
    }
}

/// PHP, the script and the C program.
pub struct Php {
    php: PathBuf,
    version: String,
    script: PathBuf,
    peer: PathBuf,
    _tmp: TempDir,
}

fn setup() -> Result<Php, String> {
    let php = harness::which("php").ok_or("php is not installed (php-cli)")?;
    let gcc = harness::which("gcc").ok_or("gcc is not installed")?;
    let m = harness::run(
        Command::new(&php).arg("-m"),
        Duration::from_secs(60),
        "php -m",
    )
    .ok("php -m")
    .stdout;
    for ext in ["pcntl", "sysvmsg", "sysvsem", "sysvshm"] {
        if !m.lines().any(|l| l.trim() == ext) {
            return Err(format!("php has no {ext} extension (php-cli, php-common)"));
        }
    }
    let v = harness::run(
        Command::new(&php).args(["-r", "echo PHP_VERSION;"]),
        Duration::from_secs(60),
        "php version",
    )
    .ok("php -r PHP_VERSION")
    .stdout;
    let tmp = TempDir::new("php");
    let script = tmp.join("php_sysv.php");
    std::fs::write(&script, SCRIPT).map_err(|e| e.to_string())?;
    let src = tmp.join("php_peer.c");
    std::fs::write(&src, PEER).map_err(|e| e.to_string())?;
    let peer = tmp.join("php_peer");
    let out = harness::run(
        Command::new(gcc)
            .args(["-O2", "-Wall", "-o"])
            .arg(&peer)
            .arg(&src),
        Duration::from_secs(120),
        "gcc php_peer.c",
    );
    if !out.status.success() {
        return Err(format!("gcc php_peer.c failed: {}", out.stderr));
    }
    Ok(Php {
        php,
        version: format!("PHP {}", v.trim()),
        script,
        peer,
        _tmp: tmp,
    })
}
