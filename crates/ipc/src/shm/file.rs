//! A normal segment's file, `<arena>.d/shm.<serial>`: which file it is
//! (its device and inode, recorded at shmget and checked at every shmat)
//! and how it goes when the segment is destroyed.
//!
//! # Which file
//! The segment directory of a shared namespace is writable by every
//! participant (and sticky, arena/file.rs); the record names the file by
//! its serial, which is a path anyone there can put a file under once the
//! name is free. So shmget records the file's device and inode in the
//! segment's record, and shmat maps only a regular file with that device
//! and inode: EIDRM otherwise, the answer for a segment ipcns cannot map.
//!
//! The two words are `head.spare` of the `ShmSlot` (object.rs), which
//! layout version 3 left zero and no build before this one wrote: the
//! device's major (12 bits) and minor (20 bits, Linux's `MINORBITS`) in
//! the low half of the first, the serial's low 32 bits in its high half;
//! the inode in the second. A record whose words are zero, or name another
//! serial (a segment made in this slot by an earlier build, which left a
//! removed segment's words there), has no file recorded: its file is
//! mapped as before, unchecked. An old build reading a record of this one
//! ignores the words. So the layout version stays 3.
//!
//! # Removal
//! The destroyer unlinks the file. In a sticky directory that fails
//! (EPERM) for a participant that owns neither the file nor the
//! directory, removing another user's segment (IPC_RMID, or a reaped
//! orphan under shm_rmid_forced): it then empties the file instead
//! (`ftruncate` to 0 through a descriptor opened without following a
//! link, on the recorded inode only), so its pages go back to the file
//! system, and the empty file stays under its name until `ipcns ns
//! remove`. Serials are never reused, so the name is no one's.
//!
//! # Resident pages
//! The pages reserved at shmget are the file's from then on, but the
//! kernel counts a segment's pages as they are touched (`shm_rss`):
//! [`resident_bytes`] counts those only.
//!
//! Lock state: the callers hold the segment's registry and object locks
//! (shmget, release); shmat holds none.

use crate::object::ShmSlot;
use crate::sys::{Stat, fs};
use core::sync::atomic::Ordering::Relaxed;
use std::path::Path;

/// A segment file's device and inode, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    pub dev: (u32, u32),
    pub ino: u64,
}

/// Bits of a device's major and minor number (Linux's `dev_t` inside the
/// kernel: `MINORBITS` 20, the major above it).
const MAJOR_MAX: u32 = 0xfff;
const MINOR_MAX: u32 = 0xf_ffff;

impl FileId {
    /// The file `m` describes, if its device fits the record (every Linux
    /// device does).
    pub fn of_stat(m: &Stat) -> Option<FileId> {
        (m.dev.0 <= MAJOR_MAX && m.dev.1 <= MINOR_MAX && m.ino != 0).then_some(FileId {
            dev: m.dev,
            ino: m.ino,
        })
    }

    /// The record's two words for the file of segment `serial`.
    fn pack(&self, serial: u64) -> [u64; 2] {
        let w = (serial & 0xffff_ffff) << 32
            | u64::from(self.dev.0 & MAJOR_MAX) << 20
            | u64::from(self.dev.1 & MINOR_MAX);
        [w, self.ino]
    }

    /// [`FileId::pack`] read back: the file recorded for segment
    /// `serial`, or None when none is (zeros, or another serial's words).
    fn unpack(w: [u64; 2], serial: u64) -> Option<FileId> {
        if w[1] == 0 || w[0] >> 32 != serial & 0xffff_ffff {
            return None;
        }
        Some(FileId {
            dev: (((w[0] >> 20) as u32) & MAJOR_MAX, (w[0] as u32) & MINOR_MAX),
            ino: w[1],
        })
    }

    /// Records `this` as the file of segment `serial` in `s` (None: no
    /// file recorded, zeros). Registry and object locks held (creation).
    pub fn store(this: Option<FileId>, serial: u64, s: &ShmSlot) {
        let w = this.map_or([0, 0], |f| f.pack(serial));
        s.head.spare[0].store(w[0], Relaxed);
        s.head.spare[1].store(w[1], Relaxed);
    }

    /// The file recorded for segment `serial` in `s`, if any.
    pub fn recorded(s: &ShmSlot, serial: u64) -> Option<FileId> {
        let w = [s.head.spare[0].load(Relaxed), s.head.spare[1].load(Relaxed)];
        FileId::unpack(w, serial)
    }

    /// Whether the open file `m` is this one.
    pub fn is(&self, m: &Stat) -> bool {
        m.dev == self.dev && m.ino == self.ino
    }
}

/// Removes the file of a destroyed segment at `path` (see the module
/// doc): unlinked, or, where the sticky directory refuses this caller,
/// emptied if it is the recorded regular file (`id`; any regular file
/// when none is recorded).
pub(crate) fn remove(path: &Path, id: Option<FileId>) {
    // unlink(2): "EPERM (Linux only) ... The directory containing pathname
    // has the sticky bit (S_ISVTX) set and the process's effective UID is
    // neither the UID of the file to be deleted nor that of the directory
    // containing it, and the process is not privileged".
    if fs::unlink(path) != Err(crate::errno::Errno::EPERM) {
        return;
    }
    let Ok(f) = fs::open(
        path,
        libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    ) else {
        return;
    };
    let ours = f
        .stat()
        .is_ok_and(|m| m.is_file() && id.is_none_or(|id| id.is(&m)));
    if ours {
        let _ = f.set_len(0);
    }
}

/// Bytes of the segment file at `path` that hold pages the kernel would
/// count in the segment's `shm_rss` (`shm_add_rss_swap`: the shmem
/// inode's `nrpages`): those touched, through a mapping or a write. The
/// pages `fallocate` reserved at shmget and nobody touched yet are not
/// (tmpfs keeps them !Uptodate, and SEEK_DATA skips them as holes, while
/// `st_blocks` counts them); so the data extents are summed, at most one
/// per page. Without a descriptor to read it with, its blocks.
pub(crate) fn resident_bytes(path: &Path) -> u64 {
    let blocks = || fs::lstat(path).map_or(0, |m| m.blocks.saturating_mul(512));
    let Ok(f) = fs::open(
        path,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        0,
    ) else {
        return blocks();
    };
    let Ok(m) = f.stat() else {
        return 0;
    };
    if !m.is_file() {
        return 0;
    }
    data_bytes(&f, 0, m.size)
}

/// The bytes of `[from, end)` of the file open on `f` that hold data
/// (SEEK_DATA and SEEK_HOLE, at most one turn per extent; every turn moves
/// forward). A file system that cannot say counts none.
pub(super) fn data_bytes(f: &crate::sys::Fd, from: u64, end: u64) -> u64 {
    let mut total = 0u64;
    let mut at = from;
    while at < end {
        let Some(data) = f.seek(at, libc::SEEK_DATA).filter(|&d| d < end) else {
            break;
        };
        let Some(hole) = f.seek(data, libc::SEEK_HOLE).filter(|&h| h > data) else {
            break;
        };
        total = total.saturating_add(hole.min(end) - data);
        at = hole;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_checks_records() {
        let f = FileId {
            dev: (0, 45),
            ino: 12345,
        };
        assert_eq!(FileId::unpack(f.pack(7), 7), Some(f));
        let g = FileId {
            dev: (MAJOR_MAX, MINOR_MAX),
            ino: u64::MAX,
        };
        assert_eq!(FileId::unpack(g.pack(1 << 40 | 3), 1 << 40 | 3), Some(g));
        // Zeros (an arena of an earlier build), another serial's words.
        assert_eq!(FileId::unpack([0, 0], 7), None);
        assert_eq!(FileId::unpack(f.pack(6), 7), None);
        assert_eq!(FileId::unpack([f.pack(7)[0], 0], 7), None);
    }
}
