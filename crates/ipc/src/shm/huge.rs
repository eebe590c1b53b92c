//! SHM_HUGETLB: segments served from huge pages of a hugetlbfs mount.
//!
//! `shmget` checks the size encoding and the permission as the kernel
//! does, then makes the segment's file on a hugetlbfs mount of the
//! requested page size that the caller can use, sized to the huge page
//! rounded size, and reserves its pages there and then (a shared mapping
//! made and unmapped: `hugetlb_reserve_pages`, HugePages_Rsvd), so that no
//! later fault can fail. No usable mount, or no pages: ENOMEM, as the
//! kernel's reservation failing gives.
//!
//! ipc/shm.c newseg: `hs = hstate_sizelog((shmflg >> SHM_HUGE_SHIFT) &
//! SHM_HUGE_MASK); if (!hs) return -EINVAL`, `hugesize = ALIGN(size,
//! huge_page_size(hs))`, `if (shmflg & SHM_NORESERVE) acctflag =
//! VM_NORESERVE`; fs/hugetlbfs/inode.c hugetlb_file_setup: `if
//! (!can_do_hugetlb_shm()) return -EPERM` (CAP_IPC_LOCK, or a member of the
//! group `vm.hugetlb_shm_group`), then `hugetlb_reserve_pages` failing:
//! -ENOMEM. With SHM_NORESERVE nothing is reserved (the kernel grants the
//! segment without pages; a touch of a page the pool cannot give is
//! SIGBUS there as here).
//!
//! # Where the file is
//! `<mount>/ipcns-<major>.<minor>-<ino>/shm.<serial>`, where `<mount>` is a
//! hugetlbfs mount whose block size is the page size (the one
//! `IPCNS_HUGETLBFS` names first, then those of /proc/self/mountinfo, the
//! first where the directory can be made), and major, minor, ino name the
//! arena file. The directory follows
//! the rules of `<arena>.d` (arena/file.rs): the arena's owner, its mode
//! plus `x`. The segment's record keeps what another process needs to
//! find the file and trust it ([`Huge::pack`]): the page size, the mount's
//! device and the file's inode; a process looks through its own
//! hugetlbfs mounts for that device and accepts the file only if it is a
//! regular file with that device and inode.

use crate::arena::{self, Arena};
use crate::creds::Cred;
use crate::errno::Errno;
use crate::object::ShmSlot;
use crate::sys::{Fd, Stat, fs};
use core::sync::atomic::Ordering::Relaxed;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// `SHM_HUGE_SHIFT`, `SHM_HUGE_MASK` (include/uapi/linux/shm.h).
const SHIFT: i32 = 26;
const MASK: i32 = 0x3f;

/// `HUGETLBFS_MAGIC` (include/uapi/linux/magic.h).
const HUGETLBFS_MAGIC: u64 = 0x9584_58f6;

/// Smallest and largest huge page shifts accepted from a record (64 KiB,
/// arm64's smallest, to 16 GiB, powerpc's largest).
const MIN_SHIFT: u32 = 16;
const MAX_SHIFT: u32 = 34;

/// Bit of the packed word: SHM_NORESERVE (nothing reserved).
const NORESERVE_BIT: u64 = 1 << 8;

/// A huge page segment's file, as its record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Huge {
    /// log2 of the huge page size.
    pub shift: u32,
    pub noreserve: bool,
    /// The hugetlbfs mount's device.
    pub dev: (u32, u32),
    pub ino: u64,
}

impl Huge {
    /// The huge page size.
    pub fn page(&self) -> u64 {
        1 << self.shift
    }

    /// `size` rounded up to the huge page size (None past u64).
    pub fn round(&self, size: u64) -> Option<u64> {
        size.checked_next_multiple_of(self.page())
    }

    /// The two words of the record (`ShmSlot::spare`): the shift in bits
    /// 0-7, SHM_NORESERVE in bit 8, the device's minor in bits 12-31 and
    /// major in bits 32-63; then the inode. A record of an ordinary
    /// segment has both zero.
    fn pack(&self) -> [u64; 2] {
        let w = u64::from(self.shift)
            | if self.noreserve { NORESERVE_BIT } else { 0 }
            | (u64::from(self.dev.1 & 0xf_ffff) << 12)
            | (u64::from(self.dev.0) << 32);
        [w, self.ino]
    }

    /// Stores this in `s` (an ordinary segment: `None`, zeroes).
    pub fn store(this: Option<&Huge>, s: &ShmSlot) {
        let w = this.map_or([0, 0], Huge::pack);
        s.spare[0].store(w[0], Relaxed);
        s.spare[1].store(w[1], Relaxed);
    }

    /// What the record `s` says, checked: `Ok(None)` for an ordinary
    /// segment, EIDRM for words no shmget wrote (a shift out of range,
    /// stray bits), which name no file ipcns would trust.
    pub fn of(s: &ShmSlot) -> Result<Option<Huge>, Errno> {
        Huge::unpack(s.spare[0].load(Relaxed), s.spare[1].load(Relaxed))
    }

    /// [`Huge::of`] on the two words.
    fn unpack(w: u64, ino: u64) -> Result<Option<Huge>, Errno> {
        if w == 0 && ino == 0 {
            return Ok(None);
        }
        let shift = (w & 0xff) as u32;
        if !(MIN_SHIFT..=MAX_SHIFT).contains(&shift) || w & 0xe00 != 0 || ino == 0 {
            return Err(Errno::EIDRM);
        }
        Ok(Some(Huge {
            shift,
            noreserve: w & NORESERVE_BIT != 0,
            dev: ((w >> 32) as u32, ((w >> 12) & 0xf_ffff) as u32),
            ino,
        }))
    }
}

/// The kernel's huge page size of `2^log` bytes (0: the default size,
/// /proc/meminfo's Hugepagesize), if it has a pool of them
/// (/sys/kernel/mm/hugepages): `hstate_sizelog`.
fn hstate_size(log: i32) -> Option<u64> {
    let dir = Path::new("/sys/kernel/mm/hugepages");
    let size = if log == 0 {
        if fs::dir_names(dir).is_ok_and(|n| n.is_empty()) {
            return None;
        }
        let meminfo = fs::read_to_string(Path::new("/proc/meminfo")).ok()?;
        let kb: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("Hugepagesize:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        kb.checked_mul(1024)?
    } else {
        if !(10..64).contains(&log) {
            return None;
        }
        1u64 << log
    };
    let kb = size / 1024;
    let ok = fs::stat(&dir.join(format!("hugepages-{kb}kB"))).is_ok_and(|s| s.is_dir());
    (ok && size.is_power_of_two()).then_some(size)
}

/// `vm.hugetlb_shm_group` (0 if it cannot be read, the default).
fn shm_group() -> u32 {
    fs::read_to_string(Path::new("/proc/sys/vm/hugetlb_shm_group"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// A mountinfo path field with its octal escapes (`\040` for a space...)
/// undone.
fn unescape(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The hugetlbfs mount points of this process: `IPCNS_HUGETLBFS` first if
/// it names one (an absolute path), then those of /proc/self/mountinfo, in
/// its order, at most 64. Each is checked by [`mount_dev`] before use.
fn mounts() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("IPCNS_HUGETLBFS")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .into_iter()
        .collect();
    let Ok(text) = fs::read_to_string(Path::new("/proc/self/mountinfo")) else {
        return out;
    };
    let found = text
        .lines()
        .filter_map(|l| {
            let (mine, theirs) = l.split_once(" - ")?;
            (theirs.split(' ').next()? == "hugetlbfs").then_some(())?;
            Some(unescape(mine.split(' ').nth(4)?))
        })
        .filter(|m| !out.contains(m))
        .take(64)
        .collect::<Vec<_>>();
    out.extend(found);
    out
}

/// The mount at `dir`, if it is hugetlbfs with pages of `page` bytes: its
/// device.
fn mount_dev(dir: &Path, page: u64) -> Option<(u32, u32)> {
    let f = fs::open(
        dir,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK,
        0,
    )
    .ok()?;
    let (kind, bsize) = f.statfs().ok()?;
    if kind != HUGETLBFS_MAGIC || bsize != page {
        return None;
    }
    let m = f.stat().ok()?;
    // Only devices the record can hold (minor below 2^20, as Linux's).
    (m.dev.1 <= 0xf_ffff).then_some(m.dev)
}

/// The arena's directory on a hugetlbfs mount.
fn dir_under(mount: &Path, id: &Stat) -> PathBuf {
    mount.join(format!("ipcns-{}.{}-{}", id.dev.0, id.dev.1, id.ino))
}

/// The answer to a SHM_HUGETLB `shmget` of `size` bytes that got past the
/// size checks: the segment's new file (`shm.<serial>`), its pages
/// reserved unless SHM_NORESERVE, and its path; or the kernel's errno.
pub(crate) fn create(
    a: &Arena,
    cred: &Cred,
    shmflg: i32,
    size: u64,
    serial: u64,
) -> Result<(Huge, PathBuf), Errno> {
    // newseg: "if (!hs) return -EINVAL".
    let Some(page) = hstate_size((shmflg >> SHIFT) & MASK) else {
        return Err(Errno::EINVAL);
    };
    // hugetlb_file_setup: "if (!can_do_hugetlb_shm()) return -EPERM".
    if !(cred.cap_ipc_lock || cred.in_group(shm_group())) {
        return Err(Errno::EPERM);
    }
    let noreserve = shmflg & crate::abi::SHM_NORESERVE != 0;
    let shift = page.trailing_zeros();
    // hugetlb_reserve_pages fails (-ENOMEM) for what no pool can hold.
    let Some(len) = size.checked_next_multiple_of(page) else {
        return Err(Errno::ENOMEM);
    };
    let Ok(map_len) = usize::try_from(len) else {
        return Err(Errno::ENOMEM);
    };
    for mount in mounts() {
        let Some(dev) = mount_dev(&mount, page) else {
            continue;
        };
        let Ok((path, file)) =
            arena::create_huge_segment(dir_under(&mount, a.id()), a.id(), serial, len)
        else {
            continue;
        };
        let placed = file.stat().ok().filter(|m| m.dev == dev && m.is_file());
        let reserved = noreserve || arena::map::reserve_huge(&file, map_len).is_ok();
        match placed {
            Some(m) if reserved => {
                let h = Huge {
                    shift,
                    noreserve,
                    dev,
                    ino: m.ino,
                };
                return Ok((h, path));
            }
            _ => {
                let _ = fs::unlink(&path);
            }
        }
    }
    // hugetlb_reserve_pages: "-ENOMEM" (no mount to take pages from, or
    // none free).
    Err(Errno::ENOMEM)
}

/// Opens the file of `h`'s segment `serial` with `flags` (O_NOFOLLOW
/// added), found on this process's hugetlbfs mounts of its device and
/// checked to be that inode. EACCES when it is there but refuses the
/// caller; EIDRM when it cannot be found.
pub(crate) fn open(a: &Arena, serial: u64, h: &Huge, flags: i32) -> Result<(Fd, PathBuf), Errno> {
    let mut err = Errno::EIDRM;
    for mount in mounts() {
        if mount_dev(&mount, h.page()) != Some(h.dev) {
            continue;
        }
        let path = dir_under(&mount, a.id()).join(format!("shm.{serial}"));
        match fs::open(&path, flags | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0) {
            Ok(f) => {
                if f.stat()
                    .is_ok_and(|m| m.is_file() && m.dev == h.dev && m.ino == h.ino)
                {
                    return Ok((f, path));
                }
            }
            Err(Errno::EACCES | Errno::EPERM) => err = Errno::EACCES,
            // No descriptor to spare: shmat's ENOMEM (shm/mod.rs).
            Err(Errno(libc::EMFILE | libc::ENFILE)) => err = Errno::ENOMEM,
            Err(_) => {}
        }
    }
    Err(err)
}

/// Removes the file of `h`'s segment `serial` (its pages go back to the
/// pool with the last mapping); emptied instead where its sticky directory
/// refuses this caller the unlink (`file.rs`).
pub(crate) fn unlink(a: &Arena, serial: u64, h: &Huge) {
    if let Ok((_, path)) = open(a, serial, h, libc::O_PATH) {
        let id = super::file::FileId {
            dev: h.dev,
            ino: h.ino,
        };
        super::file::remove(&path, Some(id));
    }
}

/// Bytes of huge pages `h`'s segment `serial` holds (its file's blocks).
pub(crate) fn resident_bytes(a: &Arena, serial: u64, h: &Huge) -> u64 {
    open(a, serial, h, libc::O_PATH)
        .and_then(|(f, _)| f.stat())
        .map_or(0, |m| m.blocks.saturating_mul(512))
}

/// Removes the directories of the arena `id` (owned by `owner`) on every
/// hugetlbfs mount, with their segment files (`ipcns ns remove`).
pub(crate) fn remove_dirs(id: &Stat, owner: u32) {
    for d in dirs(id) {
        arena::remove_segment_dir(&d, owner);
    }
}

/// The directories the arena `id`'s huge page segments would have, one
/// per hugetlbfs mount found now (they may not exist).
pub(crate) fn dirs(id: &Stat) -> Vec<PathBuf> {
    mounts().iter().map(|m| dir_under(m, id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape(r"/mnt/a\040b"), PathBuf::from("/mnt/a b"));
        assert_eq!(unescape(r"/x\134y"), PathBuf::from(r"/x\y"));
        assert_eq!(unescape(r"/trail\04"), PathBuf::from(r"/trail\04"));
        assert_eq!(unescape(r"/\999"), PathBuf::from(r"/\999"));
    }

    #[test]
    fn packs_and_checks_records() {
        let h = Huge {
            shift: 21,
            noreserve: true,
            dev: (0, 57),
            ino: 12345,
        };
        let w = h.pack();
        assert_eq!(Huge::unpack(w[0], w[1]), Ok(Some(h)));
        assert_eq!(Huge::unpack(0, 0), Ok(None));
        // Hostile words: a shift out of range, stray bits, no inode.
        for (w0, w1) in [(40u64, 1u64), (21 | 0x200, 1), (21, 0), (5, 9)] {
            assert_eq!(Huge::unpack(w0, w1), Err(Errno::EIDRM));
        }
    }
}
