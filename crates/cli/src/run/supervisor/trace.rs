//! shmat and shmdt in the caller: the supervisor cannot map into another
//! process, so the caller maps the segment itself, made to by ptrace
//! (docs/supervisor-plan.md, measured there).
//!
//! For a call whose segment must be mapped or unmapped: the descriptor is
//! added to the caller's table (`SECCOMP_IOCTL_NOTIF_ADDFD`, while the
//! call still waits), the thread is seized (`PTRACE_SEIZE`, checked
//! against the notification so that a reused thread id is never touched)
//! and asked to stop (`PTRACE_INTERRUPT`); the call is answered with
//! `-ERESTARTNOINTR`, so that the thread leaves the kernel only to stop
//! at once. Stopped, it is made to run system calls of our choosing: its
//! registers set to the call (`mmap` of the added descriptor, `munmap`,
//! `close`) at the `syscall` instruction it came in by, run to the call's
//! exit stop. At the end its registers are put back as they were, with
//! the call's result in `rax`, and it is let go: to the program, shmat
//! returned. Signals that arrive meanwhile are held and sent again after
//! (`tgkill`), never delivered in the middle.
//!
//! Limits: a process already traced (a debugger, strace) cannot be seized
//! (the call fails with ENOMEM); Yama's ptrace_scope 2 or 3 forbids it.
//!
//! # Safety
//! `ptrace` requests pass plain values or a pointer to a local
//! `user_regs_struct` for the call; `waitpid` a local status; `tgkill`
//! plain values. The registers written are the stopped thread's own,
//! changed only as described above and restored before it runs its
//! program again.
#![allow(unsafe_code)]

use super::notify;
use ipcns::Errno;
use ipcns::acting::Mapper;
use std::cell::RefCell;
use std::os::fd::RawFd;

/// `-ERESTARTNOINTR` (include/linux/errno.h): restart the call whatever
/// the signal.
const ERESTARTNOINTR: i32 = 513;

/// The thread's state.
#[allow(clippy::large_enum_variant)] // one per call, on the stack of its thread
enum State {
    /// Not seized: the call still waits for an answer.
    Waiting,
    /// Seized and stopped; its registers as it stopped; signals held.
    Stopped {
        saved: libc::user_regs_struct,
        held: Vec<(i32, Option<libc::siginfo_t>)>,
    },
    /// Seized, then lost (it died, or a step failed): the call is over.
    Lost,
}

/// The caller of one call, for the core's shmat and shmdt
/// (`ipcns::acting::Mapper`).
pub struct Tracer {
    listener: RawFd,
    id: u64,
    tid: i32,
    tgid: i32,
    state: RefCell<State>,
}

impl Tracer {
    pub fn new(listener: RawFd, id: u64, tid: i32, tgid: i32) -> Tracer {
        Tracer {
            listener,
            id,
            tid,
            tgid,
            state: RefCell::new(State::Waiting),
        }
    }

    /// Seizes and stops the thread (see the module's doc); the call is
    /// answered by then.
    fn seize(&self) -> Result<(), Errno> {
        match &*self.state.borrow() {
            State::Stopped { .. } => return Ok(()),
            State::Lost => return Err(Errno::ENOMEM),
            State::Waiting => {}
        }
        let tid = self.tid;
        // SAFETY: see the module's doc.
        if unsafe {
            libc::ptrace(
                libc::PTRACE_SEIZE,
                tid,
                0,
                libc::PTRACE_O_TRACESYSGOOD as libc::c_ulong,
            )
        } != 0
        {
            return Err(Errno::ENOMEM);
        }
        // The thread seized is the caller (not a reused id).
        if !notify::valid(self.listener, self.id) {
            self.detach_now();
            return Err(Errno::ESRCH);
        }
        // SAFETY: see the module's doc.
        unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0) };
        if !notify::reply(self.listener, self.id, Err(Errno(ERESTARTNOINTR))) {
            self.detach_now();
            return Err(Errno::ESRCH);
        }
        // From here on, the call is answered: its result goes back in
        // the thread's registers (`finish`).
        let mut held = Vec::new();
        if !self.wait_stop(&mut held, false) {
            *self.state.borrow_mut() = State::Lost;
            return Err(Errno::ENOMEM);
        }
        // SAFETY: all-zero is a valid user_regs_struct (integers).
        let mut saved: libc::user_regs_struct = unsafe { core::mem::zeroed() };
        // SAFETY: see the module's doc.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut saved) } != 0 {
            *self.state.borrow_mut() = State::Lost;
            self.reap_lost();
            return Err(Errno::ENOMEM);
        }
        *self.state.borrow_mut() = State::Stopped { saved, held };
        Ok(())
    }

    /// Waits for the thread's next stop: a system call stop if
    /// `syscall_stop`, else any ptrace stop. Signals it would have been
    /// given are held (and it is resumed past them). False if it is gone.
    fn wait_stop(
        &self,
        held: &mut Vec<(i32, Option<libc::siginfo_t>)>,
        syscall_stop: bool,
    ) -> bool {
        loop {
            let Some(st) = status_of(self.tid) else {
                return false;
            };
            if !libc::WIFSTOPPED(st) {
                return false;
            }
            let sig = libc::WSTOPSIG(st);
            let event = st >> 16;
            if !syscall_stop {
                if event != 0 || sig == (libc::SIGTRAP | 0x80) {
                    return true;
                }
            } else if sig == (libc::SIGTRAP | 0x80) {
                return true;
            }
            if event == 0 && sig != (libc::SIGTRAP | 0x80) {
                // A signal for it: held, given back at the end, with what
                // came with it.
                // SAFETY: all-zero is a valid siginfo_t; GETSIGINFO
                // writes one into it.
                let mut info: libc::siginfo_t = unsafe { core::mem::zeroed() };
                // SAFETY: see the module's doc (a local siginfo_t).
                let got =
                    unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, self.tid, 0, &mut info) == 0 };
                held.push((sig, got.then_some(info)));
            }
            // Resumed past it (to the stop wanted).
            let req = if syscall_stop {
                libc::PTRACE_SYSCALL
            } else {
                libc::PTRACE_CONT
            };
            // SAFETY: see the module's doc.
            if unsafe { libc::ptrace(req, self.tid, 0, 0) } != 0 {
                return false;
            }
        }
    }

    /// Makes the stopped thread run system call `nr` with `args`; its
    /// result (a negative errno on failure).
    fn inject(&self, nr: i64, args: [u64; 6]) -> Result<i64, Errno> {
        self.seize()?;
        let mut state = self.state.borrow_mut();
        let State::Stopped { saved, held } = &mut *state else {
            return Err(Errno::ENOMEM);
        };
        let mut r = *saved;
        // The `syscall` instruction the call came in by (2 bytes).
        r.rip = saved.rip.wrapping_sub(2);
        r.rax = nr as u64;
        // No restart of the answered call.
        r.orig_rax = u64::MAX;
        r.rdi = args[0];
        r.rsi = args[1];
        r.rdx = args[2];
        r.r10 = args[3];
        r.r8 = args[4];
        r.r9 = args[5];
        let tid = self.tid;
        let ok = (|| {
            // SAFETY: see the module's doc.
            if unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, &r) } != 0 {
                return None;
            }
            for _ in 0..2 {
                // Entry, then exit.
                // SAFETY: see the module's doc.
                if unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0, 0) } != 0 {
                    return None;
                }
                if !self.wait_stop(held, true) {
                    return None;
                }
            }
            // SAFETY: see the module's doc.
            if unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut r) } != 0 {
                return None;
            }
            Some(r.rax as i64)
        })();
        match ok {
            Some(v) => Ok(v),
            None => {
                *state = State::Lost;
                drop(state);
                self.reap_lost();
                Err(Errno::ENOMEM)
            }
        }
    }

    /// Ends the call: if the thread was seized, its registers back with
    /// `result` as the call's, let go, held signals sent again; true. If
    /// it never was, false: the call still waits for its answer.
    pub fn finish(&self, result: Result<i64, Errno>) -> bool {
        let state = std::mem::replace(&mut *self.state.borrow_mut(), State::Lost);
        match state {
            State::Waiting => {
                *self.state.borrow_mut() = State::Waiting;
                false
            }
            State::Lost => true,
            State::Stopped { saved, held } => {
                let mut r = saved;
                r.rax = match result {
                    Ok(v) => v as u64,
                    Err(e) => (-i64::from(e.0)) as u64,
                };
                r.orig_rax = u64::MAX;
                // SAFETY: see the module's doc.
                let let_go = unsafe {
                    libc::ptrace(libc::PTRACE_SETREGS, self.tid, 0, &r) == 0
                        && libc::ptrace(libc::PTRACE_DETACH, self.tid, 0, 0) == 0
                };
                if !let_go {
                    // Killed while stopped: its end is ours to wait for,
                    // or its parent's wait would never see it.
                    self.reap_lost();
                    return true;
                }
                for (sig, info) in held {
                    resend(self.tgid, self.tid, sig, info.as_ref());
                }
                true
            }
        }
    }

    /// Waits for the end of a thread seized and lost (killed while
    /// stopped, the ptrace requests fail with ESRCH): a dead tracee stays
    /// its tracer's until the tracer waits for it, and only then does its
    /// parent's wait see it.
    fn reap_lost(&self) {
        while let Some(st) = status_of(self.tid) {
            if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
                return;
            }
            // A stop on its way out: let it go on to its end.
            // SAFETY: see the module's doc (plain values).
            let cont = unsafe { libc::ptrace(libc::PTRACE_CONT, self.tid, 0, 0) } == 0;
            // SAFETY: as above.
            if !cont && unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, 0, 0) } == 0 {
                return;
            }
        }
    }

    fn detach_now(&self) {
        // SAFETY: see the module's doc. (Not stopped yet: PTRACE_DETACH
        // of a running tracee fails; the interrupt never came, so a seize
        // without a stop ends with the tracer's own exit or this.)
        unsafe {
            libc::ptrace(libc::PTRACE_INTERRUPT, self.tid, 0, 0);
            let _ = status_of(self.tid);
            libc::ptrace(libc::PTRACE_DETACH, self.tid, 0, 0);
        }
    }

    /// Adds descriptor `fd` to the caller's table (close-on-exec); its
    /// number there. Only while the call waits.
    fn add_fd(&self, fd: RawFd) -> Result<i32, Errno> {
        let mut a = libc::seccomp_notif_addfd {
            id: self.id,
            flags: 0,
            srcfd: fd as u32,
            newfd: 0,
            newfd_flags: libc::O_CLOEXEC as u32,
        };
        // SAFETY: a local structure for the call.
        let r = unsafe { libc::ioctl(self.listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut a) };
        if r < 0 {
            // EMFILE there: shmat's answer for no descriptor (ENOMEM).
            return Err(Errno::ENOMEM);
        }
        Ok(r)
    }
}

/// Sends `sig` again to thread `tid` of `tgid` after the call: with its
/// `siginfo` (sigqueue's value, sender) where the kernel lets another
/// process queue it (`rt_tgsigqueueinfo`: a negative `si_code` other than
/// SI_TKILL), else as `tgkill` sends it (the sender then reads as the
/// supervisor).
fn resend(tgid: i32, tid: i32, sig: i32, info: Option<&libc::siginfo_t>) {
    const SI_TKILL: i32 = -6;
    if let Some(i) = info
        && i.si_code < 0
        && i.si_code != SI_TKILL
    {
        // SAFETY: a siginfo_t of ours for the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                tgid,
                tid,
                sig,
                i as *const libc::siginfo_t,
            )
        };
        if r == 0 {
            return;
        }
    }
    // SAFETY: plain integers.
    unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) };
}

/// The next wait status of traced thread `tid`; None if it is no longer
/// ours to wait for.
fn status_of(tid: i32) -> Option<i32> {
    loop {
        let mut st = 0;
        // SAFETY: see the module's doc.
        let r = unsafe { libc::waitpid(tid, &mut st, libc::__WALL) };
        if r == tid {
            return Some(st);
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// A thread still seized when its tracer is dropped without `finish` (a
/// panic unwinding) is let go with ENOMEM rather than left stopped.
impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.finish(Err(Errno::ENOMEM));
    }
}

impl Mapper for Tracer {
    fn map(
        &self,
        fd: i32,
        off: u64,
        len: usize,
        addr: usize,
        prot: i32,
        replace: bool,
    ) -> Result<usize, Errno> {
        if !matches!(&*self.state.borrow(), State::Waiting) {
            // One mapping per call.
            return Err(Errno::ENOMEM);
        }
        let theirs = self.add_fd(fd)?;
        let flags = libc::MAP_SHARED
            | match (addr, replace) {
                (0, _) => 0,
                (_, true) => libc::MAP_FIXED,
                (_, false) => libc::MAP_FIXED_NOREPLACE,
            };
        let mapped = self.inject(
            libc::SYS_mmap,
            [
                addr as u64,
                len as u64,
                prot as u64,
                flags as u64,
                theirs as u64,
                off,
            ],
        );
        let _ = self.inject(libc::SYS_close, [theirs as u64, 0, 0, 0, 0, 0]);
        let p = mapped?;
        if (-4095..0).contains(&p) {
            return Err(Errno(-p as i32));
        }
        if addr != 0 && p as usize != addr {
            // A kernel that ignores MAP_FIXED_NOREPLACE: not where asked.
            let _ = self.unmap(p as usize, len);
            return Err(Errno::EEXIST);
        }
        Ok(p as usize)
    }

    fn unmap(&self, addr: usize, len: usize) -> Result<(), Errno> {
        let r = self.inject(libc::SYS_munmap, [addr as u64, len as u64, 0, 0, 0, 0])?;
        if r < 0 {
            return Err(Errno(-r as i32));
        }
        Ok(())
    }

    fn maps(&self) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{}/task/{}/maps", self.tgid, self.tid)).ok()
    }
}
