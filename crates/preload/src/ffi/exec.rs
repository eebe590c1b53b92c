//! The hooks the exec family calls (`c/exec.c`: execve, execv, execvp,
//! execvpe, execl, execlp, execle, fexecve, execveat; and
//! `syscall(SYS_execve / SYS_execveat)` here), and the wait family.
//!
//! An execve kills every other thread of the process wherever it is, the
//! group leader included, whose thread id the execing thread then takes;
//! the kernel's IPC calls are atomic to that, the library's are user-space
//! code. So before the exec, the core freezes the process at its lock
//! gate (no other thread holds an arena lock, none takes one) and takes
//! the leader's sleeping call, if any, off its queue (`ipcns::life`); if
//! the exec fails, the process is thawed and that call starts over.
//!
//! A wait that reaps a child (`wait`, `waitpid`, `wait3`, `wait4`,
//! `waitid`, and the `syscall` forms of wait4 and waitid) finishes the
//! child's record at once (its SEM_UNDO adjustments applied, its
//! attachments dropped), as the kernel had done before the wait returned,
//! so the parent sees what it would see on Linux.
//!
//! # Safety
//! The exported names interpose the C library's on purpose (`no_mangle`);
//! the exec family's are naked jumps to their C bodies, which take the
//! C library's prototypes.
//! Each wait passes the program's arguments to the next definition
//! unchanged, and reads back only the status word and the `siginfo_t`
//! the program gave it, after the call wrote them; the pointers are the
//! program's, valid for the call as the C library requires.
#![allow(unsafe_code)]

use crate::next;
use crate::state;
use core::ffi::{c_char, c_int, c_long};

/// The exec family's exported names: each a jump to its C body in
/// `c/exec.c` (`__ipcns_c_NAME`), which the linker's export list (Rust's
/// own symbols only) would otherwise hide. A naked jump leaves every
/// register and the stack as the caller set them, variadic arguments
/// included.
macro_rules! exported_from_c {
    ($($name:ident => $body:ident),* $(,)?) => {
        unsafe extern "C" {
            $(fn $body();)*
        }
        $(
            #[doc = concat!("`", stringify!($name), "`: see `c/exec.c`.")]
            #[unsafe(naked)]
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name() {
                #[cfg(target_arch = "x86_64")]
                core::arch::naked_asm!("jmp {}", sym $body);
                #[cfg(target_arch = "aarch64")]
                core::arch::naked_asm!("b {}", sym $body);
            }
        )*
    };
}

exported_from_c! {
    execve => __ipcns_c_execve,
    execv => __ipcns_c_execv,
    execvp => __ipcns_c_execvp,
    execvpe => __ipcns_c_execvpe,
    fexecve => __ipcns_c_fexecve,
    execveat => __ipcns_c_execveat,
    execl => __ipcns_c_execl,
    execlp => __ipcns_c_execlp,
    execle => __ipcns_c_execle,
}

/// Called by `c/exec.c` before an exec: bit 0, the process was frozen
/// (thaw it if the exec fails); bit 1, the fault signals were taken over
/// (give them back if it fails); bit 2 ([`MARK`]), the process has a
/// record, so the new image must find it at once: its environment gets
/// [`EXEC_MARK`]`=PID` first, and the library, loaded into it, takes the
/// record over before `main` (the old image's attachments dropped, as the
/// kernel drops them at the exec; the undo entries applied at its `exit`
/// even if it never calls System V IPC itself).
#[unsafe(no_mangle)]
pub extern "C" fn __ipcns_before_exec() -> c_int {
    std::panic::catch_unwind(|| {
        let faults = super::signals::before_exec();
        let ns = state::opened();
        let frozen = ipcns_core::life::before_exec(ns);
        let mark = ns.is_some_and(ipcns_core::life::holds_record);
        c_int::from(frozen) | (c_int::from(faults) << 1) | if mark { MARK } else { 0 }
    })
    .unwrap_or(0)
}

/// [`__ipcns_before_exec`]'s bit: mark the new image's environment.
const MARK: c_int = 4;

/// The variable that tells a new program image that its process has a
/// record (its value: the process's pid, so that a process it starts,
/// which inherits the variable, ignores it). Removed from the environment
/// by the image that finds it. `c/exec.c` spells it too.
pub const EXEC_MARK: &str = "IPCNS_EXEC_PID";

/// At load: whether an exec marked this image (see [`__ipcns_before_exec`]);
/// the mark is removed from the environment either way.
pub fn exec_marked() -> bool {
    let Some(v) = std::env::var_os(EXEC_MARK) else {
        return false;
    };
    next::unset_env(EXEC_MARK);
    v.to_str().and_then(|v| v.parse::<i32>().ok()) == Some(ipcns_sys::process::getpid())
}

/// Called by `c/exec.c` when the exec returned (it failed), with what
/// [`__ipcns_before_exec`] returned.
#[unsafe(no_mangle)]
pub extern "C" fn __ipcns_exec_failed(frozen: c_int) {
    let _ = std::panic::catch_unwind(|| {
        ipcns_core::life::exec_failed(frozen & 1 != 0);
        super::signals::after_failed_exec(frozen & 2 != 0);
    });
}

/// `syscall(SYS_execve / SYS_execveat, ...)` between the two hooks.
///
/// # Safety
/// As the program's own call.
pub unsafe fn syscall_exec(n: c_long, mut a: [c_long; 6]) -> c_long {
    let st = __ipcns_before_exec();
    // The environment, marked by `c/exec.c`'s own code (on the stack: an
    // exec may come from a vfork child; a longer one goes unmarked).
    let which = if n == libc::SYS_execveat { 3 } else { 2 };
    let envp = a[which] as *const *mut c_char;
    let mut copy = [core::ptr::null_mut::<c_char>(); MARKED_MAX];
    let mut mark = [0 as c_char; 40];
    // SAFETY: the program's environment array, NULL-terminated as execve
    // requires (or NULL: none); the room is at most MARKED_MAX (c/exec.c),
    // which `copy` holds, and the mark fits in 40 bytes.
    unsafe {
        let room = __ipcns_c_room_for(st, envp);
        if room <= MARKED_MAX {
            a[which] = __ipcns_c_marked(envp, copy.as_mut_ptr(), room, mark.as_mut_ptr()) as c_long;
        }
    }
    // SAFETY: the program's own system call, its environment marked.
    let r = unsafe { next::call_syscall(n, a) };
    let e = next::errno();
    __ipcns_exec_failed(st);
    next::set_errno(e);
    r
}

/// `c/exec.c`'s MARKED_MAX: the room [`__ipcns_c_room_for`] asks at most.
const MARKED_MAX: usize = 1024;

unsafe extern "C" {
    /// `c/exec.c`: the room a marked copy of `envp` needs, 0 for none.
    fn __ipcns_c_room_for(st: c_int, envp: *const *mut c_char) -> usize;
    /// `c/exec.c`: `envp` marked into `out` (`room` entries), the mark
    /// written into `mark`; `envp` itself when `room` is 0.
    fn __ipcns_c_marked(
        envp: *const *mut c_char,
        out: *mut *mut c_char,
        room: usize,
        mark: *mut c_char,
    ) -> *const *mut c_char;
}

/// After a wait returned `pid` with `status` (the wait status word): if
/// it reaped a child that exited or was killed, the child's record is
/// finished.
fn reaped(pid: c_int, status: Option<c_int>) {
    if pid <= 0 {
        return;
    }
    if let Some(st) = status
        && !(libc::WIFEXITED(st) || libc::WIFSIGNALED(st))
    {
        return;
    }
    if state::opened().is_none() {
        return;
    }
    let e = next::errno();
    let _ = std::panic::catch_unwind(|| {
        for ns in state::all_opened() {
            let _ = ns.reap_pid(pid);
        }
    });
    // Written back only if it moved: a store to the thread's errno page,
    // which a fork left shared, copies it.
    if next::errno() != e {
        next::set_errno(e);
    }
}

type Wait4 = unsafe extern "C" fn(c_int, *mut c_int, c_int, *mut libc::rusage) -> c_int;

/// The wait status of a call that did not ask for it, read into `local`.
fn status_ptr(given: *mut c_int, local: &mut c_int) -> *mut c_int {
    if given.is_null() { local } else { given }
}

/// `pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)`:
/// every wait but waitid goes through it here (as in the C library).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait4(
    pid: c_int,
    status: *mut c_int,
    options: c_int,
    ru: *mut libc::rusage,
) -> c_int {
    let Some(f) = next::WAIT4.get() else {
        next::set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: wait4's prototype.
    let f: Wait4 = unsafe { core::mem::transmute::<usize, Wait4>(f) };
    let mut local = 0;
    let st = status_ptr(status, &mut local);
    // SAFETY: the program's arguments (a status word of ours if it gave
    // none), as the C library takes them.
    let r = unsafe { f(pid, st, options, ru) };
    if r > 0 {
        // SAFETY: the call succeeded and wrote the status word.
        reaped(r, Some(unsafe { *st }));
    }
    r
}

/// `pid_t waitpid(pid_t pid, int *status, int options)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int {
    // SAFETY: as the program's call.
    unsafe { wait4(pid, status, options, core::ptr::null_mut()) }
}

/// `pid_t wait(int *status)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait(status: *mut c_int) -> c_int {
    // SAFETY: as the program's call.
    unsafe { wait4(-1, status, 0, core::ptr::null_mut()) }
}

/// `pid_t wait3(int *status, int options, struct rusage *ru)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait3(status: *mut c_int, options: c_int, ru: *mut libc::rusage) -> c_int {
    // SAFETY: as the program's call.
    unsafe { wait4(-1, status, options, ru) }
}

type Waitid =
    unsafe extern "C" fn(libc::idtype_t, libc::id_t, *mut libc::siginfo_t, c_int) -> c_int;

/// `int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)`:
/// a child reaped (not with WNOWAIT) that exited or was killed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitid(
    idtype: libc::idtype_t,
    id: libc::id_t,
    info: *mut libc::siginfo_t,
    options: c_int,
) -> c_int {
    let Some(f) = next::WAITID.get() else {
        next::set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: waitid's prototype.
    let f: Waitid = unsafe { core::mem::transmute::<usize, Waitid>(f) };
    // SAFETY: the program's arguments, as the C library takes them.
    let r = unsafe { f(idtype, id, info, options) };
    if r == 0 && options & libc::WNOWAIT == 0 && !info.is_null() {
        // SAFETY: the call succeeded and filled the program's siginfo.
        let (pid, code) = unsafe { ((*info).si_pid(), (*info).si_code) };
        if matches!(code, libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED) {
            reaped(pid, None);
        }
    }
    r
}

/// After `syscall(SYS_wait4 / SYS_waitid, ...)` returned `r`.
///
/// # Safety
/// The arguments are the program's own, valid for the call that returned
/// `r` (its status word and siginfo written when it succeeded).
pub unsafe fn after_syscall_wait(n: c_long, a: [c_long; 6], r: c_long) {
    if n == libc::SYS_wait4 && r > 0 {
        let st = a[1] as *const c_int;
        // SAFETY: written by the successful call, if given.
        let status = (!st.is_null()).then(|| unsafe { *st });
        reaped(r as c_int, status.or(Some(0)));
    } else if n == libc::SYS_waitid && r == 0 && (a[3] as c_int) & libc::WNOWAIT == 0 {
        let info = a[2] as *const libc::siginfo_t;
        if !info.is_null() {
            // SAFETY: filled by the successful call.
            let (pid, code) = unsafe { ((*info).si_pid(), (*info).si_code) };
            if matches!(code, libc::CLD_EXITED | libc::CLD_KILLED | libc::CLD_DUMPED) {
                reaped(pid, None);
            }
        }
    }
}
