//! Go's `syscall` package: a program (`go_sysv.go`, standard library
//! only, Go 1.19 or later) whose System V IPC goes through
//! `syscall.Syscall` and `Syscall6`, the system call instruction itself,
//! never libc: under `ipcns run` the supervisor serves all of it
//! (`Mode::command_served`), the library none.
//!
//! The test builds it with the `go` on PATH (Debian's `golang-go`) into a
//! temporary directory (its own GOCACHE and GOPATH, `CGO_ENABLED=0`: a
//! static binary, checked) and runs it in both modes. It checks every
//! figure itself and prints them; the lines must be [`EXPECTED`] on the
//! kernel and under ipcns:
//!
//! - a semaphore as the mutex around a counter in a segment, 4 goroutines
//!   x 250 increments through attachments of their own (5 at distinct
//!   addresses, `shm_nattch` 5), started together through a gate they
//!   sleep at (`GETNCNT` 4), the main goroutine asleep in semtimedop
//!   until they are done: the count exact, each worker's own, `shm_nattch`
//!   1, cpid and lpid, GETALL, GETVAL, GETPID, `sem_nsems`, a timed out
//!   semtimedop, shmdt twice (EINVAL);
//! - 5 goroutines asleep in msgrcv on an empty queue (seen in
//!   /proc/self/task/TID/syscall) while 2 others send 15 messages of
//!   varying length to each of 4 types: every message received once, by
//!   type, in each sender's order, content and byte counts exact;
//!   `msg_qnum`, `msg_cbytes`, `msg_qbytes`, `msg_lspid`; `msg_lrpid` after
//!   a message handed to a sleeping receiver (that thread's id, as
//!   `pipelined_send` records it); a queue filled to EAGAIN, then a
//!   sender asleep until a msgrcv makes room; type selection, MSG_EXCEPT,
//!   E2BIG and MSG_NOERROR; IPC_RMID waking the last sleeper with EIDRM.

use crate::harness::{self, TempDir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SOURCE: &str = include_str!("go_sysv.go");

/// What the program prints, in both modes.
const EXPECTED: &str = "\
shmat: 5 attachments at distinct addresses, nattch 5
semctl GETNCNT: 4 goroutines waiting at the gate
counter: 1000 = 4 goroutines x 250 increments under the semaphore
shmctl IPC_STAT: nattch 1, segsz 4096, cpid and lpid ours
semctl: GETALL [1 0 0], GETVAL 1, GETPID ours, IPC_STAT nsems 3
semtimedop: EAGAIN after its timeout
shmdt: nattch 0, EINVAL again; removed
msgget: queue made, found by its key, EEXIST with IPC_EXCL
msgrcv: 5 goroutines blocked on an empty queue
type 1: 30 messages, 15 from each of 2 senders in order, 3075 bytes
type 2: 30 messages, 15 from each of 2 senders in order, 3205 bytes
type 3: 30 messages, 15 from each of 2 senders in order, 3135 bytes
type 4: 30 messages, 15 from each of 2 senders in order, 3465 bytes
msgctl IPC_STAT: qnum 0, cbytes 0, qbytes 16384, lspid ours, key 0x67730001, mode 600
msgrcv asleep: lrpid the receiving thread's id
full: 16 messages of 1024 bytes (qnum 16, cbytes 16384), then EAGAIN
msgsnd: blocked on the full queue until a msgrcv, then qnum 16, cbytes 15364
msgrcv: type 7 found, ENOMSG with MSG_EXCEPT, E2BIG then 100 bytes with MSG_NOERROR, 14 left, then ENOMSG
msgctl IPC_RMID: the blocked receiver got EIDRM, IPC_STAT then EINVAL
ok
";

pub fn test() {
    harness::both("go_syscall", false, setup, |m, p| {
        let t0 = Instant::now();
        let out = harness::run(
            &mut m.command_served(&p.exe),
            Duration::from_secs(120),
            "go_sysv",
        );
        assert!(
            out.status.success() && out.stdout == EXPECTED,
            "go_syscall [{}]: go_sysv {}\n--- stdout\n{}\n--- expected\n{EXPECTED}--- stderr\n{}",
            m.name(),
            out.status,
            out.stdout,
            out.stderr
        );
        format!(
            "{} static binary (built in {:.1} s), ran in {:.2} s: counter 1000 = 4 x 250, 120 messages to 5 sleepers",
            p.version,
            p.build_secs,
            t0.elapsed().as_secs_f64()
        )
    });
}

/// The built program.
pub struct Program {
    exe: PathBuf,
    version: String,
    build_secs: f64,
    _tmp: TempDir,
}

fn setup() -> Result<Program, String> {
    let go = harness::which("go").ok_or("go is not installed (golang-go)")?;
    let tmp = TempDir::new("go");
    let src = tmp.join("src");
    std::fs::create_dir(&src).map_err(|e| e.to_string())?;
    std::fs::write(src.join("main.go"), SOURCE).map_err(|e| e.to_string())?;
    std::fs::write(src.join("go.mod"), "module gosysv\n\ngo 1.19\n").map_err(|e| e.to_string())?;
    let exe = tmp.join("go_sysv");
    let env = |c: &mut Command| {
        c.current_dir(&src)
            .env("GOCACHE", tmp.join("cache"))
            .env("GOPATH", tmp.join("gopath"))
            .env("GOENV", "off")
            .env("GOFLAGS", "")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("CGO_ENABLED", "0");
    };
    let mut v = Command::new(&go);
    v.arg("version");
    env(&mut v);
    let version = harness::run(&mut v, Duration::from_secs(60), "go version")
        .ok("go version")
        .stdout;
    let version = version
        .split_whitespace()
        .nth(2)
        .unwrap_or("go?")
        .to_string();
    let t0 = Instant::now();
    let mut b = Command::new(&go);
    b.args(["build", "-o"]).arg(&exe).arg(".");
    env(&mut b);
    let out = harness::run(&mut b, Duration::from_secs(600), "go build");
    if !out.status.success() {
        return Err(format!("go build failed ({}): {}", out.status, out.stderr));
    }
    let build_secs = t0.elapsed().as_secs_f64();
    if has_interpreter(&exe)? {
        return Err(format!(
            "{} is dynamically linked: CGO_ENABLED=0 was not honoured",
            exe.display()
        ));
    }
    Ok(Program {
        exe,
        version,
        build_secs,
        _tmp: tmp,
    })
}

/// Whether the ELF64 executable at `p` names a program interpreter
/// (a `PT_INTERP` program header: it is dynamically linked).
fn has_interpreter(p: &Path) -> Result<bool, String> {
    let b = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let u16_at = |o: usize| b.get(o..o + 2).map(|x| u16::from_le_bytes([x[0], x[1]]));
    let u32_at = |o: usize| {
        b.get(o..o + 4)
            .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    };
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .and_then(|x| x.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let not_elf = || format!("{} is not an ELF64 executable", p.display());
    if b.get(..5) != Some(b"\x7fELF\x02") {
        return Err(not_elf());
    }
    // e_phoff, e_phentsize, e_phnum (elf.h, Elf64_Ehdr); p_type first.
    let phoff = u64_at(0x20).ok_or_else(not_elf)? as usize;
    let (size, n) = (
        usize::from(u16_at(0x36).ok_or_else(not_elf)?),
        usize::from(u16_at(0x38).ok_or_else(not_elf)?),
    );
    const PT_INTERP: u32 = 3;
    Ok((0..n).any(|i| u32_at(phoff + i * size) == Some(PT_INTERP)))
}
