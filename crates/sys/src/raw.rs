//! `syscall0` .. `syscall6`: the instruction itself, in the Linux calling
//! convention of the architecture, with no libc symbol in between.
//!
//! - x86_64: number in `rax`, arguments in `rdi rsi rdx r10 r8 r9`,
//!   `syscall`, result in `rax`; the instruction overwrites `rcx` (return
//!   address) and `r11` (saved flags). syscall(2), "Architecture calling
//!   conventions".
//! - aarch64: number in `x8`, arguments in `x0`..`x5`, `svc 0`, result in
//!   `x0`; nothing else is clobbered.
//! - Elsewhere: `libc::syscall`, which is an interposable symbol (our own
//!   C ABI exports one): the raw guarantee holds on x86_64 and aarch64
//!   only.
//!
//! A result in -4095..=-1 is `-errno`; anything else is the value.
//!
//! # Safety
//! Each function is as safe as the system call it makes: the caller passes
//! a valid number and arguments that are valid for it (pointers to memory
//! of the size and mutability the call expects, live for the call).
#![allow(unsafe_code)]

use crate::errno::Errno;

/// The `long` a system call returned: `Err` for -4095..=-1.
#[inline(always)]
fn check(r: isize) -> Result<usize, Errno> {
    if (-4095..0).contains(&r) {
        Err(Errno(-r as i32))
    } else {
        Ok(r as usize)
    }
}

#[cfg(target_arch = "x86_64")]
mod arch {
    use core::arch::asm;

    /// `syscall` with six arguments (unused ones are ignored by the kernel).
    ///
    /// # Safety
    /// See the module doc.
    #[inline(always)]
    pub unsafe fn call(nr: usize, a: [usize; 6]) -> isize {
        let r: isize;
        // SAFETY: the caller vouches for the call (see the module doc);
        // the syscall instruction touches no user stack and restores the
        // flags from r11, and rcx and r11 are declared clobbered.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") nr as isize => r,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                in("r8") a[4],
                in("r9") a[5],
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, preserves_flags)
            );
        }
        r
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    use core::arch::asm;

    /// `svc 0` with six arguments (unused ones are ignored by the kernel).
    ///
    /// # Safety
    /// See the module doc.
    #[inline(always)]
    pub unsafe fn call(nr: usize, a: [usize; 6]) -> isize {
        let r: isize;
        // SAFETY: the caller vouches for the call (see the module doc);
        // `svc 0` touches no user stack and clobbers only x0.
        unsafe {
            asm!(
                "svc 0",
                in("x8") nr,
                inlateout("x0") a[0] as isize => r,
                in("x1") a[1],
                in("x2") a[2],
                in("x3") a[3],
                in("x4") a[4],
                in("x5") a[5],
                options(nostack, preserves_flags)
            );
        }
        r
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    /// `libc::syscall` with six arguments, its -1/errno turned back into
    /// the kernel's -errno.
    ///
    /// # Safety
    /// See the module doc.
    #[inline(always)]
    pub unsafe fn call(nr: usize, a: [usize; 6]) -> isize {
        // SAFETY: the caller vouches for the call (see the module doc).
        let r = unsafe { libc::syscall(nr as libc::c_long, a[0], a[1], a[2], a[3], a[4], a[5]) };
        if r == -1 {
            -(crate::errno::Errno::last().0 as isize)
        } else {
            r as isize
        }
    }
}

/// `syscall(nr, a...)` as the kernel returns it: the value, or -errno
/// (for callers that pass the result on in the kernel's convention, as the
/// preload library's `syscall` does).
///
/// # Safety
/// See the module doc.
#[inline(always)]
pub unsafe fn raw(nr: libc::c_long, a: [libc::c_long; 6]) -> libc::c_long {
    let a = a.map(|w| w as usize);
    // SAFETY: forwarded from the caller (see the module doc).
    unsafe { arch::call(nr as usize, a) as libc::c_long }
}

macro_rules! syscalls {
    ($($name:ident($($arg:ident),*) => [$($slot:expr),*];)*) => {$(
        /// A raw system call with this many arguments.
        ///
        /// # Safety
        /// See the module doc.
        #[inline(always)]
        pub unsafe fn $name(nr: libc::c_long $(, $arg: usize)*) -> Result<usize, Errno> {
            // SAFETY: forwarded from the caller (see the module doc).
            check(unsafe { arch::call(nr as usize, [$($slot),*]) })
        }
    )*};
}

syscalls! {
    syscall0() => [0, 0, 0, 0, 0, 0];
    syscall1(a1) => [a1, 0, 0, 0, 0, 0];
    syscall2(a1, a2) => [a1, a2, 0, 0, 0, 0];
    syscall3(a1, a2, a3) => [a1, a2, a3, 0, 0, 0];
    syscall4(a1, a2, a3, a4) => [a1, a2, a3, a4, 0, 0];
    syscall5(a1, a2, a3, a4, a5) => [a1, a2, a3, a4, a5, 0];
    syscall6(a1, a2, a3, a4, a5, a6) => [a1, a2, a3, a4, a5, a6];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_errnos() {
        // SAFETY: getpid takes nothing.
        let pid = unsafe { syscall0(libc::SYS_getpid) };
        assert_eq!(pid, Ok(std::process::id() as usize));
        // SAFETY: closing a descriptor that cannot be open (-1) touches
        // nothing.
        let bad = unsafe { syscall1(libc::SYS_close, usize::MAX) };
        assert_eq!(bad, Err(Errno(libc::EBADF)));
        assert_eq!(check(-4095), Err(Errno(4095)));
        assert_eq!(check(-4096), Ok((-4096isize) as usize));
        assert_eq!(check(0), Ok(0));
    }

    #[test]
    fn six_arguments_reach_the_kernel() {
        // mmap takes six: an anonymous page at a kernel-chosen address.
        // SAFETY: a fresh private mapping; no existing memory is affected.
        let p = unsafe {
            syscall6(
                libc::SYS_mmap,
                0,
                4096,
                (libc::PROT_READ | libc::PROT_WRITE) as usize,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as usize,
                usize::MAX,
                0,
            )
        }
        .expect("mmap");
        assert_ne!(p, 0);
        // SAFETY: unmaps the page mapped above, never referenced.
        assert_eq!(unsafe { syscall2(libc::SYS_munmap, p, 4096) }, Ok(0));
    }
}
