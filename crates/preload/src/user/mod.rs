//! The caller's memory: the pointers a C program hands to semop, msgsnd,
//! msgrcv and the `*ctl` calls, read and written without ever faulting.
//!
//! The kernel copies user memory with `copy_from_user` / `copy_to_user`,
//! which fail with EFAULT on memory that is unmapped or lacks the needed
//! permission. A library cannot fault and recover, so every copy is either
//!
//! - **direct**, when the bytes lie where they cannot be unmapped or
//!   write-protected while the call runs, short of the program doing it to
//!   its own live memory: the calling thread's stack between its stack
//!   pointer and the top of its stack (the caller's live frames,
//!   `stack.rs`), and the main program's loaded segments (readable ones
//!   for reads; writable ones, less the part made read-only after
//!   relocation, for writes; `image.rs`); or
//! - **direct, and allowed to fault** (`fault.rs`): for other memory (the
//!   heap, a shared library's data, any mapping), one `rep movsb` whose
//!   fault the library's SIGSEGV/SIGBUS handler turns into EFAULT at the
//!   faulting byte, as the kernel's exception table does for its own copy;
//!   used while the library holds those two signals (taken over at the
//!   first such copy, the program's actions kept and honoured,
//!   `ffi/signals.rs`) and neither is blocked on the calling thread; or
//! - **checked by the kernel, then direct**: where that cannot be used
//!   (a thread with SIGSEGV or SIGBUS blocked, another architecture), for
//!   memory of up to 16 pages, `rt_sigprocmask` reads (or
//!   writes) 8 bytes in every page of the range, failing with EFAULT
//!   exactly where the kernel's copy of it would (`probe.rs`), and the
//!   bytes are then copied directly; or
//! - **copied by the kernel**, when the check cannot vouch for the range
//!   (a fault, more pages, a write of fewer than 8 bytes):
//!   `process_vm_readv` / `process_vm_writev` on
//!   our own pid copy between the caller's memory and a buffer of ours and
//!   fail with EFAULT exactly where the kernel's copy would, with no fault
//!   in the process. Where a seccomp policy forbids them (ENOSYS, EPERM), a
//!   private memfd does the same: `pwrite` from the caller's memory, or
//!   `pread` into it, is the kernel's own copy.
//!
//! What is guaranteed: a pointer to memory that is unmapped, or lacks the
//! permission, gives EFAULT and never a signal. The only ways left to make
//! the library fault are to `munmap` or `mprotect` a live stack frame or
//! the program's own image while passing a pointer into it, or to unmap or
//! protect any other buffer on another thread between the check and the
//! copy of a call it was passed to (freeing memory one is passing to a
//! system call), or to pass a buffer in a shared file mapping whose page
//! goes in that interval (its file truncated by another process, an I/O
//! error reading it back). A buffer that another thread writes during the
//! call may be read torn, as the kernel may read it.
//!
//! The direct path costs a comparison or two; the faulting copy a few
//! nanoseconds more (a `rep movsb`, the thread's mask state read beside
//! its stack bounds); a checked one a system call per page (about 150 ns
//! here, half the kernel's own IPC call); a copy by the kernel about ten
//! times that.
//!
//! # Safety
//! A direct copy touches `[addr, addr + len)` only after [`direct`] found
//! it inside the calling thread's stack above the current stack pointer
//! or inside one of the main program's segments with the needed
//! permission (see `stack.rs` and `image.rs` for why those are mapped for
//! the whole call); the slices made over such memory live no longer than
//! the call that made them. The probing system calls are given one
//! `iovec` over a buffer of ours, of its length, and one over the caller's
//! range; the kernel checks the caller's range.
#![allow(unsafe_code)]

pub(crate) mod bounds;
pub(crate) mod fault;
mod image;
mod probe;
mod stack;

pub use stack::{handler_entered, handler_left, mask_is};

use image::image_contains;
use stack::{stack, stack_pointer};

use crate::next;
use core::ffi::{c_long, c_void};
use ipcns_core::{Errno, SysResult};

/// Whether `[addr, addr + len)` may be touched directly (see the module
/// doc); `write`: written, not only read.
#[inline(always)]
fn direct(addr: usize, len: usize, write: bool) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    // Everything from the stack pointer to the top of the stack is in use
    // by live frames.
    let sp = stack_pointer();
    if let Some((lo, hi)) = stack()
        && lo <= sp
        && sp < hi
        && addr >= sp
        && end <= hi
    {
        return true;
    }
    image_contains(addr, end, write)
}

/// Reads the caller's `[addr, addr + out.len())` into `out`; EFAULT where
/// the kernel's `copy_from_user` would fail.
#[inline]
pub fn read(addr: usize, out: &mut [u8]) -> SysResult<()> {
    if out.is_empty() {
        return Ok(());
    }
    if direct(addr, out.len(), false) {
        // SAFETY: `direct` found the range readable for the whole call
        // (module doc). `copy` (memmove): a dangling pointer into the dead
        // part of the caller's stack may overlap a buffer of ours.
        unsafe { core::ptr::copy(addr as *const u8, out.as_mut_ptr(), out.len()) };
        return Ok(());
    }
    read_beyond(addr, out)
}

/// Reads the caller's bytes by the copy that may fault only (`fault.rs`):
/// `None` where it cannot be used, else its answer.
#[inline(always)]
pub fn read_faulting(addr: usize, out: &mut [u8]) -> Option<SysResult<()>> {
    fault::read(addr, out)
}

/// [`read`] of a range the direct path did not take.
#[inline]
fn read_beyond(addr: usize, out: &mut [u8]) -> SysResult<()> {
    if let Some(r) = fault::read(addr, out) {
        return r;
    }
    if probe::readable(addr, out.len()) {
        // SAFETY: the kernel has just read every page of the range
        // (`probe.rs`: what is left is a program that unmaps the memory
        // it is passing while the call runs). `copy` as above.
        unsafe { core::ptr::copy(addr as *const u8, out.as_mut_ptr(), out.len()) };
        return Ok(());
    }
    probe_copy(addr, out.as_mut_ptr() as usize, out.len(), false)
}

/// Writes `data` to the caller's `[addr, addr + data.len())`; EFAULT where
/// the kernel's `copy_to_user` would fail (bytes before the fault may be
/// written, as the kernel's are).
#[inline]
pub fn write(addr: usize, data: &[u8]) -> SysResult<()> {
    if data.is_empty() {
        return Ok(());
    }
    if direct(addr, data.len(), true) {
        // SAFETY: `direct` found the range writable for the whole call;
        // `copy` (memmove) as in `read`.
        unsafe { core::ptr::copy(data.as_ptr(), addr as *mut u8, data.len()) };
        return Ok(());
    }
    write_beyond(addr, data)
}

/// [`write`] to a range the direct path did not take.
#[inline]
fn write_beyond(addr: usize, data: &[u8]) -> SysResult<()> {
    if let Some(r) = fault::write(addr, data) {
        return r;
    }
    if probe::writable(addr, data.len()) {
        // SAFETY: the kernel has just written every page of the range
        // (`probe.rs`, as in `read`); `copy` as above.
        unsafe { core::ptr::copy(data.as_ptr(), addr as *mut u8, data.len()) };
        return Ok(());
    }
    probe_copy(addr, data.as_ptr() as usize, data.len(), true)
}

/// [`read`] through the kernel only (its check, or its copy): no direct
/// path, whose first look at a thread's stack asks the C library (which
/// may allocate). Raw system calls and copies only, so a signal handler
/// may call it (`syscall(SYS_rt_sigaction, ...)`, `ffi/signals.rs`).
pub fn read_raw(addr: usize, out: &mut [u8]) -> SysResult<()> {
    if out.is_empty() {
        return Ok(());
    }
    if probe::readable(addr, out.len()) {
        // SAFETY: as in `read`: the kernel has just read every page.
        unsafe { core::ptr::copy(addr as *const u8, out.as_mut_ptr(), out.len()) };
        return Ok(());
    }
    probe_copy(addr, out.as_mut_ptr() as usize, out.len(), false)
}

/// [`write`] through the kernel only, as [`read_raw`].
pub fn write_raw(addr: usize, data: &[u8]) -> SysResult<()> {
    if data.is_empty() {
        return Ok(());
    }
    if probe::writable(addr, data.len()) {
        // SAFETY: as in `write`: the kernel has just written every page.
        unsafe { core::ptr::copy(data.as_ptr(), addr as *mut u8, data.len()) };
        return Ok(());
    }
    probe_copy(addr, data.as_ptr() as usize, data.len(), true)
}

/// Checks that the caller's `[addr, addr + len)` can be read (what a
/// `copy_from_user` into a scratch buffer would find), reading it in
/// pieces.
pub fn check_readable(addr: usize, len: usize) -> SysResult<()> {
    if len == 0 || direct(addr, len, false) {
        return Ok(());
    }
    let mut scratch = [0u8; 4096];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(scratch.len());
        read(
            addr.checked_add(done).ok_or(Errno::EFAULT)?,
            &mut scratch[..n],
        )?;
        done += n;
    }
    Ok(())
}

/// Runs `f` on the caller's bytes `[addr, addr + len)` in place if the
/// direct path allows (`None` if not: nothing was read).
#[inline(always)]
pub fn with_direct<R>(addr: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if !direct(addr, len, false) {
        return None;
    }
    // SAFETY: `direct` found the range readable for the whole call; the
    // slice lives only while `f` runs, inside this call.
    Some(f(unsafe {
        core::slice::from_raw_parts(addr as *const u8, len)
    }))
}

/// Copies of up to this many bytes are made on our stack.
const SMALL: usize = 64;

/// Runs `f` on the caller's bytes `[addr, addr + len)`, up to
/// `MTYPE + SMALL` of them (a short message with its `mtype`), in place
/// if the direct path allows, else on a copy on our stack by the copy that
/// may fault. `None` if neither can be had, or the copy faulted: nothing
/// was run, and the caller goes the long way (for the kernel's order of
/// errors).
#[inline(always)]
pub fn with_short<R>(addr: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    if direct(addr, len, false) {
        // SAFETY: as in `with_direct`.
        return Some(f(unsafe {
            core::slice::from_raw_parts(addr as *const u8, len)
        }));
    }
    let mut b = [0u8; MTYPE + SMALL];
    let b = b.get_mut(..len)?;
    matches!(fault::read(addr, b), Some(Ok(()))).then(|| f(b))
}

/// Runs `f` on the caller's bytes `[addr, addr + len)`: in place when the
/// direct path allows, else on a copy made by the kernel (EFAULT before
/// `f` runs if it cannot be read; ENOMEM if no copy can be made).
#[inline(always)]
pub fn with_bytes<R>(addr: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> SysResult<R> {
    if len == 0 {
        return Ok(f(&[]));
    }
    if direct(addr, len, false) {
        // SAFETY: `direct` found the range readable for the whole call;
        // the slice lives only while `f` runs, inside this call.
        let bytes = unsafe { core::slice::from_raw_parts(addr as *const u8, len) };
        return Ok(f(bytes));
    }
    if len <= SMALL {
        let mut b = [0u8; SMALL];
        let b = &mut b[..len];
        read_beyond(addr, b)?;
        return Ok(f(b));
    }
    let mut copy = Vec::new();
    copy.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
    copy.resize(len, 0);
    read_beyond(addr, &mut copy)?;
    Ok(f(&copy))
}

/// Where msgrcv puts a message: the caller's `struct msgbuf` at `msgp`
/// (`long mtype` then `cap` bytes of `mtext`), written in place when the
/// direct path allows for all of it, else through a buffer of the
/// message's size that [`Recv::finish`] has the kernel copy out.
pub struct Recv {
    msgp: usize,
    cap: usize,
    in_place: bool,
    copy: Vec<u8>,
    /// A small message's copy (`mtype` and text), without an allocation.
    small: [u8; MTYPE + SMALL],
    /// Whether the copy is in `small` (and how long it is).
    small_len: Option<usize>,
}

/// Bytes of `mtype` before `mtext`.
const MTYPE: usize = 8;

impl Recv {
    #[inline(always)]
    pub fn new(msgp: usize, cap: usize) -> Recv {
        Recv {
            msgp,
            cap,
            in_place: cap
                .checked_add(MTYPE)
                .is_some_and(|len| direct(msgp, len, true)),
            copy: Vec::new(),
            small: [0; MTYPE + SMALL],
            small_len: None,
        }
    }

    /// Writes `mtype`, then the `n` text bytes if they were not delivered
    /// in place: EFAULT as `do_msg_fill`'s `put_user` and `store_msg`
    /// would give.
    #[inline(always)]
    pub fn finish(self, mtype: i64, n: usize) -> SysResult<()> {
        if self.in_place {
            // SAFETY: `new` found all of `[msgp, msgp + 8 + cap)` writable
            // for the whole call; an unaligned store, as C allows any
            // buffer.
            unsafe { core::ptr::write_unaligned(self.msgp as *mut i64, mtype) };
            return Ok(());
        }
        // `room` kept the copy's first MTYPE bytes for `mtype`: one write
        // of both leaves the bytes (and the EFAULT) that the kernel's
        // put_user of mtype then store_msg of the text leave.
        let mut small = self.small;
        let mut copy = self.copy;
        let all = match self.small_len {
            Some(len) => small.get_mut(..len.min(MTYPE + n)),
            None => copy.get_mut(..MTYPE + n),
        }
        .filter(|a| a.len() == MTYPE + n)
        .ok_or(Errno::EFAULT)?;
        all[..MTYPE].copy_from_slice(&mtype.to_ne_bytes());
        write_beyond(self.msgp, all)
    }
}

impl ipcns_core::msg::RecvBuf for Recv {
    fn cap(&self) -> usize {
        self.cap
    }
    fn room(&mut self, n: usize) -> SysResult<&mut [u8]> {
        let n = n.min(self.cap);
        if self.in_place {
            // SAFETY: `new` found `[msgp, msgp + 8 + cap)` writable for the
            // whole call, and nothing else of ours points there; the slice
            // lives only while the core copies the text in.
            return Ok(unsafe {
                core::slice::from_raw_parts_mut((self.msgp + MTYPE) as *mut u8, n)
            });
        }
        if MTYPE + n <= self.small.len() {
            self.small_len = Some(MTYPE + n);
            self.small[..MTYPE + n].fill(0);
            return Ok(&mut self.small[MTYPE..MTYPE + n]);
        }
        self.small_len = None;
        self.copy.clear();
        self.copy
            .try_reserve_exact(MTYPE + n)
            .map_err(|_| Errno::ENOMEM)?;
        self.copy.resize(MTYPE + n, 0);
        Ok(&mut self.copy[MTYPE..])
    }
}

/// How probed copies are made: 0 not known yet, 1 process_vm_*, 2 memfd.
static PROBE: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// A copy between the caller's `[user, user + len)` and our buffer at
/// `ours`, by the kernel: into the caller's memory when `to_user`.
fn probe_copy(user: usize, ours: usize, len: usize, to_user: bool) -> SysResult<()> {
    use core::sync::atomic::Ordering::Relaxed;
    if PROBE.load(Relaxed) != 2 {
        match vm_copy(user, ours, len, to_user) {
            Err(e) if e == libc::ENOSYS || e == libc::EPERM => PROBE.store(2, Relaxed),
            Err(_) => return Err(Errno::EFAULT),
            Ok(()) => return Ok(()),
        }
    }
    memfd_copy(user, ours, len, to_user).map_err(|_| Errno::EFAULT)
}

fn sys(n: c_long, a: [c_long; 6]) -> Result<c_long, i32> {
    // SAFETY: every call below passes a system call its documented
    // arguments: descriptors of ours, iovecs over a buffer of ours and
    // the caller's range (which the kernel checks), lengths that match.
    next::result(unsafe { next::raw(n, a) })
}

/// `process_vm_readv` / `process_vm_writev` on our own pid, in pieces of
/// at most 1 GiB; a short transfer is a fault.
fn vm_copy(user: usize, ours: usize, len: usize, to_user: bool) -> Result<(), i32> {
    let pid = sys(libc::SYS_getpid, [0; 6])?;
    let n = if to_user {
        libc::SYS_process_vm_writev
    } else {
        libc::SYS_process_vm_readv
    };
    let mut done = 0;
    while done < len {
        let step = (len - done).min(1 << 30);
        let local = libc::iovec {
            iov_base: (ours + done) as *mut c_void,
            iov_len: step,
        };
        let remote = libc::iovec {
            iov_base: user.wrapping_add(done) as *mut c_void,
            iov_len: step,
        };
        let (l, r) = (&local as *const libc::iovec, &remote as *const libc::iovec);
        let got = sys(n, [pid, l as c_long, 1, r as c_long, 1, 0])?;
        if got as usize != step {
            return Err(libc::EFAULT);
        }
        done += step;
    }
    Ok(())
}

/// The same through a memfd of our own, made for the call: `pwrite` from
/// the caller's memory then `pread` into ours, or the other way round.
fn memfd_copy(user: usize, ours: usize, len: usize, to_user: bool) -> Result<(), i32> {
    let fd = sys(
        libc::SYS_memfd_create,
        [
            c"ipcns-copy".as_ptr() as c_long,
            libc::MFD_CLOEXEC as c_long,
            0,
            0,
            0,
            0,
        ],
    )?;
    let (from, to) = if to_user { (ours, user) } else { (user, ours) };
    let mut r = Ok(());
    let mut done = 0;
    while done < len && r.is_ok() {
        let step = (len - done).min(1 << 20);
        let off = 0;
        r = sys(
            libc::SYS_pwrite64,
            [
                fd,
                from.wrapping_add(done) as c_long,
                step as c_long,
                off,
                0,
                0,
            ],
        )
        .and_then(|w| {
            if w as usize != step {
                return Err(libc::EFAULT);
            }
            sys(
                libc::SYS_pread64,
                [
                    fd,
                    to.wrapping_add(done) as c_long,
                    step as c_long,
                    off,
                    0,
                    0,
                ],
            )
        })
        .and_then(|n| {
            if n as usize == step {
                Ok(())
            } else {
                Err(libc::EFAULT)
            }
        });
        done += step;
    }
    let _ = sys(libc::SYS_close, [fd, 0, 0, 0, 0, 0]);
    r
}

/// The program's own memory, as the `*ctl` calls' shared copies
/// (`ipcns_core::usercopy`) read and write it: [`read`] and [`write`].
pub struct Own;

impl ipcns_core::usercopy::UserMem for Own {
    fn read(&self, addr: u64, buf: &mut [u8]) -> SysResult<()> {
        read(addr as usize, buf)
    }
    fn write(&self, addr: u64, bytes: &[u8]) -> SysResult<()> {
        write(addr as usize, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address no access is allowed at.
    fn hole() -> usize {
        // A page with no access, kept mapped (leaked): an unmapped one
        // could be taken by another test thread's mapping meanwhile.
        sys(
            libc::SYS_mmap,
            [
                0,
                4096,
                libc::PROT_NONE as c_long,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as c_long,
                -1,
                0,
            ],
        )
        .unwrap() as usize
    }

    #[test]
    fn the_direct_path_is_the_stack_and_the_image() {
        let on_stack = [7u8; 64];
        let addr = on_stack.as_ptr() as usize;
        assert!(direct(addr, 64, false));
        assert!(direct(addr, 64, true));
        let on_heap = Box::new([0u8; 64]);
        assert!(!direct(on_heap.as_ptr() as usize, 64, false));
        // Read-only data of this program: readable, not writable.
        static TEXT: [u8; 5] = *b"image";
        let t = TEXT.as_ptr() as usize;
        assert!(direct(t, 5, false));
        assert!(!direct(t, 5, true));
        assert!(!direct(usize::MAX - 4, 8, false));
    }

    #[test]
    fn every_copy_path_gives_efault_for_a_hole() {
        let h = hole();
        let mut buf = [0u8; 16];
        assert_eq!(read(h, &mut buf), Err(Errno::EFAULT));
        assert_eq!(write(h, &buf), Err(Errno::EFAULT));
        assert_eq!(
            vm_copy(h, buf.as_mut_ptr() as usize, 16, false),
            Err(libc::EFAULT)
        );
        assert_eq!(
            memfd_copy(h, buf.as_mut_ptr() as usize, 16, false),
            Err(libc::EFAULT)
        );
        assert_eq!(
            memfd_copy(h, buf.as_ptr() as usize, 16, true),
            Err(libc::EFAULT)
        );
        assert_eq!(check_readable(h, 1), Err(Errno::EFAULT));
        assert_eq!(with_bytes(h, 3, |b| b.len()), Err(Errno::EFAULT));
        // Nothing to copy: no fault, whatever the address.
        assert_eq!(read(h, &mut []), Ok(()));
    }

    #[test]
    fn probed_copies_move_the_bytes() {
        let src: Vec<u8> = (0..100u8).collect();
        let mut dst = vec![0u8; 100];
        for to_user in [false, true] {
            dst.iter_mut().for_each(|b| *b = 0);
            let (user, ours) = if to_user {
                (dst.as_mut_ptr() as usize, src.as_ptr() as usize)
            } else {
                (src.as_ptr() as usize, dst.as_mut_ptr() as usize)
            };
            assert_eq!(vm_copy(user, ours, 100, to_user), Ok(()));
            assert_eq!(dst, src);
            dst.iter_mut().for_each(|b| *b = 0);
            assert_eq!(memfd_copy(user, ours, 100, to_user), Ok(()));
            assert_eq!(dst, src);
        }
        let heap = vec![9u8; 10];
        assert_eq!(
            with_bytes(heap.as_ptr() as usize, 10, |b| b.to_vec()),
            Ok(heap.clone())
        );
    }

    #[test]
    fn threads_have_their_own_bounds() {
        let main = stack().expect("the main thread's stack");
        let other = std::thread::spawn(|| {
            let local = 0u8;
            let b = stack().expect("a thread's stack");
            assert!(b.0 <= &local as *const u8 as usize && (&local as *const u8 as usize) < b.1);
            assert!(direct(&local as *const u8 as usize, 1, true));
            b
        })
        .join()
        .unwrap();
        assert_ne!(main, other);
    }
}
