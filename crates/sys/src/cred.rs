//! The calling thread's credentials as the kernel holds them: ids,
//! supplementary groups, effective capabilities, a resource limit.
//!
//! These are the real credentials: a preload that fakes `getuid` (fakeroot)
//! does not reach here, as the kernel's checks are not fooled by it.
//!
//! # Safety
//! Each call writes into locals or a buffer we own, of the size the call
//! is told.
#![allow(unsafe_code)]

use super::raw::{syscall0, syscall2, syscall3, syscall4};
use crate::errno::Errno;

/// `geteuid()`.
pub fn geteuid() -> u32 {
    // SAFETY: no argument; cannot fail.
    unsafe { syscall0(libc::SYS_geteuid) }.map_or(u32::MAX, |u| u as u32)
}

/// `getresuid(&r, &e, &s)`: real, effective and saved uid.
pub fn getresuid() -> Result<[u32; 3], Errno> {
    let mut ids = [0u32; 3];
    let [r, e, s] = ids.each_mut().map(|p| p as *mut u32 as usize);
    // SAFETY: three u32 we own.
    unsafe { syscall3(libc::SYS_getresuid, r, e, s) }?;
    Ok(ids)
}

/// `getresgid(&r, &e, &s)`: real, effective and saved gid.
pub fn getresgid() -> Result<[u32; 3], Errno> {
    let mut ids = [0u32; 3];
    let [r, e, s] = ids.each_mut().map(|p| p as *mut u32 as usize);
    // SAFETY: three u32 we own.
    unsafe { syscall3(libc::SYS_getresgid, r, e, s) }?;
    Ok(ids)
}

/// `getgroups()`: the supplementary groups (at most NGROUPS_MAX, 65536).
pub fn getgroups() -> Result<Vec<u32>, Errno> {
    // The list may grow between the count and the read (another thread's
    // setgroups): EINVAL then, and again, a bounded number of times.
    for _ in 0..8 {
        // SAFETY: a size of 0 asks for the count and writes nothing.
        let n = unsafe { syscall2(libc::SYS_getgroups, 0, 0) }?;
        let mut v = vec![0u32; n.min(65536)];
        // SAFETY: the kernel writes at most v.len() gids into v.
        match unsafe { syscall2(libc::SYS_getgroups, v.len(), v.as_mut_ptr() as usize) } {
            Ok(got) => {
                v.truncate(got);
                return Ok(v);
            }
            Err(Errno::EINVAL) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Errno::EINVAL)
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, as two 32-bit halves.
const CAP_V3: u32 = 0x2008_0522;

/// The effective capability set (`capget`), bit N for capability N.
pub fn effective_caps() -> Result<u64, Errno> {
    // struct __user_cap_header_struct { version, pid }, and two
    // struct __user_cap_data_struct { effective, permitted, inheritable }.
    let mut header = [CAP_V3, 0];
    let mut data = [0u32; 6];
    // SAFETY: a header of two u32 and data for version 3 (two sets of
    // three u32), both ours.
    unsafe {
        syscall2(
            libc::SYS_capget,
            header.as_mut_ptr() as usize,
            data.as_mut_ptr() as usize,
        )
    }?;
    Ok(u64::from(data[0]) | u64::from(data[3]) << 32)
}

/// The soft limit of resource `res` (`prlimit64(0, res, NULL, &old)`);
/// `u64::MAX` is RLIM_INFINITY.
pub fn soft_limit(res: usize) -> Result<u64, Errno> {
    // struct rlimit64 { rlim_cur, rlim_max }.
    let mut old = [0u64; 2];
    // SAFETY: no new limit; the old one into two u64 we own.
    unsafe { syscall4(libc::SYS_prlimit64, 0, res, 0, old.as_mut_ptr() as usize) }?;
    Ok(old[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agree_with_libc() {
        let (mut r, mut e, mut s) = (0, 0, 0);
        // SAFETY: three locals.
        unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
        assert_eq!(getresuid(), Ok([r, e, s]));
        assert_eq!(geteuid(), e);
        // SAFETY: three locals.
        unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
        assert_eq!(getresgid(), Ok([r, e, s]));
        // SAFETY: asks for the count only.
        let n = unsafe { libc::getgroups(0, core::ptr::null_mut()) };
        let mut g = vec![0; n as usize];
        // SAFETY: room for n gids.
        unsafe { libc::getgroups(n, g.as_mut_ptr()) };
        assert_eq!(getgroups(), Ok(g));
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let cap_eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(effective_caps(), Ok(cap_eff));
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: one local.
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
        assert_eq!(soft_limit(libc::RLIMIT_MEMLOCK as usize), Ok(rl.rlim_cur));
    }
}
