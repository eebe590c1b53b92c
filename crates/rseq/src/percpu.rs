//! `PerCpu<T>`: one cache-line-aligned slot per possible cpu, on the heap or
//! in memory the caller maps (e.g. `MAP_SHARED` between processes).
//!
//! # Safety
//!
//! A `PerCpu` either owns a boxed slice of slots or borrows raw memory whose
//! validity the caller of [`PerCpu::from_raw`] promises. Slots are only
//! handed out as `&T`; mutation goes through `T`'s interior mutability or
//! through the per-cpu operations of [`ops`](crate::ops).

#![allow(unsafe_code)]

use crate::cpus::possible_cpus;
use crate::mode::current_cpu;
use crate::ops::Slots;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// One slot, padded to a cache line so that cpus never share a line.
///
/// # Layout
///
/// `T` at offset 0; size a multiple of 64; aligned to 64.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Slot<T>(pub T);

const _: () = assert!(core::mem::size_of::<Slot<u64>>() == 64);

/// One `T` per possible cpu (counted from `/sys/devices/system/cpu/possible`),
/// each in its own cache line.
pub struct PerCpu<T> {
    ptr: NonNull<Slot<T>>,
    len: usize,
    /// True when `ptr` came from `Box<[Slot<T>]>` and is freed on drop.
    owned: bool,
    _owns: PhantomData<T>,
}

// SAFETY: PerCpu<T> behaves like Box<[T]> (owned) or &[T] (borrowed): sending
// it sends the `T`s, sharing it shares `&T`.
unsafe impl<T: Send + Sync> Send for PerCpu<T> {}
// SAFETY: as above; only `&T` is handed out.
unsafe impl<T: Sync> Sync for PerCpu<T> {}

impl<T> PerCpu<T> {
    /// A heap array with one slot per possible cpu, slot `i` set to `init(i)`.
    pub fn new(init: impl FnMut(usize) -> T) -> PerCpu<T> {
        Self::with_len(possible_cpus(), init)
    }

    /// A heap array of `len` slots (at least the possible cpus, so that the
    /// per-cpu operations accept it).
    ///
    /// # Panics
    ///
    /// If `len` is below [`possible_cpus`].
    pub fn with_len(len: usize, mut init: impl FnMut(usize) -> T) -> PerCpu<T> {
        assert!(
            len >= possible_cpus(),
            "{len} slots for {} possible cpus",
            possible_cpus()
        );
        let b: Box<[Slot<T>]> = (0..len).map(|i| Slot(init(i))).collect();
        let ptr = NonNull::from(Box::leak(b)).cast::<Slot<T>>();
        PerCpu {
            ptr,
            len,
            owned: true,
            _owns: PhantomData,
        }
    }

    /// Views `len` slots at `ptr` (for instance in a `MAP_SHARED` mapping,
    /// sized with [`PerCpu::bytes`]). Nothing is freed on drop.
    ///
    /// # Panics
    ///
    /// If `len` is below [`possible_cpus`] or `ptr` is not aligned to 64.
    ///
    /// # Safety
    ///
    /// `ptr .. ptr + len` holds initialised `Slot<T>`s (all-zero bytes are
    /// fine for the atomics this crate uses) that stay mapped and are not
    /// moved while the result and anything derived from it live.
    pub unsafe fn from_raw(ptr: *mut Slot<T>, len: usize) -> PerCpu<T> {
        assert!(
            len >= possible_cpus(),
            "{len} slots for {} possible cpus",
            possible_cpus()
        );
        let ptr = NonNull::new(ptr).expect("null PerCpu memory");
        assert!(
            (ptr.as_ptr() as usize).is_multiple_of(64),
            "PerCpu memory must be 64-aligned"
        );
        PerCpu {
            ptr,
            len,
            owned: false,
            _owns: PhantomData,
        }
    }

    /// Bytes needed by `len` slots (for [`PerCpu::from_raw`]).
    pub const fn bytes(len: usize) -> usize {
        len * core::mem::size_of::<Slot<T>>()
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slot `i`, if it exists.
    pub fn get(&self, i: usize) -> Option<&T> {
        (i < self.len).then(|| {
            // SAFETY: i < len and the slots are initialised (constructors).
            unsafe { &(*self.ptr.as_ptr().add(i)).0 }
        })
    }

    /// Every slot, in cpu order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).filter_map(|i| self.get(i))
    }

    /// The slot of the cpu the thread runs on now (it may migrate at once:
    /// use this with atomics or as a hint; use [`ops`](crate::ops) for exact
    /// per-cpu updates).
    #[inline]
    pub fn current(&self) -> &T {
        let i = current_cpu() as usize % self.len;
        // SAFETY: i < len.
        unsafe { &(*self.ptr.as_ptr().add(i)).0 }
    }

    /// The slot descriptor for the per-cpu operations (field offsets are
    /// relative to a slot's start).
    pub fn slots(&self) -> Slots {
        // SAFETY: the slots are valid for as long as `self` lives; the
        // operations that use the descriptor are unsafe and restate that.
        unsafe {
            Slots::new(
                self.ptr.as_ptr().cast(),
                core::mem::size_of::<Slot<T>>(),
                self.len,
            )
        }
    }
}

impl<T> Drop for PerCpu<T> {
    fn drop(&mut self) {
        if self.owned {
            let slice = core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
            // SAFETY: owned slots came from Box<[Slot<T>]> of this length.
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for PerCpu<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn one_line_per_cpu() {
        let p = PerCpu::new(|i| AtomicU64::new(i as u64));
        assert_eq!(p.len(), possible_cpus());
        assert_eq!(p.slots().stride(), 64);
        for (i, v) in p.iter().enumerate() {
            assert_eq!(v.load(Ordering::Relaxed), i as u64);
        }
        assert!(p.get(p.len()).is_none());
        p.current().fetch_add(1, Ordering::Relaxed);
        let total: u64 = p.iter().map(|v| v.load(Ordering::Relaxed)).sum();
        let base: u64 = (0..p.len() as u64).sum();
        assert_eq!(total, base + 1);
    }
}
