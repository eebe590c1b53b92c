//! `ipcns run --strict`: a seccomp filter that makes the kernel's own
//! System V IPC system calls fail with ENOSYS, so that a program whose IPC
//! leaks past `libipcns.so` (a static binary, Go, a raw `syscall`) fails
//! loudly instead of silently using the host's namespace.
//!
//! The filter is classic BPF, written by hand (seccomp(2), "Filter
//! programs"): load `seccomp_data.arch`; for each architecture a process
//! of this machine can make system calls as (x86-64 and, through `int
//! 0x80`, i386; aarch64 and AArch32), load `seccomp_data.nr`, fold x32's
//! bit away on x86-64 (x32 uses x86-64's numbers for these calls, with
//! `__X32_SYSCALL_BIT` set), and compare it with that architecture's IPC
//! numbers: a match returns `SECCOMP_RET_ERRNO | ENOSYS`, anything else
//! `SECCOMP_RET_ALLOW`. A system call made as an architecture not listed
//! (impossible on these kernels) kills the process, as the example in
//! seccomp(2) does: its numbers mean other calls. `libipcns.so` never makes these
//! calls, so only leaks are refused.
//!
//! The filter is installed in the child between fork and exec, after
//! `PR_SET_NO_NEW_PRIVS` (needed without CAP_SYS_ADMIN): setuid and
//! file-capability programs then run without gaining privileges. Every
//! descendant inherits it; nothing can remove it.
//!
//! # Safety
//! [`install`] runs in the child between fork and exec, so it only makes
//! system calls (`prctl`), reading a [`Filter`] built before the fork whose
//! instructions outlive the call; the kernel copies the program and keeps
//! no pointer into it.
#![allow(unsafe_code)]

use std::io;

/// The classic BPF opcodes the filter uses (linux/bpf_common.h).
/// `BPF_LD | BPF_W | BPF_ABS` (0x00 | 0x00 | 0x20).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_ALU_AND_K: u16 = 0x04 | 0x50;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_RET_K: u16 = 0x06;

/// Offsets in `struct seccomp_data` (linux/seccomp.h): `int nr; __u32 arch; ...`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA);
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

/// linux/audit.h: `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `EM_386 | __AUDIT_ARCH_LE`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
/// `EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub const AUDIT_ARCH_AARCH64: u32 = 183 | 0x8000_0000 | 0x4000_0000;
/// `EM_ARM | __AUDIT_ARCH_LE`.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub const AUDIT_ARCH_ARM: u32 = 40 | 0x4000_0000;
/// asm/unistd_x32.h: x32 system calls are x86-64's numbers with this bit.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// One architecture's System V IPC system call numbers.
pub struct Arch {
    pub audit: u32,
    /// Bits cleared from the number before comparing (x32's bit).
    pub fold: u32,
    pub calls: &'static [(&'static str, u32)],
}

/// x86-64 (asm/unistd_64.h), x32 folded in.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const X86_64: Arch = Arch {
    audit: AUDIT_ARCH_X86_64,
    fold: X32_SYSCALL_BIT,
    calls: &[
        ("shmget", 29),
        ("shmat", 30),
        ("shmctl", 31),
        ("semget", 64),
        ("semop", 65),
        ("semctl", 66),
        ("shmdt", 67),
        ("msgget", 68),
        ("msgsnd", 69),
        ("msgrcv", 70),
        ("msgctl", 71),
        ("semtimedop", 220),
    ],
};

/// i386 (asm/unistd_32.h), as a 64-bit kernel sees `int 0x80`: the
/// `ipc(2)` multiplexer, the direct calls of Linux 5.1 and later, and
/// `semtimedop_time64`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub const I386: Arch = Arch {
    audit: AUDIT_ARCH_I386,
    fold: 0,
    calls: &[
        ("ipc", 117),
        ("semget", 393),
        ("semctl", 394),
        ("shmget", 395),
        ("shmctl", 396),
        ("shmat", 397),
        ("shmdt", 398),
        ("msgget", 399),
        ("msgsnd", 400),
        ("msgrcv", 401),
        ("msgctl", 402),
        ("semtimedop_time64", 420),
    ],
};

/// aarch64 (asm-generic/unistd.h).
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub const AARCH64: Arch = Arch {
    audit: AUDIT_ARCH_AARCH64,
    fold: 0,
    calls: &[
        ("msgget", 186),
        ("msgctl", 187),
        ("msgrcv", 188),
        ("msgsnd", 189),
        ("semget", 190),
        ("semctl", 191),
        ("semtimedop", 192),
        ("semop", 193),
        ("shmget", 194),
        ("shmctl", 195),
        ("shmat", 196),
        ("shmdt", 197),
    ],
};

/// AArch32 EABI (arch/arm/tools/syscall.tbl), as an arm64 kernel runs it;
/// `ipc` is OABI's, refused too in case a kernel serves it.
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub const ARM: Arch = Arch {
    audit: AUDIT_ARCH_ARM,
    fold: 0,
    calls: &[
        ("ipc", 117),
        ("semop", 298),
        ("semget", 299),
        ("semctl", 300),
        ("msgsnd", 301),
        ("msgrcv", 302),
        ("msgget", 303),
        ("msgctl", 304),
        ("shmat", 305),
        ("shmdt", 306),
        ("shmget", 307),
        ("shmctl", 308),
        ("semtimedop", 312),
        ("semtimedop_time64", 420),
    ],
};

/// The architectures a process on this machine can call the kernel as.
#[cfg(target_arch = "x86_64")]
pub const NATIVE: &[&Arch] = &[&X86_64, &I386];
#[cfg(target_arch = "aarch64")]
pub const NATIVE: &[&Arch] = &[&AARCH64, &ARM];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const NATIVE: &[&Arch] = &[];

/// A seccomp filter program, built before the fork.
pub struct Filter {
    code: Vec<libc::sock_filter>,
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JMP_JEQ_K,
        jt,
        jf,
        k,
    }
}

impl Filter {
    /// The filter for `arches` (see the module's doc).
    pub fn new(arches: &[&Arch]) -> Filter {
        let mut code = vec![stmt(BPF_LD_W_ABS, OFF_ARCH)];
        for a in arches {
            let n = a.calls.len();
            // After the arch test: load, fold, n tests, allow, deny.
            let body = 1 + usize::from(a.fold != 0) + n + 2;
            code.push(jump(a.audit, 0, body as u8));
            code.push(stmt(BPF_LD_W_ABS, OFF_NR));
            if a.fold != 0 {
                code.push(stmt(BPF_ALU_AND_K, !a.fold));
            }
            for (i, &(_, nr)) in a.calls.iter().enumerate() {
                // A match skips the remaining tests and the allow.
                code.push(jump(nr, (n - i) as u8, 0));
            }
            code.push(stmt(BPF_RET_K, RET_ALLOW));
            code.push(stmt(BPF_RET_K, RET_ENOSYS));
        }
        code.push(stmt(BPF_RET_K, RET_KILL));
        Filter { code }
    }

    /// This machine's filter.
    pub fn native() -> Filter {
        Filter::new(NATIVE)
    }

    #[cfg(test)]
    fn code(&self) -> &[libc::sock_filter] {
        &self.code
    }
}

/// The supervisor's filter (`supervisor/`): x86-64's twelve System V IPC
/// calls and the calls it hears of ([`HEARD`]) go to the supervisor
/// (`SECCOMP_RET_USER_NOTIF`), the IPC calls of x32 and i386 fail with ENOSYS (their
/// structures are laid out otherwise, and nothing serves them: they must
/// not reach the kernel's namespace either), anything else is allowed; a
/// call made as an unknown architecture kills, as in [`Filter::new`].
#[cfg(target_arch = "x86_64")]
pub fn supervised(opens: bool) -> Filter {
    /// An instruction whose jump targets are labels.
    enum Op {
        Load(u32),
        And(u32),
        /// Jump to the label if the accumulator equals `k`, else go on.
        IfEq(u32, usize),
        /// Jump to the label unless the accumulator equals `k`.
        IfNe(u32, usize),
        Ret(u32),
        Label(usize),
    }
    const X32: usize = 1;
    const COMPAT: usize = 2;
    const NOTIFY: usize = 3;
    const DENY: usize = 4;
    const KILL: usize = 5;
    let mut ops = vec![
        Op::Load(OFF_ARCH),
        Op::IfNe(AUDIT_ARCH_X86_64, COMPAT),
        Op::Load(OFF_NR),
        Op::And(X32_SYSCALL_BIT),
        Op::IfNe(0, X32),
        Op::Load(OFF_NR),
    ];
    let opens = if opens { OPENS } else { &[] };
    for &(_, nr) in X86_64.calls.iter().chain(HEARD).chain(opens) {
        ops.push(Op::IfEq(nr, NOTIFY));
    }
    ops.extend([
        Op::Ret(RET_ALLOW),
        Op::Label(X32),
        Op::Load(OFF_NR),
        Op::And(!X32_SYSCALL_BIT),
    ]);
    for &(_, nr) in X86_64.calls {
        ops.push(Op::IfEq(nr, DENY));
    }
    ops.extend([
        Op::Ret(RET_ALLOW),
        Op::Label(COMPAT),
        Op::IfNe(AUDIT_ARCH_I386, KILL),
        Op::Load(OFF_NR),
    ]);
    for &(_, nr) in I386.calls {
        ops.push(Op::IfEq(nr, DENY));
    }
    ops.extend([
        Op::Ret(RET_ALLOW),
        Op::Label(NOTIFY),
        Op::Ret(libc::SECCOMP_RET_USER_NOTIF),
        Op::Label(DENY),
        Op::Ret(RET_ENOSYS),
        Op::Label(KILL),
        Op::Ret(RET_KILL),
    ]);
    // Labels to instruction indices, then relative jumps (all forward,
    // all short: the program is under 60 instructions).
    let mut at = [0usize; 6];
    let mut n = 0;
    for op in &ops {
        match op {
            Op::Label(l) => at[*l] = n,
            _ => n += 1,
        }
    }
    let mut code = Vec::with_capacity(n);
    for op in &ops {
        let here = code.len();
        let rel = |l: usize| (at[l] - here - 1) as u8;
        code.push(match *op {
            Op::Load(k) => stmt(BPF_LD_W_ABS, k),
            Op::And(k) => stmt(BPF_ALU_AND_K, k),
            Op::IfEq(k, l) => jump(k, rel(l), 0),
            Op::IfNe(k, l) => jump(k, 0, rel(l)),
            Op::Ret(k) => stmt(BPF_RET_K, k),
            Op::Label(_) => continue,
        });
    }
    Filter { code }
}

/// Calls the supervisor hears of before the kernel makes them (and lets
/// through): x86-64's exit_group (a process's undo entries and
/// attachments are finished before it is gone, as the kernel's exit
/// does), and what changes what it keeps of a caller between calls: its
/// program (the execs), credentials (the set*id calls, capset), limits
/// (setrlimit, prlimit64: RLIMIT_MEMLOCK) and user namespace (unshare,
/// setns). All rare; each costs its caller one round trip.
#[cfg(target_arch = "x86_64")]
pub const HEARD: &[(&str, u32)] = &[
    ("exit_group", 231),
    ("execve", 59),
    ("execveat", 322),
    ("setuid", 105),
    ("setgid", 106),
    ("setreuid", 113),
    ("setregid", 114),
    ("setgroups", 116),
    ("setresuid", 117),
    ("setresgid", 119),
    ("setfsuid", 122),
    ("setfsgid", 123),
    ("capset", 126),
    ("setrlimit", 160),
    ("prlimit64", 302),
    ("unshare", 272),
    ("setns", 308),
];

/// x86-64's opens, which the supervisor serves under `--serve-proc` for
/// `/proc/sysvipc/*` and the IPC sysctls (and lets through otherwise).
#[cfg(target_arch = "x86_64")]
pub const OPENS: &[(&str, u32)] = &[("open", 2), ("openat", 257), ("openat2", 437)];

/// Fails unless this kernel has seccomp filters: `prctl(PR_GET_SECCOMP)`
/// is EINVAL without CONFIG_SECCOMP (prctl(2)). Run in the parent, so the
/// error is said plainly rather than as a failed exec.
pub fn available() -> io::Result<()> {
    // SAFETY: PR_GET_SECCOMP takes no pointer; the unused arguments are 0.
    let r = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)` and `prctl(PR_SET_SECCOMP,
/// SECCOMP_MODE_FILTER, &prog)`: installs `f` on the calling thread (the
/// only thread of a forked child). Async-signal-safe: system calls only.
pub fn install(f: &Filter) -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let prog = libc::sock_fprog {
        // Far below u16::MAX: two architectures of at most 14 calls.
        len: f.code.len() as u16,
        filter: f.code.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `f.code`, which lives across the call; the
    // kernel copies the instructions and only reads them.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const libc::sock_fprog,
            0,
            0,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER |
/// flags, &prog)`, after `PR_SET_NO_NEW_PRIVS` if `no_new_privs` (needed
/// without CAP_SYS_ADMIN): installs `f` on the calling thread and returns
/// the listener's descriptor. Async-signal-safe: system calls only.
pub fn install_listener(f: &Filter, flags: libc::c_ulong, no_new_privs: bool) -> io::Result<i32> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers.
    if no_new_privs && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let prog = libc::sock_fprog {
        len: f.code.len() as u16,
        filter: f.code.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `f.code`, which lives across the call; the
    // kernel copies the instructions and only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel's classic BPF interpreter would return for a system
    /// call `nr` made as `arch`: the opcodes the filter uses, every jump
    /// forward and inside the program (else a failure).
    fn run(code: &[libc::sock_filter], arch: u32, nr: u32) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        for _ in 0..=code.len() {
            let i = code[pc];
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        k => panic!("load of seccomp_data offset {k}"),
                    }
                }
                BPF_ALU_AND_K => acc &= i.k,
                BPF_JMP_JEQ_K => {
                    pc += usize::from(if acc == i.k { i.jt } else { i.jf });
                }
                BPF_RET_K => return i.k,
                c => panic!("opcode {c:#x}"),
            }
            pc += 1;
            assert!(pc < code.len(), "jump past the end at {pc}");
        }
        panic!("the program loops");
    }

    const ALL: [&Arch; 4] = [&X86_64, &I386, &AARCH64, &ARM];

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_supervised_filter_notifies_x86_64s_calls_and_denies_the_others() {
        let f = supervised(false);
        let code = f.code();
        let ipc: Vec<u32> = X86_64.calls.iter().map(|c| c.1).collect();
        for nr in 0..1024u32 {
            let want = if ipc.contains(&nr) || HEARD.iter().any(|h| h.1 == nr) {
                libc::SECCOMP_RET_USER_NOTIF
            } else {
                RET_ALLOW
            };
            assert_eq!(run(code, AUDIT_ARCH_X86_64, nr), want, "x86-64 {nr}");
            let x32 = if ipc.contains(&nr) {
                RET_ENOSYS
            } else {
                RET_ALLOW
            };
            assert_eq!(
                run(code, AUDIT_ARCH_X86_64, nr | X32_SYSCALL_BIT),
                x32,
                "x32 {nr}"
            );
        }
        let i386: Vec<u32> = I386.calls.iter().map(|c| c.1).collect();
        for nr in 0..1024u32 {
            let want = if i386.contains(&nr) {
                RET_ENOSYS
            } else {
                RET_ALLOW
            };
            assert_eq!(run(code, AUDIT_ARCH_I386, nr), want, "i386 {nr}");
        }
        assert_eq!(run(code, AUDIT_ARCH_AARCH64, 0), RET_KILL);
        // The opens only with --serve-proc.
        let with = supervised(true);
        for &(_, nr) in OPENS {
            assert_eq!(run(code, AUDIT_ARCH_X86_64, nr), RET_ALLOW);
            assert_eq!(
                run(with.code(), AUDIT_ARCH_X86_64, nr),
                libc::SECCOMP_RET_USER_NOTIF
            );
        }
    }

    #[test]
    fn every_ipc_call_of_every_arch_gets_enosys_and_nothing_else_does() {
        let f = Filter::new(&ALL);
        let code = f.code();
        for a in ALL {
            let ipc: Vec<u32> = a.calls.iter().map(|c| c.1).collect();
            for nr in 0..1024u32 {
                let want = if ipc.contains(&nr) {
                    RET_ENOSYS
                } else {
                    RET_ALLOW
                };
                assert_eq!(run(code, a.audit, nr), want, "arch {:#x} nr {nr}", a.audit);
            }
        }
        // Every IPC call is on the list once.
        for a in ALL {
            let mut n: Vec<u32> = a.calls.iter().map(|c| c.1).collect();
            n.sort();
            n.dedup();
            assert_eq!(n.len(), a.calls.len());
            assert!(a.calls.len() >= 12);
        }
    }

    #[test]
    fn x32_calls_are_folded_onto_x86_64_numbers() {
        let f = Filter::new(&[&X86_64, &I386]);
        for &(name, nr) in X86_64.calls {
            assert_eq!(
                run(f.code(), AUDIT_ARCH_X86_64, nr | X32_SYSCALL_BIT),
                RET_ENOSYS,
                "x32 {name}"
            );
        }
        // x32's own numbers (512 and up) and x86-64's others pass.
        for nr in [0, 1, 59, 512, 520, 547] {
            assert_eq!(
                run(f.code(), AUDIT_ARCH_X86_64, nr | X32_SYSCALL_BIT),
                RET_ALLOW
            );
        }
        // i386's numbers are not folded: 64 is getppid there.
        assert_eq!(run(f.code(), AUDIT_ARCH_I386, 64), RET_ALLOW);
    }

    #[test]
    fn a_call_as_an_unknown_architecture_kills() {
        let f = Filter::native();
        for nr in [0, 1, 60, 231] {
            assert_eq!(run(f.code(), 0x1234, nr), RET_KILL);
        }
        assert_eq!(run(Filter::new(&[]).code(), AUDIT_ARCH_X86_64, 0), RET_KILL);
    }

    /// libc's number of system call `name` on this machine.
    fn libc_nr(name: &str) -> Option<i64> {
        Some(match name {
            "shmget" => libc::SYS_shmget,
            "shmat" => libc::SYS_shmat,
            "shmctl" => libc::SYS_shmctl,
            "shmdt" => libc::SYS_shmdt,
            "semget" => libc::SYS_semget,
            "semop" => libc::SYS_semop,
            "semctl" => libc::SYS_semctl,
            "semtimedop" => libc::SYS_semtimedop,
            "msgget" => libc::SYS_msgget,
            "msgsnd" => libc::SYS_msgsnd,
            "msgrcv" => libc::SYS_msgrcv,
            "msgctl" => libc::SYS_msgctl,
            _ => return None,
        })
    }

    #[test]
    fn the_native_filter_is_libcs_numbers_and_covers_compat_calls() {
        let f = Filter::native();
        let native = NATIVE[0];
        assert_eq!(native.calls.len(), 12);
        for &(name, nr) in native.calls {
            assert_eq!(libc_nr(name), Some(i64::from(nr)), "{name}");
            assert_eq!(run(f.code(), native.audit, nr), RET_ENOSYS, "{name}");
        }
        assert_eq!(
            run(f.code(), native.audit, libc::SYS_getpid as u32),
            RET_ALLOW
        );
        // The compat architecture's semget (i386 393, AArch32 299).
        let compat = NATIVE[1];
        let semget = compat.calls.iter().find(|c| c.0 == "semget").unwrap().1;
        assert_eq!(run(f.code(), compat.audit, semget), RET_ENOSYS);
    }
}
