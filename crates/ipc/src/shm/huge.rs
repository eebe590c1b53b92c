//! SHM_HUGETLB as Linux answers it on a system ipcns serves no huge pages
//! from: the size encoding and the permission are checked as the kernel
//! checks them, then the pool cannot reserve (ENOMEM).
//!
//! ipc/shm.c newseg: `hs = hstate_sizelog((shmflg >> SHM_HUGE_SHIFT) &
//! SHM_HUGE_MASK); if (!hs) return -EINVAL`; fs/hugetlbfs/inode.c
//! hugetlb_file_setup: `if (!can_do_hugetlb_shm()) return -EPERM`
//! (CAP_IPC_LOCK, or a member of the group `vm.hugetlb_shm_group`), then
//! `hugetlb_reserve_pages` failing: -ENOMEM.

use crate::creds::Cred;
use crate::errno::Errno;
use crate::sys::fs;
use std::path::Path;

/// `SHM_HUGE_SHIFT`, `SHM_HUGE_MASK` (include/uapi/linux/shm.h).
const SHIFT: i32 = 26;
const MASK: i32 = 0x3f;

/// Whether the kernel has a huge page size of `2^log` bytes (0: the
/// default size, there if any is), as /sys/kernel/mm/hugepages lists them.
fn hstate_exists(log: i32) -> bool {
    let dir = Path::new("/sys/kernel/mm/hugepages");
    if log == 0 {
        return fs::dir_names(dir).is_ok_and(|n| !n.is_empty());
    }
    if !(10..64).contains(&log) {
        return false;
    }
    let kb = (1u64 << log) / 1024;
    fs::stat(&dir.join(format!("hugepages-{kb}kB"))).is_ok_and(|s| s.is_dir())
}

/// `vm.hugetlb_shm_group` (0 if it cannot be read, the default).
fn shm_group() -> u32 {
    fs::read_to_string(Path::new("/proc/sys/vm/hugetlb_shm_group"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The answer to a SHM_HUGETLB `shmget` that got past the size checks.
pub fn refuse(cred: &Cred, shmflg: i32) -> Errno {
    if !hstate_exists((shmflg >> SHIFT) & MASK) {
        return Errno::EINVAL;
    }
    if !(cred.cap_ipc_lock || cred.in_group(shm_group())) {
        return Errno::EPERM;
    }
    Errno::ENOMEM
}
