//! The victim's memory traps: buffers between inaccessible pages, a
//! fault handler that says which buffer a fault hit, the GETALL/SETALL
//! array of a C caller (a pointer of unknown extent), and the address
//! space limit.
//!
//! A [`Guarded`] buffer ends flush against a PROT_NONE page, so one byte
//! written (or read) past it faults; a PROT_NONE page lies before its
//! first page too, and the slack between that page and the buffer holds a
//! canary, checked after each call (a write before the buffer that does
//! not reach the leading page).
//!
//! # Safety
//! `Guarded` maps fresh anonymous memory and unmaps it on drop; the slices
//! it lends lie inside its read-write pages. The fault handler only reads
//! atomics and calls `write(2)` on a buffer on its stack (async-signal-
//! safe), then returns with the default action restored (SA_RESETHAND):
//! the faulting instruction runs again and the process dies of the
//! signal. [`RawVals`] reads and writes through a raw pointer exactly the
//! number of values the library asks for, as a C program's buffer would
//! be written: the pointer's memory is a `Guarded` buffer's, so a copy
//! past it faults instead of corrupting the victim. `limit_address_space`
//! is a plain `setrlimit`.
#![allow(unsafe_code)]

use core::sync::atomic::AtomicUsize;
use core::sync::atomic::Ordering::Relaxed;
use ipcns::Errno;
use ipcns::sem::SemValues;

const PAGE: usize = 4096;
const CANARY: u8 = 0xa5;

/// Ranges the fault handler names: `(start, end, label)`; start 0 = free.
const RANGES: usize = 64;
static STARTS: [AtomicUsize; RANGES] = [const { AtomicUsize::new(0) }; RANGES];
static ENDS: [AtomicUsize; RANGES] = [const { AtomicUsize::new(0) }; RANGES];
static LABELS: [AtomicUsize; RANGES] = [const { AtomicUsize::new(0) }; RANGES];

/// What a range is (the handler prints the label).
pub const GUARD: usize = 1;
pub const SHM: usize = 2;

fn label(l: usize) -> &'static [u8] {
    match l {
        GUARD => b"a guard page (past or before a caller's buffer)",
        SHM => b"a segment mapping (shmat's attachment)",
        _ => b"?",
    }
}

/// Names `[start, end)` for the fault handler; its slot.
pub fn watch(start: usize, end: usize, what: usize) -> Option<usize> {
    for i in 0..RANGES {
        if STARTS[i]
            .compare_exchange(0, usize::MAX, Relaxed, Relaxed)
            .is_ok()
        {
            ENDS[i].store(end, Relaxed);
            LABELS[i].store(what, Relaxed);
            STARTS[i].store(start, Relaxed);
            return Some(i);
        }
    }
    None
}

pub fn unwatch(slot: Option<usize>) {
    if let Some(i) = slot {
        STARTS[i].store(0, Relaxed);
    }
}

/// A buffer of `len` bytes ending flush against an inaccessible page.
pub struct Guarded {
    base: *mut u8,
    total: usize,
    data: *mut u8,
    len: usize,
    slots: [Option<usize>; 2],
}

impl Guarded {
    pub fn new(len: usize) -> Guarded {
        let pages = len.div_ceil(PAGE).max(1);
        let total = (pages + 2) * PAGE;
        // SAFETY: a fresh private anonymous mapping.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(base != libc::MAP_FAILED, "mmap a guarded buffer");
        let base = base.cast::<u8>();
        // SAFETY: the first and last pages of the mapping just made.
        unsafe {
            libc::mprotect(base.cast(), PAGE, libc::PROT_NONE);
            libc::mprotect(base.add(total - PAGE).cast(), PAGE, libc::PROT_NONE);
        }
        let end = base as usize + total - PAGE;
        let data = (end - len) as *mut u8;
        // SAFETY: the read-write pages between the guards: the slack
        // before the buffer, and the buffer.
        unsafe {
            core::ptr::write_bytes(base.add(PAGE), CANARY, data as usize - base as usize - PAGE);
            core::ptr::write_bytes(data, 0, len);
        }
        let slots = [
            watch(base as usize, base as usize + PAGE, GUARD),
            watch(end, end + PAGE, GUARD),
        ];
        Guarded {
            base,
            total,
            data,
            len,
            slots,
        }
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` read-write bytes of the mapping, borrowed from self.
        unsafe { core::slice::from_raw_parts_mut(self.data, self.len) }
    }

    /// The buffer as `u16`s (the buffer ends on a page boundary: aligned
    /// whenever `len` is even).
    pub fn u16s(&mut self) -> &mut [u16] {
        assert!(self.len.is_multiple_of(2));
        // SAFETY: as `bytes`; 2-aligned since the end is page-aligned and
        // the length even.
        unsafe { core::slice::from_raw_parts_mut(self.data.cast::<u16>(), self.len / 2) }
    }

    /// The C caller's view: a pointer, no length.
    pub fn raw_u16(&mut self) -> RawVals {
        RawVals(self.data.cast::<u16>())
    }

    /// Whether the slack before the buffer still holds the canary.
    pub fn canary_intact(&self) -> bool {
        // SAFETY: the read-write slack between the leading guard and the
        // buffer.
        let slack = unsafe {
            core::slice::from_raw_parts(
                self.base.add(PAGE),
                self.data as usize - self.base as usize - PAGE,
            )
        };
        slack.iter().all(|&b| b == CANARY)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        for s in self.slots {
            unwatch(s);
        }
        // SAFETY: unmaps what `new` mapped; the slices lent are gone.
        unsafe { libc::munmap(self.base.cast(), self.total) };
    }
}

/// GETALL's and SETALL's array as a C program passes it: a pointer. The
/// library decides how many values to copy (the set's size as this
/// process was shown it); they are copied as the kernel's copy_to_user
/// would, without a length check of ours, into a [`Guarded`] buffer sized
/// by what the victim was shown.
pub struct RawVals(*mut u16);

impl SemValues for RawVals {
    fn copy_in(&mut self, into: &mut [u16]) -> Result<(), Errno> {
        // SAFETY: the module doc: a read past the guarded buffer faults.
        unsafe { core::ptr::copy_nonoverlapping(self.0, into.as_mut_ptr(), into.len()) };
        Ok(())
    }
    fn copy_out(&mut self, vals: &[u16]) -> Result<(), Errno> {
        // SAFETY: the module doc: a write past the guarded buffer faults.
        unsafe { core::ptr::copy_nonoverlapping(vals.as_ptr(), self.0, vals.len()) };
        Ok(())
    }
}

/// Appends `s` to `buf` at `*n`.
fn put(buf: &mut [u8], n: &mut usize, s: &[u8]) {
    for &b in s {
        if *n < buf.len() {
            buf[*n] = b;
            *n += 1;
        }
    }
}

fn put_hex(buf: &mut [u8], n: &mut usize, v: usize) {
    put(buf, n, b"0x");
    let mut started = false;
    for i in (0..16).rev() {
        let d = (v >> (i * 4)) & 15;
        if d != 0 || started || i == 0 {
            started = true;
            put(buf, n, &[b"0123456789abcdef"[d]]);
        }
    }
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let mut buf = [0u8; 256];
    let mut n = 0;
    put(&mut buf, &mut n, b"fault ");
    put(
        &mut buf,
        &mut n,
        if sig == libc::SIGBUS {
            b"SIGBUS"
        } else {
            b"SIGSEGV"
        },
    );
    put(&mut buf, &mut n, b" at ");
    put_hex(&mut buf, &mut n, addr);
    let mut what: &[u8] = b" outside every buffer of the test";
    for i in 0..RANGES {
        let s = STARTS[i].load(Relaxed);
        if s != 0 && s != usize::MAX && addr >= s && addr < ENDS[i].load(Relaxed) {
            what = label(LABELS[i].load(Relaxed));
            put(&mut buf, &mut n, b" in ");
            break;
        }
    }
    put(&mut buf, &mut n, what);
    put(&mut buf, &mut n, b"\n");
    // SAFETY: write(2) from a stack buffer: async-signal-safe.
    unsafe { libc::write(2, buf.as_ptr().cast(), n) };
}

/// Installs the fault handler for SIGSEGV and SIGBUS (once, in the victim).
pub fn catch_faults() {
    for sig in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler and an
        // empty mask; SA_RESETHAND restores the default action for the
        // fault's second try.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

/// The process's address space now (VmSize), in bytes.
pub fn vm_size() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmSize:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// RLIMIT_AS = what the process maps now plus `more` bytes: an allocation
/// sized by a hostile count fails (an errno, or an abort if the library
/// allocates infallibly) instead of succeeding by chance.
pub fn limit_address_space(more: u64) -> u64 {
    let lim = vm_size().saturating_add(more);
    let r = libc::rlimit {
        rlim_cur: lim,
        rlim_max: lim,
    };
    // SAFETY: a plain system call with a valid pointer.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &r) };
    lim
}

/// Writes one byte in every page of `[addr, addr + len)` and its last
/// byte (the victim's use of an attachment: a page past the segment's
/// file raises SIGBUS).
///
/// # Safety
/// `[addr, addr + len)` must be a writable mapping of the caller's (an
/// attachment shmat returned with at least `len` bytes).
pub unsafe fn touch(addr: usize, len: usize) {
    let slot = watch(addr, addr + len, SHM);
    let mut off = 0;
    while off < len {
        // SAFETY: the caller's contract.
        unsafe { core::ptr::write_volatile((addr + off) as *mut u8, 0x5a) };
        off += PAGE;
    }
    if len > 0 {
        // SAFETY: the caller's contract.
        unsafe { core::ptr::write_volatile((addr + len - 1) as *mut u8, 0x5b) };
    }
    unwatch(slot);
}
