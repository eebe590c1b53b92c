//! Bulk copies between the arena and process memory: message text in and
//! out, and the zeroing of blocks the heap hands out.
//!
//! Short copies go word by word as relaxed atomics (the arena's rule for
//! every access). Long ones are one `rep movsb` (or `rep stosq`) on x86-64:
//! the processor moves them in wide stores (up to 64 bytes a cycle with
//! ERMSB/FSRM), where 8-byte atomic stores move one word per store.
//!
//! # Safety
//!
//! The arena is shared memory that other processes may write at any time,
//! so a copy out of it may race with a writer (a hostile or a buggy one:
//! ipcns's own writers hold the object's lock). Reading it with
//! `copy_nonoverlapping` would be a data race in Rust's sense. The copies
//! here are instead `asm!` blocks, opaque to the compiler: it knows only
//! that the block reads `src .. src + n` and writes `dst .. dst + n`, and
//! it cannot assume anything about the bytes, which it never sees but in
//! the destination afterwards. At the machine level, `rep movsb` is a
//! sequence of byte loads and byte stores, each single-copy atomic on
//! x86: a racing writer makes some bytes old and some new, as a loop of
//! `AtomicU8` relaxed loads would (C++'s proposed
//! `atomic_load_per_byte_memcpy`, P1478, for exactly this case). The bytes
//! land in a `&mut [u8]` we own or in arena words only ever accessed
//! through atomics or these copies, and every bit pattern is valid for
//! both. Rust's rule that mixed-size atomic accesses must not race is met
//! for our own accesses: text is written and read under the queue's lock,
//! only through this module; a racing writer is outside this process. The
//! direction flag is clear on entry to an `asm!` block (the ABI), so the
//! copies run forward, and they touch no stack.
//!
//! Every range is a slice the caller got from the arena's checked views,
//! or the caller's own buffer: in bounds by construction.

#![allow(unsafe_code)]

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::Relaxed;

/// Below this many bytes, copies go word by word (the string instructions
/// have a start-up cost of a few dozen cycles).
const BULK: usize = 256;

/// Copies `src` into the words `dst` from their first byte: byte `i` of
/// `src` to byte `i` of `dst`'s memory. At most `dst.len() * 8` bytes; the
/// bytes of the last word past `src.len()` are left as they are (string
/// copy) or zeroed (word copy).
pub(crate) fn copy_in(dst: &[AtomicU64], src: &[u8]) {
    let n = src.len().min(dst.len() * 8);
    #[cfg(target_arch = "x86_64")]
    if n >= BULK && far_apart(dst.as_ptr() as usize, src.as_ptr() as usize) {
        // SAFETY: `dst` holds `dst.len() * 8 >= n` bytes of arena words
        // (atomics: shared mutability is allowed through them), `src` holds
        // `n` readable bytes; the two do not overlap (`src` is a `&[u8]`
        // the caller holds while `dst` is arena memory only accessed
        // through atomics). rep movsb is a forward byte copy (module doc).
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") n => _,
                inout("rdi") dst.as_ptr().cast::<u8>() => _,
                inout("rsi") src.as_ptr() => _,
                options(nostack, preserves_flags),
            );
        }
        return;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
    let mut chunks = src[..n].chunks_exact(8);
    for (w, c) in dst.iter().zip(&mut chunks) {
        w.store(word(c), Relaxed);
    }
    let rest = chunks.remainder();
    if let (false, Some(w)) = (rest.is_empty(), dst.get(n / 8)) {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        w.store(u64::from_ne_bytes(last), Relaxed);
    }
}

/// Copies the first `dst.len()` bytes of the words `src` (at most
/// `src.len() * 8`) into `dst`; returns how many.
pub(crate) fn copy_out(src: &[AtomicU64], dst: &mut [u8]) -> usize {
    let n = dst.len().min(src.len() * 8);
    #[cfg(target_arch = "x86_64")]
    if n >= BULK && far_apart(dst.as_ptr() as usize, src.as_ptr() as usize) {
        // SAFETY: `src` holds at least `n` bytes of arena words, `dst` `n`
        // writable bytes we hold exclusively (`&mut`); they do not overlap.
        // The bytes read may be changing under a racing writer in another
        // process: each is some value, and every value is a valid `u8`
        // (module doc).
        unsafe {
            core::arch::asm!(
                "rep movsb",
                inout("rcx") n => _,
                inout("rdi") dst.as_mut_ptr() => _,
                inout("rsi") src.as_ptr().cast::<u8>() => _,
                options(nostack, preserves_flags),
            );
        }
        return n;
    }
    let mut chunks = dst[..n].chunks_exact_mut(8);
    for (w, c) in src.iter().zip(&mut chunks) {
        c.copy_from_slice(&w.load(Relaxed).to_ne_bytes());
    }
    let rest = chunks.into_remainder();
    if let (false, Some(w)) = (rest.is_empty(), src.get(n / 8)) {
        let len = rest.len();
        rest.copy_from_slice(&w.load(Relaxed).to_ne_bytes()[..len]);
    }
    n
}

/// Whether `rep movsb` from `src` to `dst` runs at full speed: not when
/// the destination is less than 64 bytes ahead of the source modulo the
/// page (the processor then suspects an overlap from the low address bits
/// and copies a byte at a time: 2.3 us for 8 KiB instead of 80 ns, on the
/// AMD EPYC this was measured on; glibc avoids it the same way). Those
/// copies go word by word.
#[cfg(target_arch = "x86_64")]
fn far_apart(dst: usize, src: usize) -> bool {
    dst.wrapping_sub(src) & 4095 >= 64
}

/// Zeroes the words `dst`.
pub(crate) fn zero(dst: &[AtomicU64]) {
    #[cfg(target_arch = "x86_64")]
    if dst.len() * 8 >= BULK {
        // SAFETY: `dst` is `dst.len()` arena words (atomics); `rep stosq`
        // stores zeros over exactly them, forward (module doc: a racing
        // reader sees each byte old or 0).
        unsafe {
            core::arch::asm!(
                "rep stosq",
                inout("rcx") dst.len() => _,
                inout("rdi") dst.as_ptr() => _,
                in("rax") 0u64,
                options(nostack, preserves_flags),
            );
        }
        return;
    }
    for w in dst {
        w.store(0, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, fill: u64) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(fill)).collect()
    }

    fn bytes_of(w: &[AtomicU64]) -> Vec<u8> {
        w.iter()
            .flat_map(|x| x.load(Relaxed).to_ne_bytes())
            .collect()
    }

    /// Every length around the word size and the bulk threshold, both
    /// ways, with the words past the text untouched.
    #[test]
    fn copies_round_trip() {
        for n in (0..40).chain(BULK - 9..BULK + 17).chain([1000, 8191, 8192]) {
            let text: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            let w = words(n.div_ceil(8) + 2, u64::MAX);
            copy_in(&w, &text);
            let b = bytes_of(&w);
            assert_eq!(&b[..n], &text[..], "{n} bytes in");
            assert!(
                b[n.div_ceil(8) * 8..].iter().all(|&x| x == 0xff),
                "{n}: words past the text touched"
            );
            let mut out = vec![0u8; n + 5];
            assert_eq!(copy_out(&w, &mut out[..n]), n);
            assert_eq!(&out[..n], &text[..], "{n} bytes out");
            assert!(out[n..].iter().all(|&x| x == 0), "{n}: past the end");
        }
    }

    /// Long copies at every distance between the two sides modulo the
    /// page (string copies, and word copies where the two are close).
    #[test]
    fn every_distance() {
        let n: usize = 1000;
        let pool: Vec<u8> = (0..4096 + n).map(|i| (i % 251) as u8).collect();
        let w = words(n.div_ceil(8), 0);
        let mut out = vec![0u8; 4096 + n];
        for at in (0..4096).step_by(8) {
            let src = &pool[at..at + n];
            copy_in(&w, src);
            assert_eq!(&bytes_of(&w)[..n], src, "in at {at}");
            let dst = &mut out[at..at + n];
            assert_eq!(copy_out(&w, dst), n);
            assert_eq!(dst, src, "out at {at}");
        }
    }

    /// Too short a destination or source is never overrun.
    #[test]
    fn bounded_by_both_sides() {
        let w = words(2, 0);
        copy_in(&w, &[9u8; 300]);
        assert_eq!(bytes_of(&w), vec![9u8; 16]);
        let big = words(40, 0x0101_0101_0101_0101);
        let mut out = vec![0u8; 300];
        assert_eq!(copy_out(&big[..2], &mut out), 16);
        assert!(out[16..].iter().all(|&x| x == 0));
        assert_eq!(copy_out(&big, &mut out), 300);
        assert!(out.iter().all(|&x| x == 1));
    }

    #[test]
    fn zeroes() {
        for n in [0, 1, 31, 32, 33, 1000] {
            let w = words(n + 1, 7);
            zero(&w[..n]);
            assert!(w[..n].iter().all(|x| x.load(Relaxed) == 0), "{n}");
            assert_eq!(w[n].load(Relaxed), 7, "{n}: past the end");
        }
    }
}
