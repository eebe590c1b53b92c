//! The main program's loaded segments, for the direct path: mapped for the
//! program's life with the permissions their program headers give.
//!
//! # Safety
//! `dl_iterate_phdr` gives the callback a valid `dl_phdr_info` whose
//! `dlpi_phdr` points to `dlpi_phnum` program headers; the callback only
//! reads them and writes an accumulator of ours. `getauxval` reads the
//! auxiliary vector.
#![allow(unsafe_code)]

use core::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// One range of the main program's image: `[lo, hi)`, and whether it may
/// be written.
#[derive(Clone, Copy, Debug)]
struct Seg {
    lo: usize,
    hi: usize,
    write: bool,
}

/// At most this many ranges are kept (a program has four or five).
const MAX_SEGS: usize = 16;

static IMAGE: OnceLock<([Seg; MAX_SEGS], usize)> = OnceLock::new();

/// Whether `[addr, end)` lies in one readable (or, for `write`, writable
/// and not RELRO) segment of the main program.
#[inline]
pub(super) fn image_contains(addr: usize, end: usize, write: bool) -> bool {
    let (segs, n) = IMAGE.get_or_init(image_segments);
    segs[..*n]
        .iter()
        .any(|s| addr >= s.lo && end <= s.hi && (s.write || !write))
}

/// The main program's `PT_LOAD` segments (`PF_R` ones; writable unless
/// inside its `PT_GNU_RELRO` range, which is cut out of them).
fn image_segments() -> ([Seg; MAX_SEGS], usize) {
    struct Acc {
        segs: [Seg; MAX_SEGS],
        n: usize,
        done: bool,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Acc` passed below, alive across the call
        // and touched by nothing else meanwhile.
        let acc = unsafe { &mut *data.cast::<Acc>() };
        if acc.done {
            return 1;
        }
        acc.done = true;
        // SAFETY: dl_iterate_phdr hands a valid info whose headers array
        // has dlpi_phnum entries (module doc).
        let info = unsafe { &*info };
        let phdrs = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: as above.
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let base = info.dlpi_addr as usize;
        let range = |p: &libc::Elf64_Phdr| {
            let lo = base.wrapping_add(p.p_vaddr as usize);
            (lo, lo.saturating_add(p.p_memsz as usize))
        };
        let relro = phdrs
            .iter()
            .find(|p| p.p_type == libc::PT_GNU_RELRO)
            .map(range);
        for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD) {
            if p.p_flags & libc::PF_R == 0 {
                continue;
            }
            let (lo, hi) = range(p);
            let write = p.p_flags & libc::PF_W != 0;
            let mut push = |s: Seg| {
                if acc.n < MAX_SEGS && s.lo < s.hi {
                    acc.segs[acc.n] = s;
                    acc.n += 1;
                }
            };
            match relro {
                // A writable segment that holds the RELRO range: the range
                // is read-only, the rest on either side writable. RELRO is
                // rounded to pages by the loader, so the cut is widened to
                // whole pages.
                Some((rlo, rhi)) if write && rlo < hi && rhi > lo => {
                    let mask = page_size() - 1;
                    let (rlo, rhi) = (rlo & !mask, rhi.saturating_add(mask) & !mask);
                    push(Seg {
                        lo,
                        hi: rlo.max(lo),
                        write: true,
                    });
                    push(Seg {
                        lo,
                        hi,
                        write: false,
                    });
                    push(Seg {
                        lo: rhi.min(hi),
                        hi,
                        write: true,
                    });
                }
                _ => push(Seg { lo, hi, write }),
            }
        }
        1
    }
    let mut acc = Acc {
        segs: [Seg {
            lo: 0,
            hi: 0,
            write: false,
        }; MAX_SEGS],
        n: 0,
        done: false,
    };
    // SAFETY: the callback only reads what dl_iterate_phdr hands it and
    // writes `acc`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut acc as *mut Acc).cast()) };
    (acc.segs, acc.n)
}

/// The page size (`AT_PAGESZ`; 64 KiB, the largest Linux uses, if the
/// auxiliary vector lacks it).
fn page_size() -> usize {
    // SAFETY: getauxval reads the process's auxiliary vector; no pointer.
    match unsafe { libc::getauxval(libc::AT_PAGESZ) } as usize {
        p if p.is_power_of_two() => p,
        _ => 1 << 16,
    }
}
