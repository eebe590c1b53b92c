//! The attachments this process image mapped, as it mapped them: `shmdt`
//! unmaps the length this table holds, never one read from the arena,
//! which a faulty or hostile participant could set to make `shmdt` unmap
//! the program's own memory. Process-local and lock-free (a fork may copy
//! it at any instruction; the child inherits the mappings with it; an exec
//! starts empty, as its attachments are gone): a fixed table of (address,
//! length) pairs, each claimed by compare-and-swap. When it is full, the
//! arena's length is used, bounded as before (`attach.rs`).
//!
//! A bitmap says which entries may be in use, so that a shmat looks at
//! those only for the entries its new mapping covers (64 words, not 4096
//! entries: the whole table's scan was a third of a shmat + shmdt pair). A
//! bit is set before its entry is claimed and cleared before it is given
//! back, so an entry in use always has its bit (a bit may outlive its
//! entry, or be set for a claim that failed: the entry is then looked at
//! and found empty or another's, which has its own bit).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU64, AtomicUsize};

/// Attachments kept per process.
const N: usize = 4096;
/// `addr` of an entry being written.
const BUSY: usize = 1;

static ADDR: [AtomicUsize; N] = [const { AtomicUsize::new(0) }; N];
/// The length, with [`DISTURBED`].
static LEN: [AtomicUsize; N] = [const { AtomicUsize::new(0) }; N];
/// What the attachment maps ([`Source`]): the file's inode, low 31 bits.
static INO: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
/// ... and the offset in it of the segment's first page.
static BASE: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
/// `LEN`'s bit: the program unmapped, replaced or moved part of the
/// attachment with calls of its own (`munmap`, `mmap` with MAP_FIXED,
/// `mremap`): shmdt unmaps only the pieces still mapping the segment.
const DISTURBED: usize = 1 << (usize::BITS - 1);
/// Bit `k % 64` of word `k / 64`: entry `k` may be in use.
static USED: [AtomicU64; N / 64] = [const { AtomicU64::new(0) }; N / 64];
/// Set once an attachment found the table full.
static FULL: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Where `addr`'s entry is looked for first.
fn home(addr: usize) -> usize {
    (addr >> 12).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52
}

/// The file an attachment maps and where in it the segment starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The file's inode, low 31 bits (as `/proc/self/maps` shows it, masked).
    pub ino31: u64,
    /// The offset of the segment's first page in the file.
    pub base: u64,
}

/// An entry taken out of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    pub len: usize,
    pub source: Source,
    /// Part of it was unmapped, replaced or moved by the program.
    pub disturbed: bool,
}

/// Records that `[addr, addr + len)` was mapped by shmat from `source`.
pub fn record(addr: usize, len: usize, source: Source) {
    if addr <= BUSY {
        return;
    }
    let h = home(addr);
    for i in 0..N {
        let k = (h + i) % N;
        if ADDR[k].load(Relaxed) != 0 {
            continue;
        }
        USED[k / 64].fetch_or(1 << (k % 64), Relaxed);
        if ADDR[k].compare_exchange(0, BUSY, Acquire, Relaxed).is_ok() {
            LEN[k].store(len & !DISTURBED, Relaxed);
            INO[k].store(source.ino31, Relaxed);
            BASE[k].store(source.base, Relaxed);
            // Release: a reader that sees the address sees the length.
            ADDR[k].store(addr, Release);
            return;
        }
    }
    FULL.store(true, Relaxed);
}

/// Takes the entry of the attachment at `addr`, if this process image
/// mapped it (`None` if not, or unknown: see [`full`]).
pub fn take(addr: usize) -> Option<Taken> {
    if addr <= BUSY {
        return None;
    }
    let h = home(addr);
    for i in 0..N {
        let k = (h + i) % N;
        if ADDR[k].load(Acquire) == addr {
            let len = LEN[k].load(Relaxed);
            let source = Source {
                ino31: INO[k].load(Relaxed),
                base: BASE[k].load(Relaxed),
            };
            USED[k / 64].fetch_and(!(1 << (k % 64)), Relaxed);
            if ADDR[k].compare_exchange(addr, 0, Release, Relaxed).is_ok() {
                return Some(Taken {
                    len: len & !DISTURBED,
                    source,
                    disturbed: len & DISTURBED != 0,
                });
            }
        }
    }
    None
}

/// Marks the attachments that `[start, end)` overlaps without holding
/// them whole as disturbed; returns those it holds whole (address and
/// length), which the caller's call unmapped or replaced entirely.
pub fn overlapped(start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut whole = Vec::new();
    for (k, a, len) in in_use() {
        if a >= end || a.saturating_add(len) <= start {
            continue;
        }
        if a >= start && a.saturating_add(len) <= end {
            whole.push((a, len));
        } else {
            LEN[k].fetch_or(DISTURBED, Relaxed);
        }
    }
    whole
}

/// Whether any attachment is in the table (a quick look for the memory
/// calls' wrappers).
pub fn any() -> bool {
    USED.iter().any(|w| w.load(Relaxed) != 0)
}

/// The entries whose bits are set: `(k, address, length)` of each that
/// holds an attachment now (an entry may change as it is read: the callers
/// check what they act on).
fn in_use() -> impl Iterator<Item = (usize, usize, usize)> {
    USED.iter().enumerate().flat_map(|(w, word)| {
        let mut bits = word.load(Relaxed);
        core::iter::from_fn(move || {
            while bits != 0 {
                let k = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let a = ADDR[k].load(Acquire);
                if a > BUSY {
                    return Some((k, a, LEN[k].load(Relaxed) & !DISTURBED));
                }
            }
            None
        })
    })
}

/// The attachment this image mapped that holds `addr`: its address and
/// length.
pub fn containing(addr: usize) -> Option<(usize, usize)> {
    in_use()
        .find(|&(_, a, len)| a <= addr && addr - a < len)
        .map(|(_, a, len)| (a, len))
}

/// Forgets the attachments lying inside `[start, end)` (a SHM_REMAP
/// mapping replaced them).
pub fn forget_inside(start: usize, end: usize) {
    for (k, a, len) in in_use() {
        if a >= start && a.saturating_add(len) <= end {
            USED[k / 64].fetch_and(!(1 << (k % 64)), Relaxed);
            let _ = ADDR[k].compare_exchange(a, 0, Release, Relaxed);
        }
    }
}

/// Whether an attachment was ever left out of the table (full).
pub fn full() -> bool {
    FULL.load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_taken_and_forgotten() {
        let base = 0x7f00_dead_0000usize;
        let src = Source { ino31: 7, base: 0 };
        record(base, 8192, src);
        record(base + 0x10000, 4096, src);
        assert_eq!(take(base).map(|t| t.len), Some(8192));
        assert_eq!(take(base), None);
        forget_inside(base, base + 0x20000);
        assert_eq!(take(base + 0x10000), None);
        assert_eq!(take(0), None);
        // Disturbed by a call on part of it, taken whole by one on all.
        let c = base + 0x200_0000;
        record(c, 4 * 4096, src);
        record(c + 0x10000, 4096, src);
        assert_eq!(overlapped(c + 4096, c + 2 * 4096), vec![]);
        assert_eq!(
            overlapped(c + 0xf000, c + 0x12000),
            vec![(c + 0x10000, 4096)]
        );
        let t = take(c).expect("recorded");
        assert_eq!((t.len, t.disturbed, t.source), (4 * 4096, true, src));
        assert!(!take(c + 0x10000).expect("recorded").disturbed);
        // Entries found through their bits wherever they hash.
        let many: Vec<usize> = (0..100).map(|i| base + 0x100_0000 + i * 0x3000).collect();
        for &a in &many {
            record(a, 4096, src);
        }
        forget_inside(base + 0x100_0000, base + 0x100_0000 + 50 * 0x3000);
        for (i, &a) in many.iter().enumerate() {
            assert_eq!(
                take(a).map(|t| t.len),
                if i < 50 { None } else { Some(4096) },
                "entry {i}"
            );
        }
    }
}
