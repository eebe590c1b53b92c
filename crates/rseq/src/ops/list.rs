//! Per-cpu lists of block indexes: Treiber stacks whose elements are the
//! blocks of a region ([`Blocks`]), linked through each free block's first
//! 4 bytes.
//!
//! # Encoding
//!
//! A list head is one 8-byte slot field: the first element's index + 1 in its
//! low 32 bits (0: empty, so zeroed memory is a set of empty lists) and a pop
//! count in its high 32 bits (against ABA in the fallback). A free block's
//! first 4 bytes hold the next element's index + 1, with the same meaning.
//! Element `i` is the block at `base + i * size`: 32-bit indexes reach
//! `u32::MAX` blocks, so a region of 4 GiB or more (64 GiB of 32-byte
//! blocks) works.
//!
//! # Checks
//!
//! A head or link is memory that another process may have scribbled on.
//! Nothing read from a list is dereferenced before it is checked: the pop
//! section compares the head's index with the number of blocks *before* it
//! reads the link, and reports an index out of range as [`BadIndex`] without
//! storing anything. The link it then stores in the head is checked by the
//! next pop. A push checks its own argument.
//!
//! # Safety
//!
//! As the other operations (see the parent module): the slot descriptor
//! promises the heads; the [`Blocks`] descriptor promises the region.

#![allow(unsafe_code)]

use super::{Index, Outcome, Slots, arch, fallback, index_ptr, outcome};
use core::fmt;

/// `len` blocks of `size` bytes from `base`: the elements a list may hold.
/// Copyable; holds no lifetime, so the operations that use it are `unsafe`.
///
/// # Layout
///
/// `base` at 0, `size` at 8, `len` at 16: the pop section reads the fields
/// at these offsets.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct Blocks {
    base: *mut u8,
    size: usize,
    len: u32,
}

pub(super) const OFF_BASE: usize = core::mem::offset_of!(Blocks, base);
pub(super) const OFF_SIZE: usize = core::mem::offset_of!(Blocks, size);
pub(super) const OFF_LEN: usize = core::mem::offset_of!(Blocks, len);

const _: () = {
    assert!(OFF_BASE == 0);
    assert!(OFF_SIZE == 8);
    assert!(OFF_LEN == 16);
    assert!(core::mem::size_of::<Blocks>() == 24);
};

// SAFETY: a descriptor only; every use of the memory it names is an unsafe
// operation whose contract covers concurrent use from any thread.
unsafe impl Send for Blocks {}
// SAFETY: as above.
unsafe impl Sync for Blocks {}

impl Blocks {
    /// Describes `len` blocks of `size` bytes starting at `base`. `size` is
    /// any non-zero multiple of 4 (the link is a 4-byte word at the start of
    /// each block); `len` is a `u32`, so every index + 1 fits the 32-bit
    /// encoding.
    ///
    /// # Panics
    ///
    /// If `size` is 0 or not a multiple of 4, `base` is not 4-aligned, or
    /// `len * size` exceeds `isize::MAX`.
    ///
    /// # Safety
    ///
    /// For as long as list operations use the result, `base .. base + len *
    /// size` must stay mapped, readable and writable, and the first 4 bytes
    /// of a block that is on a list must be written only by these
    /// operations.
    pub unsafe fn new(base: *mut u8, size: usize, len: u32) -> Blocks {
        assert!(
            size != 0 && size.is_multiple_of(4),
            "block size {size} is not a non-zero multiple of 4"
        );
        assert!(
            (base as usize).is_multiple_of(4),
            "blocks must be 4-aligned"
        );
        assert!(
            (len as usize)
                .checked_mul(size)
                .is_some_and(|b| b <= isize::MAX as usize),
            "{len} blocks of {size} bytes do not fit the address space"
        );
        Blocks { base, size, len }
    }

    /// Number of blocks: valid indexes are `0 .. len`.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True if there are no blocks (every list must then stay empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes per block.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Address of block `i` (not dereferenced), or [`BadIndex`] if `i` is
    /// not below [`len`](Self::len).
    pub fn block(&self, i: u32) -> Result<*mut u8, BadIndex> {
        if i < self.len {
            // In range: `i * size < len * size <= isize::MAX` (checked in
            // `new`), so neither the product nor the address wraps.
            Ok(self.base.wrapping_add(i as usize * self.size))
        } else {
            Err(BadIndex(i))
        }
    }
}

/// An index that is not a free block: not below the number of blocks (from a
/// push's argument or a list's head or link), or, from
/// [`FreeList::take_all`](crate::FreeList::take_all), met twice on the lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadIndex(pub u32);

impl fmt::Display for BadIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "block index {} is out of range or on the free lists twice",
            self.0
        )
    }
}

impl std::error::Error for BadIndex {}

/// Per-cpu list push: block `elem` of `blocks` onto the list whose 8-byte
/// head is at `slot[off]` (encoding in the module doc).
///
/// The section stores the old head into the block's link, then commits the
/// new head; the link store may be redone after an abort, which is harmless
/// as the block is the caller's until the commit.
///
/// # Errors
///
/// [`BadIndex`] if `elem` is not below `blocks.len()`; nothing is written.
///
/// # Safety
///
/// As [`add`](super::add) for the head; `blocks` satisfies the contract of
/// [`Blocks::new`]; the block is not on any list (the caller owns it).
#[inline(always)]
pub unsafe fn list_push(
    s: &Slots,
    index: Index,
    off: usize,
    blocks: &Blocks,
    elem: u32,
) -> Result<Outcome, BadIndex> {
    let link = blocks.block(elem)?;
    // `elem < len <= u32::MAX`: no overflow.
    let enc = elem + 1;
    if let Some((area, idx)) = index_ptr(index) {
        // SAFETY: as in `add`; `link` is the first word of a block in the
        // region (checked above), which the caller owns.
        let (st, slot) = unsafe {
            arch::list_push(
                area,
                idx,
                s.len,
                s.base.wrapping_add(off),
                s.stride,
                link,
                enc,
            )
        };
        if st != arch::NO_INDEX {
            return Ok(outcome(st, slot));
        }
    }
    let (slot, p) = s.fallback_slot(off);
    // SAFETY: as in `add`; the block is checked and the caller's.
    Ok(outcome(unsafe { fallback::list_push(p, link, enc) }, slot))
}

/// Per-cpu list pop from the list at `slot[off]` (see [`list_push`]):
/// `Success` carries the block's index; `Miss` means the list was empty.
///
/// # Errors
///
/// [`BadIndex`] if the head holds an index that is not below
/// `blocks.len()` (a corrupted list); nothing was read through it and
/// nothing was stored.
///
/// # Safety
///
/// As [`list_push`]: the heads and `blocks` per their contracts.
#[inline(always)]
pub unsafe fn list_pop(
    s: &Slots,
    index: Index,
    off: usize,
    blocks: &Blocks,
) -> Result<Outcome<u32>, BadIndex> {
    let (st, slot, enc) = match index_ptr(index) {
        // SAFETY: as in `add`; the section checks the index against
        // `blocks` before reading the link.
        Some((area, idx)) => unsafe {
            arch::list_pop(area, idx, s.len, s.base.wrapping_add(off), s.stride, blocks)
        },
        None => (arch::NO_INDEX, 0, 0),
    };
    let (st, slot, enc) = if st == arch::NO_INDEX {
        let (slot, p) = s.fallback_slot(off);
        // SAFETY: as in `add`; the index is checked before the link is read.
        let (st, enc) = unsafe { fallback::list_pop(p, blocks) };
        (st, slot, enc)
    } else {
        (st, slot, enc)
    };
    match st {
        arch::SUCCESS => Ok(Outcome::Success {
            slot,
            value: enc - 1,
        }),
        // A miss with a non-zero head: its index was out of range.
        arch::MISS if enc != 0 => Err(BadIndex(enc - 1)),
        arch::MISS => Ok(Outcome::Miss { slot }),
        _ => Ok(Outcome::Abort),
    }
}
