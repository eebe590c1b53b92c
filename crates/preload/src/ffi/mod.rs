//! The exported C functions: the twelve System V IPC calls and `syscall`
//! for their twelve numbers (here), the set*id family and capset
//! (`ids.rs`), the signal calls whose handlers are wrapped
//! (`signals.rs`), the memory calls that change attachments (`mem.rs`);
//! and the library's constructor and destructor.
//!
//! Every IPC entry runs its Rust body under `catch_unwind`, so no panic
//! crosses into C: a panic (a bug; none is expected) fails the call with
//! EINVAL (and `(void *)-1` from `shmat`), after one line on stderr. On
//! failure the call sets `errno` from the core's `Errno` and returns -1; on
//! success `errno` is left alone, as the C library's wrappers leave it.
//!
//! `semctl` is variadic in C and Rust cannot define a variadic function:
//! its fourth argument (the `union semun`, one machine word passed by
//! value) is taken as a `usize` parameter, which is where x86-64 and
//! aarch64 Linux pass both a fixed and a variadic fourth argument. The
//! same holds for `syscall`'s six words.
//!
//! # Safety
//! The exported names are meant to interpose the C library's (`no_mangle`:
//! the duplicate symbol is the point). Pointers from the caller are never
//! dereferenced here: they go to `user.rs` as numbers. The constructor and
//! destructor are plain `extern "C" fn()` entries of `.init_array` and
//! `.fini_array`, which the dynamic loader calls once each.
#![allow(unsafe_code)]

mod exec;
mod ids;
mod mem;
mod ns;
mod open;
mod signals;
mod stdio;
mod thread;

use crate::next;
use crate::{cred, msg, sem, shm, state};
use core::ffi::{c_int, c_long, c_void};
use ipcns_core::{Errno, SysResult};

/// The errno of a call whose body panicked.
const PANICKED: Errno = Errno::EINVAL;

/// A call's result as one machine word, as the system calls return it: the
/// value, or `-errno` (no System V IPC call succeeds with a value in
/// -4095..=-1: results are ids, counts, sizes and user-space addresses).
/// One word, written and read whole: a `SysResult` returned through
/// `catch_unwind`'s buffer was written in halves and read as a word, and
/// the stalled store forwarding cost about 4 ns per call.
#[inline(always)]
fn word(r: SysResult<i64>) -> i64 {
    match r {
        Ok(v) => v,
        Err(e) => -i64::from(e.raw()),
    }
}

/// Runs a call's body; a panic becomes [`PANICKED`].
#[inline(always)]
fn guard(f: impl FnOnce() -> SysResult<i64>) -> i64 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| word(f())))
        .unwrap_or(-i64::from(PANICKED.raw()))
}

/// The errno a [`word`] carries, if it carries one.
#[inline(always)]
fn errno_of(w: i64) -> Option<i32> {
    (-4095..0).contains(&w).then_some(-w as i32)
}

/// The C convention for an `int` result.
#[inline(always)]
fn ret_int(w: i64) -> c_int {
    match errno_of(w) {
        None => w as c_int,
        Some(e) => {
            next::set_errno(e);
            -1
        }
    }
}

/// The C convention for a `long` (`ssize_t`) result.
#[inline(always)]
fn ret_long(w: i64) -> c_long {
    match errno_of(w) {
        None => w as c_long,
        Some(e) => {
            next::set_errno(e);
            -1
        }
    }
}

/// `int semget(key_t key, int nsems, int semflg)`.
#[unsafe(no_mangle)]
pub extern "C" fn semget(key: c_int, nsems: c_int, semflg: c_int) -> c_int {
    ret_int(guard(|| sem::semget(key, nsems, semflg)))
}

/// `int semop(int semid, struct sembuf *sops, size_t nsops)`: glibc's
/// semop reaches the kernel as semtimedop, whose `nsops` is an `unsigned
/// int` (the upper bits are dropped, as the kernel drops them).
#[unsafe(no_mangle)]
pub extern "C" fn semop(semid: c_int, sops: *mut c_void, nsops: usize) -> c_int {
    ret_int(guard(|| {
        sem::semtimedop(semid, sops as usize, nsops as u32, 0)
    }))
}

/// `int semtimedop(int semid, struct sembuf *sops, size_t nsops, const
/// struct timespec *timeout)`.
#[unsafe(no_mangle)]
pub extern "C" fn semtimedop(
    semid: c_int,
    sops: *mut c_void,
    nsops: usize,
    timeout: *const c_void,
) -> c_int {
    ret_int(guard(|| {
        sem::semtimedop(semid, sops as usize, nsops as u32, timeout as usize)
    }))
}

/// `int semctl(int semid, int semnum, int cmd, ...)`: the optional `union
/// semun` as the machine word it travels in (module doc).
#[unsafe(no_mangle)]
pub extern "C" fn semctl(semid: c_int, semnum: c_int, cmd: c_int, arg: usize) -> c_int {
    ret_int(guard(|| sem::semctl(semid, semnum, cmd, arg)))
}

/// `int msgget(key_t key, int msgflg)`.
#[unsafe(no_mangle)]
pub extern "C" fn msgget(key: c_int, msgflg: c_int) -> c_int {
    ret_int(guard(|| msg::msgget(key, msgflg)))
}

/// `int msgsnd(int msqid, const void *msgp, size_t msgsz, int msgflg)`.
#[unsafe(no_mangle)]
pub extern "C" fn msgsnd(msqid: c_int, msgp: *const c_void, msgsz: usize, msgflg: c_int) -> c_int {
    ret_int(guard(|| msg::msgsnd(msqid, msgp as usize, msgsz, msgflg)))
}

/// `ssize_t msgrcv(int msqid, void *msgp, size_t msgsz, long msgtyp, int
/// msgflg)`.
#[unsafe(no_mangle)]
pub extern "C" fn msgrcv(
    msqid: c_int,
    msgp: *mut c_void,
    msgsz: usize,
    msgtyp: c_long,
    msgflg: c_int,
) -> isize {
    ret_long(guard(|| {
        msg::msgrcv(msqid, msgp as usize, msgsz, msgtyp, msgflg)
    })) as isize
}

/// `int msgctl(int msqid, int cmd, struct msqid_ds *buf)`.
#[unsafe(no_mangle)]
pub extern "C" fn msgctl(msqid: c_int, cmd: c_int, buf: *mut c_void) -> c_int {
    ret_int(guard(|| msg::msgctl(msqid, cmd, buf as usize)))
}

/// `int shmget(key_t key, size_t size, int shmflg)`.
#[unsafe(no_mangle)]
pub extern "C" fn shmget(key: c_int, size: usize, shmflg: c_int) -> c_int {
    ret_int(guard(|| shm::shmget(key, size, shmflg)))
}

/// `void *shmat(int shmid, const void *shmaddr, int shmflg)`: the address,
/// or `(void *) -1` with errno.
#[unsafe(no_mangle)]
pub extern "C" fn shmat(shmid: c_int, shmaddr: *const c_void, shmflg: c_int) -> *mut c_void {
    ret_long(guard(|| shm::shmat(shmid, shmaddr as usize, shmflg))) as usize as *mut c_void
}

/// `int shmdt(const void *shmaddr)`.
#[unsafe(no_mangle)]
pub extern "C" fn shmdt(shmaddr: *const c_void) -> c_int {
    ret_int(guard(|| shm::shmdt(shmaddr as usize)))
}

/// `int shmctl(int shmid, int cmd, struct shmid_ds *buf)`.
#[unsafe(no_mangle)]
pub extern "C" fn shmctl(shmid: c_int, cmd: c_int, buf: *mut c_void) -> c_int {
    ret_int(guard(|| shm::shmctl(shmid, cmd, buf as usize)))
}

/// `int remap_file_pages(void *addr, size_t size, int prot, size_t pgoff,
/// int flags)`: on an attachment, what Linux does with a SysV mapping
/// (`shm::remap_file_pages`); anywhere else the kernel's call.
#[unsafe(no_mangle)]
pub extern "C" fn remap_file_pages(
    addr: *mut c_void,
    size: usize,
    prot: c_int,
    pgoff: usize,
    flags: c_int,
) -> c_int {
    remap(addr as usize, size, prot, pgoff, flags) as c_int
}

/// [`remap_file_pages`] and its `syscall` form: the C convention.
fn remap(addr: usize, size: usize, prot: c_int, pgoff: usize, flags: c_int) -> c_long {
    let ours = std::panic::catch_unwind(|| shm::remap_file_pages(addr, size, prot, pgoff))
        .unwrap_or(Some(Err(PANICKED)));
    match ours {
        Some(r) => ret_long(word(r)),
        None => {
            let a = [
                addr as c_long,
                size as c_long,
                c_long::from(prot),
                pgoff as c_long,
            ];
            // SAFETY: the program's own system call, forwarded unchanged
            // (it takes no pointer it dereferences).
            unsafe {
                next::call_syscall(
                    libc::SYS_remap_file_pages,
                    [a[0], a[1], a[2], a[3], c_long::from(flags), 0],
                )
            }
        }
    }
}

/// `long syscall(long number, ...)`: the twelve System V IPC numbers are
/// served here, with the system calls' argument types (an `int` is the
/// low 32 bits of its word, `nsops` an `unsigned int`); the credential
/// calls are passed on and refresh the cached credentials when they
/// succeed; every other number goes to the next `syscall` unchanged, which
/// sets errno itself. Six argument words are read whatever the number:
/// the extra registers are ignored by the calls that take fewer.
///
/// # Safety
/// As the C library's `syscall`: the arguments must be valid for the
/// system call named (a pointer the IPC calls take may be anything: they
/// probe it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    n: c_long,
    a: c_long,
    b: c_long,
    c: c_long,
    d: c_long,
    e: c_long,
    f: c_long,
) -> c_long {
    let r = match n {
        libc::SYS_semget => guard(|| sem::semget(a as i32, b as i32, c as i32)),
        libc::SYS_semop => guard(|| sem::semtimedop(a as i32, b as usize, c as u32, 0)),
        libc::SYS_semtimedop => {
            guard(|| sem::semtimedop(a as i32, b as usize, c as u32, d as usize))
        }
        libc::SYS_semctl => guard(|| sem::semctl(a as i32, b as i32, c as i32, d as usize)),
        libc::SYS_msgget => guard(|| msg::msgget(a as i32, b as i32)),
        libc::SYS_msgsnd => guard(|| msg::msgsnd(a as i32, b as usize, c as usize, d as i32)),
        libc::SYS_msgrcv => guard(|| msg::msgrcv(a as i32, b as usize, c as usize, d, e as i32)),
        libc::SYS_msgctl => guard(|| msg::msgctl(a as i32, b as i32, c as usize)),
        libc::SYS_shmget => guard(|| shm::shmget(a as i32, b as usize, c as i32)),
        libc::SYS_shmat => guard(|| shm::shmat(a as i32, b as usize, c as i32)),
        libc::SYS_shmdt => guard(|| shm::shmdt(a as usize)),
        libc::SYS_shmctl => guard(|| shm::shmctl(a as i32, b as i32, c as usize)),
        libc::SYS_rt_sigaction => return signals::rt_sigaction(a, b as usize, c as usize, d),
        libc::SYS_rt_sigprocmask => {
            crate::user::mask_is(None);
            // SAFETY: the program's own system call, forwarded unchanged.
            let r = unsafe { next::call_syscall(n, [a, b, c, d, e, f]) };
            crate::user::mask_is(None);
            return r;
        }
        libc::SYS_unshare | libc::SYS_clone | libc::SYS_clone3 => {
            if let Some(r) = ns::syscall_ns(n, [a, b, c, d, e, f]) {
                return r;
            }
            // SAFETY: the program's own system call, forwarded unchanged.
            return unsafe { next::call_syscall(n, [a, b, c, d, e, f]) };
        }
        libc::SYS_execve | libc::SYS_execveat => {
            // SAFETY: the program's own system call, between the hooks.
            return unsafe { exec::syscall_exec(n, [a, b, c, d, e, f]) };
        }
        libc::SYS_exit_group => exit_now(a as c_int),
        libc::SYS_remap_file_pages => {
            return remap(a as usize, b as usize, c as c_int, d as usize, e as c_int);
        }
        libc::SYS_munmap | libc::SYS_mmap | libc::SYS_mremap => {
            // SAFETY: the program's own system call, forwarded unchanged.
            return unsafe { mem::syscall_mem(n, [a, b, c, d, e, f]) };
        }
        libc::SYS_wait4 | libc::SYS_waitid => {
            // SAFETY: the program's own system call, forwarded unchanged.
            let r = unsafe { next::call_syscall(n, [a, b, c, d, e, f]) };
            // SAFETY: its arguments, as the call that returned `r` had them.
            unsafe { exec::after_syscall_wait(n, [a, b, c, d, e, f], r) };
            return r;
        }
        libc::SYS_open | libc::SYS_openat | libc::SYS_openat2 => {
            // SAFETY: the program's own system call, forwarded unchanged.
            let r = unsafe { next::call_syscall(n, [a, b, c, d, e, f]) };
            return open::syscall_after(n, a, b, c, r);
        }
        _ => {
            // SAFETY: the program's own system call, forwarded unchanged.
            let r = unsafe { next::call_syscall(n, [a, b, c, d, e, f]) };
            if ids::changes_creds(n)
                && (r == 0 || n == libc::SYS_setfsuid || n == libc::SYS_setfsgid)
            {
                cred::changed();
            }
            return r;
        }
    };
    ret_long(r)
}

/// The constructor: every next symbol looked up, the core's fork handler
/// registered (it clears the choice flag in a child), and panics reported
/// on one line.
extern "C" fn on_load() {
    next::resolve_all();
    mem::resolve();
    thread::resolve();
    crate::user::fault::set_taker(signals::hold_faults);
    // Every handler the program installs runs as our wrapper, which
    // notes it first (`signals.rs`).
    ipcns_core::intr::handlers_note_signals();
    // A fork child starts with no choice of namespace under way (the
    // core's fork handler clears the flag); the credentials' cache sees the
    // fork by itself (`cred.rs`). No handler of our own: its code, on a
    // page of its own, was a fault in every child.
    state::forked();
    // In a namespace an unshare made: seen as a member by its maps from now
    // on (`guardian::hold_at_load`).
    let _ = std::panic::catch_unwind(crate::guardian::hold_at_load);
    // An exec by a process with a record: this image takes it over now,
    // before `main` (its predecessor's attachments dropped, as the kernel
    // drops them at the exec), and so applies its undo entries at `exit`
    // even if it never calls System V IPC itself.
    if exec::exec_marked() {
        let _ = std::panic::catch_unwind(state::namespace);
    }
    std::panic::set_hook(Box::new(|info| {
        next::say(&format!(
            "ipcns: internal error ({info}); the call fails with {}\n",
            PANICKED.name()
        ));
    }));
}

/// The destructor: what the kernel's exit path does for this process
/// (its SEM_UNDO adjustments applied, its attachments dropped from
/// shm_nattch). Runs at `exit` (after the program's atexit handlers) and
/// at `dlclose`; `_exit` and SIGKILL are cleaned up by the reapers.
extern "C" fn on_unload() {
    let _ = std::panic::catch_unwind(|| {
        crate::procfs::closing_all();
        for ns in state::all_opened() {
            let _ = ns.exit_ending();
        }
    });
}

/// `void _exit(int status)`: what the kernel's exit path does for the
/// process's System V IPC (its undo entries applied, its attachments
/// dropped from `shm_nattch`, as at `exit`: see [`on_unload`]), then the
/// C library's `_exit`. So a process that ends by `_exit` (a fork child's
/// usual end) is finished before the kernel closes its descriptors and
/// tells its parent, as on Linux. Nothing is done in a vfork child (its
/// memory is its parent's).
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    exit_now(status)
}

/// `void _Exit(int status)`: `_exit`'s other name.
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(status)
}

/// `_exit`, and `syscall(SYS_exit_group, status)`.
fn exit_now(status: c_int) -> ! {
    let _ = std::panic::catch_unwind(|| {
        if ipcns_core::life::owns_memory() {
            for ns in state::all_opened() {
                let _ = ns.exit_ending();
            }
        }
    });
    if let Some(f) = next::EXIT.get() {
        // SAFETY: `_exit`'s prototype; it does not return.
        let f = unsafe { core::mem::transmute::<usize, extern "C" fn(c_int) -> !>(f) };
        f(status)
    }
    loop {
        // SAFETY: exit_group takes no pointer and does not return.
        unsafe { next::raw(libc::SYS_exit_group, [c_long::from(status), 0, 0, 0, 0, 0]) };
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[unsafe(link_section = ".fini_array")]
static ON_UNLOAD: extern "C" fn() = on_unload;

#[cfg(test)]
mod tests {
    /// A panic in a call's body unwinds to its guard (through the static
    /// unwinder build.rs links in) and fails the call with EINVAL.
    #[test]
    fn a_panic_is_einval() {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = super::guard(|| panic!("a test's panic"));
        std::panic::set_hook(hook);
        assert_eq!(r, -i64::from(super::PANICKED.raw()));
    }
}
