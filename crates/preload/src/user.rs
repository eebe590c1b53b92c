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
//!   pointer and the top of its stack (the caller's live frames), and the
//!   main program's loaded segments (readable ones for reads; writable
//!   ones, less the part made read-only after relocation (`PT_GNU_RELRO`),
//!   for writes); or
//! - **probed by the kernel**: `process_vm_readv` / `process_vm_writev` on
//!   our own pid copy between the caller's memory and a buffer of ours and
//!   fail with EFAULT exactly where the kernel's copy would, with no fault
//!   in the process. Where a seccomp policy forbids them (ENOSYS, EPERM), a
//!   private memfd does the same: `pwrite` from the caller's memory, or
//!   `pread` into it, is the kernel's own copy.
//!
//! What is guaranteed: a pointer to memory that is unmapped, or lacks the
//! permission, gives EFAULT and never a signal, also when another thread
//! unmaps it during the call (a probed copy then fails; a direct one is
//! on memory that thread cannot take away without unmapping its own live
//! stack or program image). The only ways left to make the library fault
//! are to `munmap` or `mprotect` a live stack frame or the program's own
//! image while passing a pointer into it. A buffer that another thread
//! writes during the call may be read torn, as the kernel may read it.
//!
//! The direct path costs a comparison or two; a probed copy costs a
//! system call (about the price of the kernel's own IPC call), so heap
//! buffers are slower than stack and static ones.
//!
//! Each thread's stack bounds are found once (`pthread_getattr_np`) and
//! kept in a table indexed by the thread pointer (the C library's thread
//! control block, which no two live threads share), so a check costs a
//! few loads and no thread-local look-up; a thread's entry is cleared when
//! it exits (a `pthread_key` destructor). A thread that shares its
//! creator's thread pointer (a raw `clone` without a new TLS) finds its
//! creator's bounds, which hold its stack pointer only if its stack lies
//! in its creator's, where the range is mapped all the same.
//!
//! # Safety
//! A direct copy touches `[addr, addr + len)` only after [`direct`] found
//! it inside the calling thread's stack above the current stack pointer
//! (whose bounds come from `pthread_getattr_np` and whose pages from the
//! stack pointer up are in use by live frames, so mapped read-write), or
//! inside one of the main program's `PT_LOAD` segments with the needed
//! permission (mapped for the program's life); the slices made over such
//! memory live no longer than the call that made them. The probing system
//! calls are given one `iovec` over a buffer of ours, of its length, and
//! one over the caller's range; the kernel checks the caller's range.
//! `dl_iterate_phdr` gives the callback a valid `dl_phdr_info` whose
//! `dlpi_phdr` points to `dlpi_phnum` program headers. The thread pointer
//! is read from `%fs:0` (x86-64, where glibc keeps the TCB's address) or
//! `tpidr_el0` (aarch64); every thread that runs C library code has one.
//! The `pthread_key` destructor only stores to atomics.
#![allow(unsafe_code)]

use crate::hot::HOT;
use crate::next;
use core::ffi::{c_int, c_long, c_void};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering, fence};
use ipcns_core::{Errno, SysResult};
use std::sync::OnceLock;

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

/// The stack pointer.
#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
    }
    sp
}

/// The thread pointer: the address of the calling thread's control block
/// (x86-64: glibc keeps it at `%fs:0`; aarch64: `tpidr_el0`).
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads the TCB's self pointer at offset 0 of the thread's
    // TLS block, which every thread running C library code has.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nomem, nostack, preserves_flags));
    }
    tp
}

/// One thread's stack bounds, keyed by its thread pointer: a small
/// seqlock (`key` 0 while being written).
#[repr(C, align(8))]
pub struct Bounds {
    key: AtomicUsize,
    lo: AtomicUsize,
    hi: AtomicUsize,
}

impl Bounds {
    pub const fn new() -> Bounds {
        Bounds {
            key: AtomicUsize::new(0),
            lo: AtomicUsize::new(0),
            hi: AtomicUsize::new(0),
        }
    }

    /// `(lo, hi)` if the entry is `tp`'s.
    #[inline(always)]
    fn read(&self, tp: usize) -> Option<(usize, usize)> {
        // Acquire, then the fence before the second look: pairs with the
        // writer's fence and Release (a torn read shows as a changed key).
        if self.key.load(Ordering::Acquire) != tp {
            return None;
        }
        let (lo, hi) = (
            self.lo.load(Ordering::Relaxed),
            self.hi.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (self.key.load(Ordering::Relaxed) == tp).then_some((lo, hi))
    }

    fn write(&self, tp: usize, lo: usize, hi: usize) {
        self.key.store(0, Ordering::Relaxed);
        // Release fence: the cleared key is seen before the new bounds.
        fence(Ordering::Release);
        self.lo.store(lo, Ordering::Relaxed);
        self.hi.store(hi, Ordering::Relaxed);
        self.key.store(tp, Ordering::Release);
    }
}

/// Other threads' bounds, one per cache line.
#[repr(C, align(64))]
struct Line(Bounds);

const NSTACKS: usize = 256;
static STACKS: [Line; NSTACKS] = [const { Line(Bounds::new()) }; NSTACKS];
/// The main thread's are apart, in the hot line (and finding them reads
/// /proc/self/maps, so no other thread may evict them).
static MAIN: &Bounds = &HOT.main;

#[inline(always)]
fn index(tp: usize) -> usize {
    (tp.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) % NSTACKS
}

/// The calling thread's stack `[lo, hi)`, if known (found once).
#[inline(always)]
fn stack() -> Option<(usize, usize)> {
    let tp = thread_pointer();
    let b = match MAIN.read(tp) {
        Some(b) => b,
        None => match STACKS[index(tp)].0.read(tp) {
            Some(b) => b,
            None => find_stack(tp),
        },
    };
    (b.0 < b.1).then_some(b)
}

/// Finds and records the calling thread's stack bounds.
#[cold]
#[inline(never)]
fn find_stack(tp: usize) -> (usize, usize) {
    let main = sys(libc::SYS_gettid, [0; 6]).ok() == sys(libc::SYS_getpid, [0; 6]).ok();
    let slot = if main { MAIN } else { &STACKS[index(tp)].0 };
    // An empty range first: a call that re-enters while the bounds are
    // looked up (pthread_getattr_np reads /proc/self/maps for the main
    // thread) takes the probed path.
    slot.write(tp, 1, 1);
    let (lo, hi) = stack_bounds().unwrap_or((1, 1));
    slot.write(tp, lo, hi);
    if !main {
        forget_at_exit(tp);
    }
    (lo, hi)
}

/// The key whose destructor clears an exiting thread's entry; u32::MAX
/// none yet, u32::MAX - 1 being made.
static EXIT_KEY: AtomicU32 = AtomicU32::new(u32::MAX);

extern "C" fn forget(tp: *mut c_void) {
    let tp = tp as usize;
    // Only if the entry is still this thread's (another may have taken
    // the slot since). Relaxed: a reader re-checks the key after reading.
    let _ = STACKS[index(tp)]
        .0
        .key
        .compare_exchange(tp, 0, Ordering::Relaxed, Ordering::Relaxed);
}

/// Arranges for `forget(tp)` when the calling thread exits.
fn forget_at_exit(tp: usize) {
    let mut key = EXIT_KEY.load(Ordering::Acquire);
    if key == u32::MAX
        && EXIT_KEY
            .compare_exchange(u32::MAX, u32::MAX - 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: creates a key with a destructor that only touches atomics.
        let r = unsafe { libc::pthread_key_create(&mut k, Some(forget)) };
        key = if r == 0 { k } else { u32::MAX - 1 };
        EXIT_KEY.store(key, Ordering::Release);
    }
    if key < u32::MAX - 1 {
        // SAFETY: a valid key; the value is a number, never dereferenced.
        unsafe { libc::pthread_setspecific(key, tp as *const c_void) };
    }
}

/// The calling thread's stack, `[lowest, top)`, from `pthread_getattr_np`.
fn stack_bounds() -> Option<(usize, usize)> {
    let mut attr = core::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: fills the local attribute object for the calling thread.
    let r = unsafe { libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) };
    if r != 0 {
        return None;
    }
    let mut addr: *mut c_void = core::ptr::null_mut();
    let mut size: usize = 0;
    // SAFETY: `attr` was initialised by pthread_getattr_np just above;
    // the out-pointers are locals.
    let r = unsafe { libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size) };
    // SAFETY: initialised above, destroyed once.
    unsafe { libc::pthread_attr_destroy(attr.as_mut_ptr()) };
    let lo = addr as usize;
    (r == 0 && size > 0).then(|| (lo, lo.saturating_add(size)))
}

/// One range of the main program's image: `[lo, hi)`, and whether it may
/// be written.
#[derive(Clone, Copy, Debug)]
struct Seg {
    lo: usize,
    hi: usize,
    write: bool,
}

/// At most this many ranges are kept (a program has four or five).
const MAX_SEGS: usize = 16;

static IMAGE: OnceLock<([Seg; MAX_SEGS], usize)> = OnceLock::new();

/// Whether `[addr, end)` lies in one readable (or, for `write`, writable
/// and not RELRO) segment of the main program.
#[inline]
fn image_contains(addr: usize, end: usize, write: bool) -> bool {
    let (segs, n) = IMAGE.get_or_init(image_segments);
    segs[..*n]
        .iter()
        .any(|s| addr >= s.lo && end <= s.hi && (s.write || !write))
}

/// The main program's `PT_LOAD` segments (`PF_R` ones; writable unless
/// inside its `PT_GNU_RELRO` range, which is cut out of them).
fn image_segments() -> ([Seg; MAX_SEGS], usize) {
    struct Acc {
        segs: [Seg; MAX_SEGS],
        n: usize,
        done: bool,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Acc` passed below, alive across the call
        // and touched by nothing else meanwhile.
        let acc = unsafe { &mut *data.cast::<Acc>() };
        if acc.done {
            return 1;
        }
        acc.done = true;
        // SAFETY: dl_iterate_phdr hands a valid info whose headers array
        // has dlpi_phnum entries (module doc).
        let info = unsafe { &*info };
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let base = info.dlpi_addr as usize;
        let range = |p: &libc::Elf64_Phdr| {
            let lo = base.wrapping_add(p.p_vaddr as usize);
            (lo, lo.saturating_add(p.p_memsz as usize))
        };
        let relro = phdrs
            .iter()
            .find(|p| p.p_type == libc::PT_GNU_RELRO)
            .map(range);
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            if p.p_flags & libc::PF_R == 0 {
                continue;
            }
            let (lo, hi) = range(p);
            let write = p.p_flags & libc::PF_W != 0;
            let mut push = |s: Seg| {
                if acc.n < MAX_SEGS && s.lo < s.hi {
                    acc.segs[acc.n] = s;
                    acc.n += 1;
                }
            };
            match relro {
                // A writable segment that holds the RELRO range: the range
                // is read-only, the rest on either side writable. RELRO is
                // rounded to pages by the loader, so the cut is widened to
                // whole pages.
                Some((rlo, rhi)) if write && rlo < hi && rhi > lo => {
                    let mask = page_size() - 1;
                    let (rlo, rhi) = (rlo & !mask, rhi.saturating_add(mask) & !mask);
                    push(Seg {
                        lo,
                        hi: rlo.max(lo),
                        write: true,
                    });
                    push(Seg {
                        lo,
                        hi,
                        write: false,
                    });
                    push(Seg {
                        lo: rhi.min(hi),
                        hi,
                        write: true,
                    });
                }
                _ => push(Seg { lo, hi, write }),
            }
        }
        1
    }
    let mut acc = Acc {
        segs: [Seg {
            lo: 0,
            hi: 0,
            write: false,
        }; MAX_SEGS],
        n: 0,
        done: false,
    };
    // SAFETY: the callback only reads what dl_iterate_phdr hands it and
    // writes `acc`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut acc as *mut Acc).cast()) };
    (acc.segs, acc.n)
}

/// The page size (`AT_PAGESZ`; 64 KiB, the largest Linux uses, if the
/// auxiliary vector lacks it).
fn page_size() -> usize {
    // SAFETY: getauxval reads the process's auxiliary vector; no pointer.
    match unsafe { libc::getauxval(libc::AT_PAGESZ) } as usize {
        p if p.is_power_of_two() => p,
        _ => 1 << 16,
    }
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
    let mut copy = Vec::new();
    copy.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
    copy.resize(len, 0);
    read(addr, &mut copy)?;
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
        }
    }

    /// Writes `mtype`, then the `n` text bytes if they were not delivered
    /// in place: EFAULT as `do_msg_fill`'s `put_user` and `store_msg`
    /// would give.
    #[inline(always)]
    pub fn finish(&self, mtype: i64, n: usize) -> SysResult<()> {
        if self.in_place {
            // SAFETY: `new` found all of `[msgp, msgp + 8 + cap)` writable
            // for the whole call; an unaligned store, as C allows any
            // buffer.
            unsafe { core::ptr::write_unaligned(self.msgp as *mut i64, mtype) };
            return Ok(());
        }
        write(self.msgp, &mtype.to_ne_bytes())?;
        let text = self.msgp.checked_add(MTYPE).ok_or(Errno::EFAULT)?;
        write(text, self.copy.get(..n).ok_or(Errno::EFAULT)?)
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
        self.copy.clear();
        self.copy.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
        self.copy.resize(n, 0);
        Ok(&mut self.copy[..])
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of our own, unmapped again: an address nothing is at.
    fn hole() -> usize {
        let p = sys(
            libc::SYS_mmap,
            [
                0,
                4096,
                (libc::PROT_READ | libc::PROT_WRITE) as c_long,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as c_long,
                -1,
                0,
            ],
        )
        .unwrap() as usize;
        sys(libc::SYS_munmap, [p as c_long, 4096, 0, 0, 0, 0]).unwrap();
        p
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
