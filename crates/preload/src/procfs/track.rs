//! The descriptors open for writing on an emulated sysctl, so that a
//! `write(2)` on one is applied as the kernel applies it when it happens
//! (`proc_dointvec`). Indexed by descriptor number (below [`MAX_FD`]); each
//! entry packs the memfd's inode number (to tell a reused number from the
//! descriptor we made: `close` is not interposed) and the sysctl's index.
//! Lock-free: one atomic word per descriptor.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Descriptors at or above this number are not tracked (open for writing
/// on a sysctl there fails with EMFILE rather than lose the writes).
pub const MAX_FD: usize = 1024;

static SLOTS: [AtomicU64; MAX_FD] = [const { AtomicU64::new(0) }; MAX_FD];
/// How many entries were ever made: 0 means `write` has nothing to check.
static ANY: AtomicU32 = AtomicU32::new(0);

/// A tracked descriptor: the memfd's inode, the sysctl's index, and
/// whether a write through the exported `write` applied text already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub ino: u64,
    pub sysctl: usize,
    pub applied: bool,
}

const APPLIED: u64 = 0x80;

fn pack(e: Entry) -> u64 {
    (e.ino << 8) | if e.applied { APPLIED } else { 0 } | (e.sysctl as u64 + 1)
}

fn unpack(w: u64) -> Option<Entry> {
    (w != 0).then(|| Entry {
        ino: w >> 8,
        sysctl: ((w & 0x7f).saturating_sub(1)) as usize,
        applied: w & APPLIED != 0,
    })
}

/// Whether any descriptor was ever tracked (the cheap test every `write`
/// makes first).
#[inline(always)]
pub fn any() -> bool {
    ANY.load(Relaxed) != 0
}

/// Tracks `fd`; false if its number is too high.
pub fn track(fd: i32, e: Entry) -> bool {
    let Some(s) = usize::try_from(fd).ok().and_then(|i| SLOTS.get(i)) else {
        return false;
    };
    if e.ino >= 1 << 56 || e.sysctl >= 127 {
        return false;
    }
    s.store(pack(e), Relaxed);
    ANY.store(1, Relaxed);
    true
}

/// The entry of `fd`, if tracked.
pub fn get(fd: i32) -> Option<Entry> {
    let s = SLOTS.get(usize::try_from(fd).ok()?)?;
    unpack(s.load(Relaxed))
}

/// `fd` is no longer (or never was) one of ours.
pub fn forget(fd: i32) {
    if let Some(s) = usize::try_from(fd).ok().and_then(|i| SLOTS.get(i)) {
        s.store(0, Relaxed);
    }
}

/// Every descriptor on the memfd `ino` (one open file description, or its
/// duplicates) has had text applied.
pub fn mark_applied(ino: u64) {
    for s in &SLOTS {
        let w = s.load(Relaxed);
        if unpack(w).is_some_and(|e| e.ino == ino) {
            s.store(w | APPLIED, Relaxed);
        }
    }
}

/// The tracked descriptors.
pub fn all() -> impl Iterator<Item = (i32, Entry)> {
    SLOTS
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i as i32, unpack(s.load(Relaxed))?)))
}

/// `new` is now a duplicate of `old` (dup, dup2, dup3, F_DUPFD).
pub fn copy(old: i32, new: i32) {
    match get(old) {
        Some(e) => {
            if !track(new, e) {
                forget(new);
            }
        }
        None => forget(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trip() {
        let e = Entry {
            ino: 123456,
            sysctl: 4,
            applied: false,
        };
        assert!(track(1000, e));
        assert_eq!(get(1000), Some(e));
        copy(1000, 1001);
        assert_eq!(get(1001), Some(e));
        mark_applied(123456);
        assert_eq!(get(1001), Some(Entry { applied: true, ..e }));
        assert!(all().any(|(fd, x)| fd == 1000 && x.applied));
        forget(1000);
        assert_eq!(get(1000), None);
        assert!(!track(5000, e));
        copy(1000, 1001);
        assert_eq!(get(1001), None);
    }
}
