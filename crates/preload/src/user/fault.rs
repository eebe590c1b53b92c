//! Copies that may fault, as the kernel's `copy_from_user` may: one
//! `rep movsb` (word and byte loops for a few bytes), and a fault on it
//! (SIGSEGV or SIGBUS raised by that very instruction on this thread)
//! ends the copy there (a fault in the word loop goes on byte by byte
//! from the same place, to fault at the exact byte), with the count of
//! bytes not copied, exactly as the kernel's exception table ends its own
//! (arch/x86/lib/copy_user_64.S, "_ASM_EXTABLE_UA(0b, 1b)"). This is the
//! direct copy for memory the stack and image checks cannot vouch for
//! (the heap, a shared library's data): no system call per call.
//!
//! It is used only when a fault on it can be caught: the library holds
//! SIGSEGV and SIGBUS (`signals.rs`, `ffi/signals.rs`: the kernel runs
//! our fault handler, and the program's actions are kept apart and
//! honoured), and neither signal is blocked on the calling thread (a
//! fault on a blocked SIGSEGV kills the process whatever the handler,
//! kernel/signal.c `force_sig_info_to_task`). Each thread's answer to the
//! second question is kept next to its stack bounds (`bounds.rs`), tagged
//! with its thread pointer: unknown until asked once (`rt_sigprocmask`),
//! recomputed by the interposed mask calls, unknown again inside a
//! wrapped handler and after any call that may restore a mask behind our
//! back (`siglongjmp`, `setcontext`, a raw `rt_sigprocmask`). Unknown
//! means ask; a wrong "unblocked" is the one state to avoid, and only a
//! mask changed by a path no symbol of ours sees (inline system calls in
//! another library, or a handler installed behind our back that calls
//! IPC with SIGSEGV in its mask) can leave one.
//!
//! x86-64 only; elsewhere [`read`] and [`write`] decline and the callers
//! keep the kernel's check (`probe.rs`).
//!
//! # Safety
//! The copy routine touches only `[dst, dst + len)` and
//! `[src, src + len)`; its callers pass a buffer of ours for one side and
//! the caller's range for the other, which may fault: a fault there is
//! turned into a return by [`recover`], which the fault handler calls with
//! the kernel's `ucontext_t`, and which moves the instruction pointer only
//! when it is exactly at the copy's one faulting instruction and the
//! signal was raised by the hardware (a positive `si_code`).
#![allow(unsafe_code)]

use core::sync::atomic::AtomicBool;
use core::sync::atomic::Ordering::{Acquire, Release};
use ipcns_core::{Errno, SysResult};

/// Whether the library holds SIGSEGV and SIGBUS (set by `signals.rs`).
static READY: AtomicBool = AtomicBool::new(false);

/// The library now holds (or no longer holds) both fault signals.
pub fn set_ready(ready: bool) {
    // Release: the fault handler was installed before copies may fault.
    READY.store(ready, Release);
}

/// Whether copies may fault now (the signals held).
#[inline(always)]
pub fn ready() -> bool {
    READY.load(Acquire)
}

/// What takes the fault signals over (`ffi/signals.rs`, registered at
/// load: the handler is the C ABI's), as a function address; 0 none.
static TAKER: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Registers the function that takes SIGSEGV and SIGBUS over (once, at
/// the first copy that needs it).
pub fn set_taker(f: fn() -> bool) {
    TAKER.store(f as usize, Release);
}

/// Whether copies may fault: the signals held, or taken over now.
#[inline(always)]
fn held() -> bool {
    ready() || take()
}

#[cold]
#[inline(never)]
fn take() -> bool {
    let f = TAKER.load(Acquire);
    if f == 0 {
        return false;
    }
    // SAFETY: the address of a `fn() -> bool` stored by `set_taker`.
    let f = unsafe { core::mem::transmute::<usize, fn() -> bool>(f) };
    f()
}

/// The last byte of the user address space on x86-64 with 4-level page
/// tables, plus one (`TASK_SIZE_MAX`, less the guard page); ranges beyond
/// are left to the kernel's check, which knows its own limit.
const USER_END: usize = (1 << 47) - 4096;

/// Copies up to this many bytes go by words and bytes: `rep movsb` costs
/// some 25 cycles to start whatever the length (a third of the heap's
/// extra cost per semop, by perf), the loops over a sembuf's 6 bytes or
/// a short message a few.
const SMALL: usize = 32;

#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .text.ipcns_fault_copy,\"ax\",@progbits",
    ".p2align 4",
    ".globl ipcns_fault_copy",
    ".hidden ipcns_fault_copy",
    ".type ipcns_fault_copy,@function",
    "ipcns_fault_copy:",
    "mov rcx, rdx",
    "cmp rcx, {small}",
    "ja 3f",
    // Eight bytes at a time; a fault on either instruction goes on at
    // the byte loop from the same place (a faulting store wrote nothing),
    // which faults again at the exact byte.
    "4:",
    "cmp rcx, 8",
    "jb 5f",
    ".globl ipcns_fault_copy_qload",
    ".hidden ipcns_fault_copy_qload",
    "ipcns_fault_copy_qload:",
    "mov rax, qword ptr [rsi]",
    ".globl ipcns_fault_copy_qstore",
    ".hidden ipcns_fault_copy_qstore",
    "ipcns_fault_copy_qstore:",
    "mov qword ptr [rdi], rax",
    "add rsi, 8",
    "add rdi, 8",
    "sub rcx, 8",
    "jmp 4b",
    "5:",
    "test rcx, rcx",
    "jz 2f",
    // The byte loop: rcx is the count left at either faulting
    // instruction, as at `rep movsb`.
    ".globl ipcns_fault_copy_bytes",
    ".hidden ipcns_fault_copy_bytes",
    "ipcns_fault_copy_bytes:",
    "1:",
    ".globl ipcns_fault_copy_load",
    ".hidden ipcns_fault_copy_load",
    "ipcns_fault_copy_load:",
    "movzx eax, byte ptr [rsi]",
    ".globl ipcns_fault_copy_store",
    ".hidden ipcns_fault_copy_store",
    "ipcns_fault_copy_store:",
    "mov byte ptr [rdi], al",
    "inc rsi",
    "inc rdi",
    "dec rcx",
    "jnz 1b",
    "2:",
    "xor eax, eax",
    "ret",
    "3:",
    ".globl ipcns_fault_copy_at",
    ".hidden ipcns_fault_copy_at",
    "ipcns_fault_copy_at:",
    "rep movsb",
    "xor eax, eax",
    "ret",
    ".globl ipcns_fault_copy_fixup",
    ".hidden ipcns_fault_copy_fixup",
    "ipcns_fault_copy_fixup:",
    "mov rax, rcx",
    "ret",
    ".size ipcns_fault_copy, . - ipcns_fault_copy",
    ".popsection",
    small = const SMALL,
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    /// Copies `len` bytes from `src` to `dst` forwards; the bytes not
    /// copied (0, or what was left when a fault ended it).
    fn ipcns_fault_copy(dst: *mut u8, src: *const u8, len: usize) -> usize;
    /// The `rep movsb` of a long copy.
    static ipcns_fault_copy_at: u8;
    /// The word loop's load and store of a short copy, and the byte
    /// loop a fault on them goes on at.
    static ipcns_fault_copy_qload: u8;
    static ipcns_fault_copy_qstore: u8;
    static ipcns_fault_copy_bytes: u8;
    /// The byte loop's load and store.
    static ipcns_fault_copy_load: u8;
    static ipcns_fault_copy_store: u8;
    /// Where a fault on any of the three resumes: returns the count left
    /// in rcx.
    static ipcns_fault_copy_fixup: u8;
}

/// Whether a copy between `user` and our `ours`, `len` bytes, may be made
/// here: the signals held, unblocked on this thread, the range inside the
/// user address space and apart from ours (the copy goes forwards only).
#[inline(always)]
fn usable(user: usize, ours: usize, len: usize) -> bool {
    let Some(end) = user.checked_add(len) else {
        return false;
    };
    cfg!(target_arch = "x86_64")
        && end <= USER_END
        && held()
        && (end <= ours || ours + len <= user)
        && super::stack::faults_unblocked()
}

/// Reads the caller's `[addr, addr + out.len())` into `out` by a copy
/// that may fault: `None` if it cannot be used here, else the kernel's
/// answer (EFAULT if any byte could not be read).
#[inline]
pub fn read(addr: usize, out: &mut [u8]) -> Option<SysResult<()>> {
    if !usable(addr, out.as_ptr() as usize, out.len()) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `out` is ours; the caller's range may fault, which
        // `recover` turns into a short count (module doc).
        let left = unsafe { ipcns_fault_copy(out.as_mut_ptr(), addr as *const u8, out.len()) };
        Some(if left == 0 {
            Ok(())
        } else {
            Err(Errno::EFAULT)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Writes `data` to the caller's `[addr, addr + data.len())` by a copy
/// that may fault: `None` if it cannot be used here, else the kernel's
/// answer (EFAULT if any byte could not be written; those before the
/// fault are, as the kernel's `copy_to_user` leaves them).
#[inline]
pub fn write(addr: usize, data: &[u8]) -> Option<SysResult<()>> {
    if !usable(addr, data.as_ptr() as usize, data.len()) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: as in `read`, the other way.
        let left = unsafe { ipcns_fault_copy(addr as *mut u8, data.as_ptr(), data.len()) };
        Some(if left == 0 {
            Ok(())
        } else {
            Err(Errno::EFAULT)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Called first by the fault handler: if the fault (`info`, `uc` from
/// the kernel) was raised by the copy's own instruction, resumes the copy
/// at its fixup (which returns the bytes left) and says so.
///
/// # Safety
/// `info` and `uc` are the kernel's arguments to an SA_SIGINFO handler.
pub unsafe fn recover(info: *const libc::siginfo_t, uc: *mut core::ffi::c_void) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if info.is_null() || uc.is_null() {
            return false;
        }
        // SAFETY: the kernel's siginfo.
        if unsafe { (*info).si_code } <= 0 {
            // Sent by a process (kill, tgkill, sigqueue), not a fault.
            return false;
        }
        let uc = uc.cast::<libc::ucontext_t>();
        let rip = libc::REG_RIP as usize;
        // SAFETY: the kernel's ucontext for this delivery, on our stack;
        // the addresses of labels of ours.
        unsafe {
            let ip = (*uc).uc_mcontext.gregs[rip] as usize;
            let ours = [
                core::ptr::addr_of!(ipcns_fault_copy_at) as usize,
                core::ptr::addr_of!(ipcns_fault_copy_load) as usize,
                core::ptr::addr_of!(ipcns_fault_copy_store) as usize,
            ];
            let words = [
                core::ptr::addr_of!(ipcns_fault_copy_qload) as usize,
                core::ptr::addr_of!(ipcns_fault_copy_qstore) as usize,
            ];
            let resume = if ours.contains(&ip) {
                core::ptr::addr_of!(ipcns_fault_copy_fixup)
            } else if words.contains(&ip) {
                core::ptr::addr_of!(ipcns_fault_copy_bytes)
            } else {
                return false;
            };
            (*uc).uc_mcontext.gregs[rip] = resume as i64;
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (info, uc);
        false
    }
}
