//! Running a test in each of the three modes, and small helpers for
//! shared memory, affinity and signals.
//!
//! A test calls [`in_all_modes`]: the test process itself runs the scenario
//! in whatever mode it is in (glibc's area on this system), then re-executes
//! the test binary filtered to the same test twice: once with
//! `GLIBC_TUNABLES=glibc.pthread.rseq=0` (own registration) and once under a
//! seccomp filter that fails `rseq` with ENOSYS, installed between fork and
//! exec so that glibc's own registration at start-up already fails
//! (fallback). Children inherit the environment and the filter, so workers
//! they start run in the same mode.

#![allow(unsafe_code, dead_code, clippy::undocumented_unsafe_blocks)]

use ipcns_rseq::Mode;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// Environment variable naming the role of a re-executed test binary.
pub const ROLE: &str = "IPCNS_RSEQ_TEST_ROLE";
/// Environment variable naming the mode a re-executed binary must be in.
pub const EXPECT: &str = "IPCNS_RSEQ_TEST_EXPECT";

/// The role of this process (`None` in the top-level test process).
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Runs `scenario` in this process and in children in the two other modes.
/// `test` is the test's name (the filter for the child).
pub fn in_all_modes(test: &str, scenario: impl Fn()) {
    if let Some(r) = role() {
        if r == "mode" {
            let want = std::env::var(EXPECT).unwrap();
            let m = ipcns_rseq::mode();
            assert_eq!(
                m.name(),
                want,
                "child expected mode {want}, got {:?}",
                ipcns_rseq::info()
            );
            eprintln!("[{test}] running in mode {m} ({:?})", ipcns_rseq::info());
            scenario();
        }
        return;
    }
    eprintln!(
        "[{test}] running in mode {} ({:?})",
        ipcns_rseq::mode(),
        ipcns_rseq::info()
    );
    scenario();
    for m in [Mode::Own, Mode::Fallback] {
        if m == ipcns_rseq::mode() {
            continue;
        }
        let out = mode_command(test, m, "mode").output().expect("spawn child");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "[{test}] child in mode {m} failed: {}\n{text}",
            out.status
        );
        assert!(
            text.contains("running in mode"),
            "[{test}] child in mode {m} did not run the test:\n{text}"
        );
        eprint!(
            "{}",
            text.lines()
                .filter(|l| l.starts_with('['))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        );
    }
}

/// A command re-running this test binary, filtered to `test`, in mode `m`
/// with role `role`.
pub fn mode_command(test: &str, m: Mode, role: &str) -> Command {
    let mut c = self_command(test, role);
    c.env(EXPECT, m.name());
    match m {
        Mode::Glibc => {
            c.env_remove("GLIBC_TUNABLES");
        }
        Mode::Own => {
            c.env("GLIBC_TUNABLES", "glibc.pthread.rseq=0");
        }
        Mode::Fallback => {
            // SAFETY: the closure only calls prctl and seccomp (async-signal-safe
            // system calls) on a filter built before fork.
            let prog = deny_rseq_filter();
            unsafe {
                c.pre_exec(move || install_filter(&prog));
            }
        }
    }
    c
}

/// A command re-running this test binary (same environment and seccomp
/// filter as this process), filtered to `test`, with role `role`.
pub fn self_command(test: &str, role: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdout(Stdio::null());
    c
}

fn deny_rseq_filter() -> Vec<libc::sock_filter> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 4), // seccomp_data.arch
        jeq(AUDIT_ARCH_X86_64, 1, 0),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0), // seccomp_data.nr
        jeq(libc::SYS_rseq as u32, 0, 1),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

fn install_filter(prog: &[libc::sock_filter]) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut _,
    };
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &fprog) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// An anonymous or file-backed `MAP_SHARED` mapping, unmapped on drop.
pub struct Shared {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: raw shared memory, accessed through the crate's operations.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Anonymous shared memory (inherited by `fork`).
    pub fn anon(len: usize) -> Shared {
        Self::map(len, -1, libc::MAP_ANONYMOUS)
    }

    /// Shared memory backed by `path`, created and sized if `create`.
    pub fn file(path: &str, len: usize, create: bool) -> Shared {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .unwrap();
        if create {
            f.set_len(len as u64).unwrap();
        }
        use std::os::fd::AsRawFd;
        Self::map(len, f.as_raw_fd(), 0)
    }

    fn map(len: usize, fd: i32, flags: i32) -> Shared {
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | flags,
                fd,
                0,
            )
        };
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Shared { ptr: p.cast(), len }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    unsafe { libc::gettid() }
}

/// Pins thread `tid` to `cpu`, or to every cpu when `cpu` is `None`. Errors
/// (a thread that already exited) are ignored.
pub fn set_affinity(tid: i32, cpu: Option<usize>) {
    let n = ipcns_rseq::possible_cpus();
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        match cpu {
            Some(c) => libc::CPU_SET(c % n, &mut set),
            None => (0..n).for_each(|c| libc::CPU_SET(c, &mut set)),
        }
        libc::sched_setaffinity(tid, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Sends `sig` to thread `tid` of this process.
pub fn tgkill(tid: i32, sig: i32) {
    unsafe {
        libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, sig);
    }
}

/// Installs `handler` for `sig` with SA_RESTART.
pub fn on_signal(sig: i32, handler: extern "C" fn(i32)) {
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = handler as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, core::ptr::null_mut()), 0);
    }
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
