//! The mapping of the arena file and typed views into it.
//!
//! # Safety
//! The arena is a `MAP_SHARED` mapping that other processes write at any
//! time. Views are only ever handed out as shared references to types made
//! entirely of atomics and `UnsafeCell`s (the [`Shared`] marker), so
//! concurrent writes by others are never a data race in Rust's sense, and
//! every bit pattern of such a type is valid. Every offset is checked
//! against the mapped length and the type's alignment before a reference is
//! formed, so a corrupted arena yields errors, never out-of-bounds access.
//! The mapping lives as long as the `Mapping`; references borrow it.
#![allow(unsafe_code)]

use crate::errno::Errno;
use crate::sys::{Fd, mem};

/// Types that may live in the arena.
///
/// # Safety
/// Implementors are `#[repr(C)]`, contain only atomics, `UnsafeCell`s
/// holding plain data, and arrays of those, accept every bit pattern, and
/// have no `Drop`.
pub(crate) unsafe trait Shared: Sync {}

/// Declares arena types [`Shared`]. Each use names types that satisfy the
/// trait's contract: `#[repr(C)]`, atomics, `Lock`s and arrays of them
/// only, no `Drop` (the layout assertions beside each type pin it).
macro_rules! shared_types {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: the caller of shared_types! vouches for the contract
            // of `Shared` (see arena/map.rs).
            #[allow(unsafe_code)]
            unsafe impl $crate::arena::map::Shared for $t {}
        )*
    };
}
pub(crate) use shared_types;

/// A `MAP_SHARED` read-write mapping of a whole file.
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access goes through
// `Shared` types, which are Sync.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file`, which must be at least that long.
    pub fn new(file: &Fd, len: usize) -> Result<Mapping, Errno> {
        // SAFETY: a fresh mapping chosen by the kernel; no existing memory
        // is affected. The file is open for reading and writing.
        let p = unsafe {
            mem::mmap(
                0,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file,
            )
        }?;
        Ok(Mapping {
            base: p as *mut u8,
            len,
        })
    }

    /// A shared reference to the `T` at `off`, if it lies inside the
    /// mapping and is aligned.
    #[inline]
    pub fn view<T: Shared>(&self, off: u64) -> Option<&T> {
        let off = usize::try_from(off).ok()?;
        let end = off.checked_add(core::mem::size_of::<T>())?;
        if end > self.len || off % core::mem::align_of::<T>() != 0 {
            return None;
        }
        // SAFETY: in bounds and aligned (checked above); `T: Shared` accepts
        // any bits and tolerates concurrent writers; the reference borrows
        // `self`, so the mapping outlives it.
        Some(unsafe { &*self.base.add(off).cast::<T>() })
    }

    /// `n` consecutive `T`s at `off`.
    #[inline]
    pub fn view_slice<T: Shared>(&self, off: u64, n: usize) -> Option<&[T]> {
        let off = usize::try_from(off).ok()?;
        let bytes = n.checked_mul(core::mem::size_of::<T>())?;
        let end = off.checked_add(bytes)?;
        if end > self.len || off % core::mem::align_of::<T>() != 0 {
            return None;
        }
        // SAFETY: as in `view`, for `n` elements.
        Some(unsafe { core::slice::from_raw_parts(self.base.add(off).cast::<T>(), n) })
    }

    /// The address of `[off, off + len)`, if it lies inside the mapping,
    /// for code that hands raw shared memory to the rseq operations (the
    /// heap's caches). Nothing is dereferenced here; the pointer is valid
    /// as long as the mapping.
    pub fn ptr_at(&self, off: u64, len: u64) -> Option<*mut u8> {
        let off = usize::try_from(off).ok()?;
        let end = off.checked_add(usize::try_from(len).ok()?)?;
        (end <= self.len).then(|| self.base.wrapping_add(off))
    }

    /// The page-aligned span covering `[off, off + len)` inside the
    /// mapping, as an address and a length.
    fn span(&self, off: u64, len: u64) -> Result<(usize, usize), Errno> {
        let start = usize::try_from(off).map_err(|_| Errno::EINVAL)? & !(PAGE - 1);
        let end = usize::try_from(off.checked_add(len).ok_or(Errno::EINVAL)?)
            .map_err(|_| Errno::EINVAL)?
            .checked_next_multiple_of(PAGE)
            .ok_or(Errno::EINVAL)?
            .min(self.len);
        if start >= end {
            return Ok((self.base as usize, 0));
        }
        Ok((self.base as usize + start, end - start))
    }

    /// Reserves the file's pages under `[off, off + len)` through the
    /// mapping (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14), so that
    /// touching them later cannot fault: EFAULT (ENOSPC's stand-in) when
    /// the file system is full, EINVAL on a kernel without it.
    pub fn reserve(&self, off: u64, len: u64) -> Result<(), Errno> {
        let (addr, n) = self.span(off, len)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: a range of our own shared mapping (clamped to it); the
        // pages keep their contents.
        unsafe { mem::madvise(addr, n, libc::MADV_POPULATE_WRITE) }
    }

    /// Gives the pages of `[off, off + len)` back to the file system
    /// through the mapping (`madvise(MADV_REMOVE)`, a hole punched in the
    /// file): they read as zeros afterwards.
    pub fn punch(&self, off: u64, len: u64) -> Result<(), Errno> {
        let (addr, n) = self.span(off, len)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: a range of our own shared mapping that the heap gave
        // back (nothing live is in it); it reads as zeros afterwards.
        unsafe { mem::madvise(addr, n, libc::MADV_REMOVE) }
    }
}

/// The page size the arena is laid out in.
const PAGE: usize = 4096;

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `new`; no reference
        // into it survives `self` (they borrow it).
        let _ = unsafe { mem::munmap(self.base as usize, self.len) };
    }
}

// SAFETY: atomics accept every bit pattern and are Sync.
unsafe impl Shared for core::sync::atomic::AtomicU8 {}
// SAFETY: as above.
unsafe impl Shared for core::sync::atomic::AtomicU16 {}
// SAFETY: as above.
unsafe impl Shared for core::sync::atomic::AtomicU32 {}
// SAFETY: as above.
unsafe impl Shared for core::sync::atomic::AtomicI32 {}
// SAFETY: as above.
unsafe impl Shared for core::sync::atomic::AtomicU64 {}
// SAFETY: as above.
unsafe impl Shared for core::sync::atomic::AtomicI64 {}

/// Maps `len` bytes of `file` MAP_SHARED at `addr` (0: anywhere; else
/// exactly there, replacing what is mapped only if `replace`), for shmat.
/// EEXIST when `addr` is taken and `replace` is false.
pub fn map_segment(
    file: &Fd,
    len: usize,
    addr: usize,
    prot: i32,
    replace: bool,
) -> Result<usize, Errno> {
    let flags = libc::MAP_SHARED
        | match (addr, replace) {
            (0, _) => 0,
            (_, true) => libc::MAP_FIXED,
            (_, false) => libc::MAP_FIXED_NOREPLACE,
        };
    // SAFETY: a new mapping of our own descriptor. At a fixed address it
    // replaces existing pages only when the caller asked for SHM_REMAP, as
    // shmat(2) does; those pages are the caller's to give up.
    let p = unsafe { mem::mmap(addr, len, prot, flags, file) }?;
    if addr != 0 && p != addr {
        // An old kernel ignoring MAP_FIXED_NOREPLACE: not where asked.
        // SAFETY: unmaps the mapping just made.
        let _ = unsafe { mem::munmap(p, len) };
        return Err(Errno::EEXIST);
    }
    Ok(p)
}

/// Reserves the huge pages of `len` bytes of the hugetlbfs file `file`
/// as a shared mapping does (hugetlbfs_file_mmap -> hugetlb_reserve_pages):
/// maps it and unmaps it at once. The reservation stays with the file's
/// inode (HugePages_Rsvd) until it is truncated or freed, so no later
/// fault of the file's pages can fail; ENOMEM when the pool cannot
/// reserve them.
pub fn reserve_huge(file: &Fd, len: usize) -> Result<(), Errno> {
    // SAFETY: a new mapping where the kernel chooses (no MAP_FIXED: nothing
    // of ours is replaced), never touched, unmapped right away.
    let p = unsafe {
        mem::mmap(
            0,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file,
        )
    }?;
    // SAFETY: unmaps exactly the mapping just made.
    let _ = unsafe { mem::munmap(p, len) };
    Ok(())
}

/// Unmaps an attachment made by [`map_segment`] (shmdt).
pub fn unmap_segment(addr: usize, len: usize) {
    // SAFETY: unmaps exactly an attachment this process made with
    // `map_segment` (shmdt found it in its own record); the caller gives
    // it up, as shmdt(2) does.
    let _ = unsafe { mem::munmap(addr, len) };
}
