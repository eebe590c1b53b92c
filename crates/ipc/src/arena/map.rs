//! The mapping of the arena file and typed views into it.
//!
//! # Runs
//! The arena file is large (4 GiB of heap by default, 9 GiB of slot tables
//! in `ipcmni_extend` mode) and mostly untouched; mapping all of it would
//! cost that much address space in every participant, which RLIMIT_AS may
//! not allow. So only what is in use is mapped: the file is cut into a few
//! runs (one in normal mode; in extend mode one per slot table, each with
//! the previous table's bitmaps, and one for the last bitmaps, the caches
//! and the heap), and each run is mapped from its start, at first a part
//! the arena chooses (the header, the tables, the heap up to a margin),
//! then further as offsets beyond it are needed (`mremap` without
//! MREMAP_MAYMOVE: it grows in place or not at all, so no reference into
//! the mapping ever moves). File offset `off` is always at `base + off`;
//! the file's whole length is left free after `base` when the first run is
//! placed (the middle of the largest free range of the address space;
//! nothing is reserved), so growth is likely possible. The runs are mapped
//! exactly there (MAP_FIXED_NOREPLACE), never where the kernel would put
//! them instead (right below another mapping: no room to grow), and one
//! thread of the process places at a time, so that threads opening arenas
//! at once do not choose the same range. An offset that
//! cannot be mapped (another mapping took the room, or RLIMIT_AS) is
//! ENOMEM at the call that needs it, never a fault. Growth is serialized
//! by a process-local lock; readers need one acquire load of the run's
//! end. Where runs cannot be placed, or would cover the whole file anyway,
//! the whole file is mapped at once, as before.
//!
//! # Safety
//! The arena is a `MAP_SHARED` mapping that other processes write at any
//! time. Views are only ever handed out as shared references to types made
//! entirely of atomics and `UnsafeCell`s (the [`Shared`] marker), so
//! concurrent writes by others are never a data race in Rust's sense, and
//! every bit pattern of such a type is valid. Every offset is checked
//! against the file's length and the type's alignment, and made mapped,
//! before a reference is formed, so a corrupted arena yields errors, never
//! out-of-bounds access. A run only grows, in place, while the `Mapping`
//! lives; references borrow it.
#![allow(unsafe_code)]

use crate::errno::Errno;
use crate::sys::{Fd, mem};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU64, AtomicUsize};

pub(crate) use crate::shared::{Shared, shared_types};

/// One contiguous part of the file, `[start, limit)`, mapped at
/// `base + start` up to `end` (which only grows, up to `limit`).
struct Run {
    start: usize,
    limit: usize,
    /// Mapped up to here. Written under the growth lock, after the
    /// mapping grew (Release: pairs with the Acquire of every reader, who
    /// then touches only what is mapped).
    end: AtomicUsize,
}

/// How the arena asks for a part of the file to be mapped: up to `limit`
/// (the next part's start, or the file's end), `initial` bytes of it at
/// first.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub limit: u64,
    pub initial: u64,
}

/// A `MAP_SHARED` read-write mapping of a file, made of runs (see the
/// module doc): file offset `off` is always at `base + off`, mapped or
/// not yet.
pub struct Mapping {
    base: usize,
    /// The file's length: no offset at or past it is ever mapped.
    size: usize,
    runs: Vec<Run>,
    /// The thread growing a run: `pid << 32 | tid`, 0 when none.
    grower: AtomicU64,
}

// SAFETY: the mapping is plain shared memory; all access goes through
// `Shared` types, which are Sync.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// Serializes the placement of runs among the process's threads (a
/// process-local spin word naming its holder, `lock/local.rs`): each
/// reads /proc/self/maps after the previous one mapped.
static PLACING: AtomicU64 = AtomicU64::new(0);
/// Addresses chosen for one placement before the whole file is mapped.
const PLACE_TRIES: usize = 3;

/// The page size the arena is laid out in.
const PAGE: usize = 4096;
/// Runs are placed and grown in steps of this (a huge page's worth of
/// address space, so that the kernel may use huge page table entries).
const ALIGN: usize = 2 << 20;
/// A run grows by what it has, at least this much (fewer mremaps).
const GROW_MIN: usize = 16 << 20;
/// The lowest address a placement considers (below are the executable of
/// a non-PIE program, MAP_32BIT mappings, and mmap_min_addr).
const LOW: usize = 1 << 32;

fn round_up(x: usize, to: usize) -> usize {
    x.checked_next_multiple_of(to)
        .unwrap_or(usize::MAX & !(to - 1))
}

impl Mapping {
    /// Maps `file` (`size` bytes) in the runs `specs` asks for, at an
    /// address with room for the whole file after it (module doc);
    /// the whole file at once where the runs would cover it anyway, or
    /// where runs cannot be placed. `specs` are in file order, the last
    /// ending at `size`.
    pub fn new(file: &Fd, size: usize, specs: &[RunSpec]) -> Result<Mapping, Errno> {
        let mut runs = Vec::with_capacity(specs.len());
        let mut start = 0usize;
        for s in specs {
            let limit = usize::try_from(s.limit)
                .map_err(|_| Errno::ENOMEM)?
                .min(size);
            let initial = usize::try_from(s.initial)
                .map_err(|_| Errno::ENOMEM)?
                .clamp(start, limit);
            runs.push(Run {
                start,
                limit,
                end: AtomicUsize::new(round_up(initial, PAGE).min(limit)),
            });
            start = limit;
        }
        if start != size || runs.is_empty() {
            return Err(Errno::EINVAL);
        }
        let whole = runs.iter().all(|r| r.end.load(Relaxed) == r.limit);
        if !whole && let Ok(base) = Mapping::place_runs(file, size, &runs) {
            return Ok(Mapping {
                base,
                size,
                runs,
                grower: AtomicU64::new(0),
            });
        }
        // The whole file, where the kernel chooses.
        // SAFETY: a fresh mapping chosen by the kernel; no existing memory
        // is affected. The file is open for reading and writing.
        let base = unsafe {
            mem::mmap(
                0,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file,
            )
        }?;
        for r in &runs {
            r.end.store(r.limit, Relaxed);
        }
        Ok(Mapping {
            base,
            size,
            runs,
            grower: AtomicU64::new(0),
        })
    }

    /// Maps the runs' initial parts at [`place`]'s address: each at the
    /// base plus its offset, exactly there (MAP_FIXED_NOREPLACE); only
    /// when no address fits, the first where the kernel puts it (that is
    /// the base). One thread of the process at a time ([`PLACING`]): two
    /// that read /proc/self/maps before either mapped chose the same
    /// address, and the second mapping, taken as a hint, went where the
    /// kernel puts one, right below another mapping, where it could never
    /// grow (every view past its initial part ENOMEM). An address taken
    /// meanwhile (by a mapping made without this lock) is chosen again, up
    /// to [`PLACE_TRIES`] times. Unmaps what it made if one cannot be
    /// placed.
    fn place_runs(file: &Fd, size: usize, runs: &[Run]) -> Result<usize, Errno> {
        // None: a signal handler that interrupted its own thread's
        // placement; it places alone (MAP_FIXED_NOREPLACE still never
        // takes a range in use).
        let _placing = crate::lock::local::take(&PLACING);
        let mut result = Err(Errno::ENOMEM);
        for _ in 0..PLACE_TRIES {
            result = Mapping::place_runs_at(file, runs, place(size));
            if result.is_ok() {
                break;
            }
        }
        result
    }

    /// [`Mapping::place_runs`] at `base` (0: where the kernel puts the
    /// first run).
    fn place_runs_at(file: &Fd, runs: &[Run], mut base: usize) -> Result<usize, Errno> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let mut made: Vec<(usize, usize)> = Vec::new();
        let mut result = Ok(());
        for r in runs {
            let len = r.end.load(Relaxed) - r.start;
            let at = base.wrapping_add(r.start);
            let flags = if base == 0 {
                libc::MAP_SHARED
            } else {
                libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE
            };
            // SAFETY: a new mapping of our own descriptor, where the kernel
            // chooses or with MAP_FIXED_NOREPLACE, which replaces nothing.
            match unsafe { mem::mmap_at(at, len, prot, flags, file.raw(), r.start as u64) } {
                Ok(p) => {
                    made.push((p, len));
                    if base == 0 {
                        base = p.wrapping_sub(r.start);
                    } else if p != at {
                        // A kernel before 4.17 took the address as a hint.
                        result = Err(Errno::ENOMEM);
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if let Err(e) = result {
            for (p, len) in made {
                // SAFETY: unmaps exactly the mappings just made, never
                // referenced.
                let _ = unsafe { mem::munmap(p, len) };
            }
            return Err(e);
        }
        Ok(base)
    }

    /// The run holding offset `off` (the last for offsets past the file).
    #[inline]
    fn run_of(&self, off: usize) -> &Run {
        let mut r = &self.runs[0];
        for next in &self.runs[1..] {
            if off < next.start {
                break;
            }
            r = next;
        }
        r
    }

    /// Makes `[off, end)` mapped (`off <= end <= size`), growing the runs
    /// it lies in: ENOMEM when one cannot grow.
    #[inline]
    fn ensure(&self, off: usize, end: usize) -> Result<(), Errno> {
        // Acquire: pairs with the Release that published a growth. The
        // first run starts at 0: a range below its end is mapped (almost
        // every view, in normal mode the only run).
        if let Some(first) = self.runs.first()
            && end <= first.end.load(Acquire)
        {
            return Ok(());
        }
        if end <= self.run_of(off).end.load(Acquire) || end == off {
            return Ok(());
        }
        self.grow_to(off, end)
    }

    #[cold]
    fn grow_to(&self, off: usize, end: usize) -> Result<(), Errno> {
        let _g = self.lock_growth()?;
        for r in &self.runs {
            if r.limit <= off || r.start >= end {
                continue;
            }
            self.grow(r, end.min(r.limit))?;
        }
        Ok(())
    }

    /// Grows run `r` to cover up to `need` (growth lock held): generously
    /// (double, at least [`GROW_MIN`], in [`ALIGN`] steps) if the address
    /// space and the limits allow, else exactly.
    fn grow(&self, r: &Run, need: usize) -> Result<(), Errno> {
        let cur = r.end.load(Relaxed);
        if need <= cur {
            return Ok(());
        }
        let exact = round_up(need, PAGE).min(r.limit);
        let generous = round_up(cur.saturating_add((cur - r.start).max(GROW_MIN)), ALIGN)
            .max(exact)
            .min(r.limit);
        for target in [generous, exact] {
            // SAFETY: `[base + start, base + cur)` is this run's mapping,
            // ours; it grows in place or not at all.
            let grown =
                unsafe { mem::mremap_grow(self.base + r.start, cur - r.start, target - r.start) };
            if grown.is_ok() {
                r.end.store(target, Release);
                return Ok(());
            }
        }
        // mremap(2): "ENOMEM ... the area cannot be expanded at the
        // current virtual address": something else is mapped there, or
        // RLIMIT_AS.
        Err(Errno::ENOMEM)
    }

    /// Takes the process-local growth lock: one thread grows at a time
    /// (two mremaps of one run from the same old length would fail). A
    /// word naming another process is a fork's copy of a parent thread's:
    /// taken over. A word naming this very thread is a signal handler
    /// that interrupted a growth: ENOMEM, never a wait for itself.
    fn lock_growth(&self) -> Result<crate::lock::local::Held<'_>, Errno> {
        crate::lock::local::take(&self.grower).ok_or(Errno::ENOMEM)
    }

    /// The checked `[off, off + bytes)` with its alignment for `align`:
    /// EFAULT outside the file or misaligned (a corrupted arena), ENOMEM
    /// when it cannot be mapped.
    #[inline]
    fn checked(&self, off: u64, bytes: usize, align: usize) -> Result<usize, Errno> {
        let off = usize::try_from(off).map_err(|_| Errno::EFAULT)?;
        let end = off.checked_add(bytes).ok_or(Errno::EFAULT)?;
        if end > self.size || off % align != 0 {
            return Err(Errno::EFAULT);
        }
        self.ensure(off, end)?;
        Ok(off)
    }

    /// A shared reference to the `T` at `off`, if it lies inside the file
    /// and is aligned (EFAULT) and can be mapped (ENOMEM).
    #[inline]
    pub fn view<T: Shared>(&self, off: u64) -> Result<&T, Errno> {
        let off = self.checked(off, core::mem::size_of::<T>(), core::mem::align_of::<T>())?;
        // SAFETY: in bounds, aligned and mapped (checked above; a run
        // never shrinks while `self` lives); `T: Shared` accepts any bits
        // and tolerates concurrent writers; the reference borrows `self`,
        // so the mapping outlives it.
        Ok(unsafe { &*((self.base + off) as *const T) })
    }

    /// `n` consecutive `T`s at `off`.
    #[inline]
    pub fn view_slice<T: Shared>(&self, off: u64, n: usize) -> Result<&[T], Errno> {
        let bytes = n
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(Errno::EFAULT)?;
        let off = self.checked(off, bytes, core::mem::align_of::<T>())?;
        // SAFETY: as in `view`, for `n` elements.
        Ok(unsafe { core::slice::from_raw_parts((self.base + off) as *const T, n) })
    }

    /// The address of `[off, off + len)`, if it lies inside the file and
    /// can be mapped, for code that hands raw shared memory to the rseq
    /// operations (the heap's caches). Nothing is dereferenced here; the
    /// pointer is valid as long as the mapping.
    pub fn ptr_at(&self, off: u64, len: u64) -> Option<*mut u8> {
        let off = self.checked(off, usize::try_from(len).ok()?, 1).ok()?;
        Some((self.base + off) as *mut u8)
    }

    /// The page-aligned span covering `[off, off + len)` inside the
    /// file, mapped, as an address and a length.
    fn span(&self, off: u64, len: u64) -> Result<(usize, usize), Errno> {
        let start = usize::try_from(off).map_err(|_| Errno::EINVAL)? & !(PAGE - 1);
        let end = usize::try_from(off.checked_add(len).ok_or(Errno::EINVAL)?)
            .map_err(|_| Errno::EINVAL)?
            .checked_next_multiple_of(PAGE)
            .ok_or(Errno::EINVAL)?
            .min(self.size);
        if start >= end {
            return Ok((self.base, 0));
        }
        self.ensure(start, end)?;
        Ok((self.base + start, end - start))
    }

    /// Reserves the file's pages under `[off, off + len)` through the
    /// mapping (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14), so that
    /// touching them later cannot fault: EFAULT (ENOSPC's stand-in) when
    /// the file system is full, EINVAL on a kernel without it, ENOMEM
    /// when the range cannot be mapped.
    pub fn reserve(&self, off: u64, len: u64) -> Result<(), Errno> {
        let (addr, n) = self.span(off, len)?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: a mapped range of our own shared mapping (clamped to
        // it); the pages keep their contents.
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
        // SAFETY: a mapped range of our own shared mapping that the heap
        // gave back (nothing live is in it); it reads as zeros afterwards.
        unsafe { mem::madvise(addr, n, libc::MADV_REMOVE) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        for r in &self.runs {
            // SAFETY: unmaps exactly what this run mapped; no reference
            // into it survives `self` (they borrow it).
            let _ = unsafe { mem::munmap(self.base + r.start, r.end.load(Relaxed) - r.start) };
        }
    }
}

/// Where to map a file of `size` bytes so that it can grow in place to
/// its whole length (a hint; nothing is reserved): the middle of the
/// largest free range of the address space (/proc/self/maps), if it holds
/// the file twice, so that neither the program's later mappings (the
/// kernel places them top down, from the highest free range that fits)
/// nor its heap (brk, growing up) are likely to reach it; else its start
/// if it holds the file once. Without /proc (no descriptor to spare),
/// below where the kernel would map now, by a quarter of that address and
/// at most 1 TiB. 0 (the kernel chooses) when nothing fits.
fn place(size: usize) -> usize {
    let want = round_up(size, ALIGN);
    let largest = largest_free().filter(|&(lo, hi)| hi - lo >= want);
    if let Some((lo, hi)) = largest {
        let room = hi - lo;
        return if room / 2 >= want {
            round_up(lo + (room - want) / 2, ALIGN)
        } else {
            round_up(lo, ALIGN).min(hi - want) & !(ALIGN - 1)
        };
    }
    match mem::probe_free(PAGE) {
        Ok(p) => {
            let gap = (p / 4).min(1 << 40);
            p.checked_sub(gap + want)
                .filter(|&a| a >= LOW)
                .map_or(0, |a| a & !(ALIGN - 1))
        }
        Err(_) => 0,
    }
}

/// The largest free range of the address space between [`LOW`] and the
/// last mapping (the stack; `[vsyscall]` above the user's half excluded),
/// from /proc/self/maps.
fn largest_free() -> Option<(usize, usize)> {
    let text = crate::sys::fs::read_to_string(std::path::Path::new("/proc/self/maps")).ok()?;
    let mut best: Option<(usize, usize)> = None;
    let mut prev_end = LOW;
    for line in text.lines() {
        let range = line.split(' ').next()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        if a >= 1 << 63 {
            break;
        }
        if a > prev_end && best.is_none_or(|(lo, hi)| a - prev_end > hi - lo) {
            best = Some((prev_end, a));
        }
        prev_end = prev_end.max(b);
    }
    best
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

/// Maps the `len` bytes of `file` from offset `off` (page aligned)
/// MAP_SHARED at `addr` (0: anywhere; else exactly there, replacing what
/// is mapped only if `replace`), for shmat. EEXIST when `addr` is taken
/// and `replace` is false.
pub fn map_segment_at(
    file: &Fd,
    off: u64,
    len: usize,
    addr: usize,
    prot: i32,
    replace: bool,
) -> Result<usize, Errno> {
    // A thread acting for another process maps in that process
    // (`acting.rs`).
    let remote = crate::acting::with_mapper(|m| {
        m.map(|m| match m {
            Some(m) => m.map(file.raw(), off, len, addr, prot, replace),
            None => Err(Errno::ENOSYS),
        })
    });
    if let Some(r) = remote {
        return r;
    }
    let flags = libc::MAP_SHARED
        | match (addr, replace) {
            (0, _) => 0,
            (_, true) => libc::MAP_FIXED,
            (_, false) => libc::MAP_FIXED_NOREPLACE,
        };
    // SAFETY: a new mapping of our own descriptor. At a fixed address it
    // replaces existing pages only when the caller asked for SHM_REMAP, as
    // shmat(2) does; those pages are the caller's to give up.
    let p = unsafe { mem::mmap_at(addr, len, prot, flags, file.raw(), off) }?;
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
    if crate::acting::with_mapper(|m| m.map(|m| m.map(|m| m.unmap(addr, len)))).is_some() {
        return;
    }
    // SAFETY: unmaps exactly an attachment this process made with
    // `map_segment` (shmdt found it in its own record); the caller gives
    // it up, as shmdt(2) does.
    let _ = unsafe { mem::munmap(addr, len) };
}
