//! The critical sections, in x86-64 assembly.
//!
//! Every section has the same shape (written once, in [`section!`]):
//!
//! ```text
//!   descriptor 5: in __rseq_cs      {0, 0, start=2f, post_commit=3f-2f, abort=4f}
//!   lea  cs, [rip + 5b]             publish the descriptor
//!   mov  [area + 8], cs               (rseq->rseq_cs)
//! 2: mov cpu, [idx]                 start: cpu_id (or mm_cid) of this instant
//!   cmp  cpu, n ; jae 6b            not registered (-1/-2) or out of range
//!   slot = base + cpu * stride
//!   ...loads and compares (jne 8b on a miss)...
//!   one store: the commit
//! 3:                                post-commit: the section is over
//!
//!   in __rseq_failure, out of the straight-line path:
//! 8: miss, 6: no index, then
//!   ud1 edi, [rip + SIG]            the 4 bytes before 4: are the signature
//! 4: abort handler (kernel moved us here)
//! ```
//!
//! The result is one register: the index in the low 32 bits, the status
//! (0 success, 1 miss, 2 abort, 3 no index) in the high 32 bits.
//!
//! [`add_pow2`], the per-cpu counter's fast path, is the same protocol
//! written out on its own: `cpu_id` at a constant offset of the area, a
//! shift instead of the multiplication, and no result register: its abort
//! handler and range check jump to `label` operands (`asm goto`), so the
//! success path is straight-line with nothing to decode after the commit.
//!
//! The kernel moves a thread that is preempted, migrated or signalled while
//! its instruction pointer is in `[2, 3)` to `4`, so everything before the
//! commit store runs on one cpu without interruption, and the commit is a
//! single instruction. No system call inside, no stack use.
//!
//! # Safety
//!
//! Callers pass `area`, the calling thread's registered area; `idx`, the
//! address of its `cpu_id` or `mm_cid` field; and `base`/`stride`/`n`
//! describing `n` slots that are valid for 8-byte reads and writes at the
//! offsets used ([`add_pow2`] takes no `idx`, it reads `cpu_id`, and its
//! stride is `1 << SHIFT`). x86-64 is TSO: the plain loads here have acquire
//! and the plain stores release semantics with respect to other cpus.

#![allow(unsafe_code)]

use crate::abi::Rseq;

pub(super) const SUCCESS: u32 = 0;
pub(super) const MISS: u32 = 1;
pub(super) const ABORT: u32 = 2;
pub(super) const NO_INDEX: u32 = 3;

/// Emits one critical section. `$body` computes on `{slot}` (the address of
/// the selected slot plus the field offset), ends with the commit store and
/// may jump to `8f` on a compare miss.
macro_rules! section {
    ([$($body:literal),* $(,)?], $area:expr, $idx:expr, $n:expr, $base:expr, $stride:expr,
     $($operands:tt)*) => {{
        let r: u64;
        core::arch::asm!(
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "5:",
            ".long 0, 0",
            ".quad 2f, 3f - 2f, 4f",
            ".popsection",
            ".pushsection __rseq_cs_ptr_array, \"aw\"",
            ".quad 5b",
            ".popsection",
            // Out-of-line exits, away from the straight-line success path.
            ".pushsection __rseq_failure, \"ax\"",
            "8:",
            "bts {r}, 32",
            "jmp 7f",
            "6:",
            "mov {r}, {noidx}",
            "jmp 7f",
            // ud1 edi, [rip + disp32] whose displacement is the signature.
            ".byte 0x0f, 0xb9, 0x3d",
            ".long 0x53053053",
            "4:",
            "mov {r}, {abort}",
            "jmp 7f",
            ".popsection",
            "lea {slot}, [rip + 5b]",
            "mov qword ptr [{area} + 8], {slot}",
            "2:",
            "mov {r:e}, dword ptr [{idx}]",
            "cmp {r:e}, {n:e}",
            "jae 6b",
            "mov {slot}, {r}",
            "imul {slot}, {stride}",
            "add {slot}, {base}",
            $($body,)*
            "3:",
            "7:",
            area = in(reg) $area,
            idx = in(reg) $idx,
            n = in(reg) $n,
            base = in(reg) $base,
            stride = in(reg) $stride,
            slot = out(reg) _,
            r = out(reg) r,
            noidx = const (NO_INDEX as u64) << 32,
            abort = const (ABORT as u64) << 32,
            $($operands)*
            options(nostack),
        );
        ((r >> 32) as u32, r as u32)
    }};
}

/// `*slot += v` (load-add-store). Returns `(status, index)`.
///
/// # Safety
///
/// See the module doc; `base` is the field's address in slot 0.
#[inline(always)]
pub(super) unsafe fn add(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    v: u64,
) -> (u32, u32) {
    // SAFETY: the caller upholds the module contract.
    unsafe { section!(["add qword ptr [{slot}], {v}"], area, idx, n, base, stride, v = in(reg) v,) }
}

/// How [`add_pow2`] left its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    /// Committed.
    Done,
    /// Preempted, migrated or signalled before the commit; nothing stored.
    Abort,
    /// `cpu_id` was not below `n` (the area is not registered any more).
    NoIndex,
}

/// `*(base + (cpu_id << SHIFT)) += v`: [`add`] for slots of `1 << SHIFT`
/// bytes indexed by `cpu_id`, in the fewest instructions. Unlike the other
/// sections it returns no register: the success path falls straight through
/// the commit, and the abort handler and the range check jump to `label`
/// blocks (`asm goto`), so the caller needs no compare after it. The slot
/// index is not reported.
///
/// ```text
///   lea  t, [rip + 5b] ; mov [area + 8], t     publish the descriptor
/// 2: mov t, [area + 4]                          start: cpu_id
///   cmp  t, n ; jae {no_index}
///   shl  t, SHIFT
///   add  [base + t], v                          the commit
/// 3:
/// ```
///
/// # Safety
///
/// See the module doc: `area` is the calling thread's registered area and
/// `n` slots of `1 << SHIFT` bytes from `base` (the field's address in slot
/// 0) are valid for 8-byte reads and writes.
#[inline(always)]
pub(super) unsafe fn add_pow2<const SHIFT: u32>(
    area: *mut Rseq,
    n: u32,
    base: *mut u8,
    v: u64,
) -> Exit {
    // SAFETY: the caller upholds the module contract; the section has the
    // layout described in the module doc (descriptor in __rseq_cs, signature
    // right before the abort handler, no stack use, one commit store).
    unsafe {
        core::arch::asm!(
            ".pushsection __rseq_cs, \"aw\"",
            ".balign 32",
            "5:",
            ".long 0, 0",
            ".quad 2f, 3f - 2f, 4f",
            ".popsection",
            ".pushsection __rseq_cs_ptr_array, \"aw\"",
            ".quad 5b",
            ".popsection",
            ".pushsection __rseq_failure, \"ax\"",
            // ud1 edi, [rip + disp32] whose displacement is the signature.
            ".byte 0x0f, 0xb9, 0x3d",
            ".long {sig}",
            "4:",
            "jmp {abort}",
            ".popsection",
            "lea {t}, [rip + 5b]",
            "mov qword ptr [{area} + {cs}], {t}",
            "2:",
            "mov {t:e}, dword ptr [{area} + {cpu}]",
            "cmp {t:e}, {n:e}",
            "jae {no_index}",
            "shl {t}, {shift}",
            "add qword ptr [{base} + {t}], {v}",
            "3:",
            area = in(reg) area,
            n = in(reg) n,
            base = in(reg) base,
            v = in(reg) v,
            t = out(reg) _,
            sig = const crate::abi::SIGNATURE,
            cs = const crate::abi::OFF_RSEQ_CS,
            cpu = const crate::abi::OFF_CPU_ID,
            shift = const SHIFT,
            abort = label { return Exit::Abort },
            no_index = label { return Exit::NoIndex },
            options(nostack),
        );
    }
    Exit::Done
}

/// `if *slot == expect { *slot = new }` (load-compare-store).
///
/// # Safety
///
/// See the module doc.
#[inline(always)]
pub(super) unsafe fn cmp_store(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    expect: u64,
    new: u64,
) -> (u32, u32) {
    // SAFETY: the caller upholds the module contract.
    unsafe {
        section!(
            ["cmp qword ptr [{slot}], {e}", "jne 8b", "mov qword ptr [{slot}], {new}"],
            area, idx, n, base, stride,
            e = in(reg) expect, new = in(reg) new,
        )
    }
}

/// `if *slot == expect && *(slot + d2) == expect2 { *slot = new }`.
///
/// # Safety
///
/// See the module doc; `slot + d2` is valid in every slot.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn cmp_cmp_store(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    expect: u64,
    d2: isize,
    expect2: u64,
    new: u64,
) -> (u32, u32) {
    // SAFETY: the caller upholds the module contract.
    unsafe {
        section!(
            [
                "cmp qword ptr [{slot}], {e}",
                "jne 8b",
                "cmp qword ptr [{slot} + {d2}], {e2}",
                "jne 8b",
                "mov qword ptr [{slot}], {new}",
            ],
            area, idx, n, base, stride,
            e = in(reg) expect, d2 = in(reg) d2, e2 = in(reg) expect2, new = in(reg) new,
        )
    }
}

/// `if *slot == expect { *(slot + ds) = spec; *slot = new }` (try-store then
/// store: the speculative store may be redone, only the last one counts).
///
/// # Safety
///
/// See the module doc; `slot + ds` is valid in every slot.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn cmp_trystore_store(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    expect: u64,
    ds: isize,
    spec: u64,
    new: u64,
) -> (u32, u32) {
    // SAFETY: the caller upholds the module contract.
    unsafe {
        section!(
            [
                "cmp qword ptr [{slot}], {e}",
                "jne 8b",
                "mov qword ptr [{slot} + {ds}], {spec}",
                "mov qword ptr [{slot}], {new}",
            ],
            area, idx, n, base, stride,
            e = in(reg) expect, ds = in(reg) ds, spec = in(reg) spec, new = in(reg) new,
        )
    }
}

/// Treiber push of block `enc - 1` onto the list whose head is at `slot`
/// (encoding in the `list` module doc: index + 1 in the head's low 32 bits,
/// pop count in its high 32 bits; the same index + 1 in each link). `link`
/// is the block's first word, computed by the caller from the checked
/// index. The store to `link` is a try-store (the block is the caller's
/// until the commit); the head store is the commit. Returns
/// `(status, index)`.
///
/// ```text
///   h = [slot]
///   [link] = low32(h)                  try-store: old first element
///   h = high32(h) << 32 | enc
///   [slot] = h                         the commit
/// ```
///
/// # Safety
///
/// See the module doc; `link` is valid for a 4-byte write.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn list_push(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    link: *mut u8,
    enc: u32,
) -> (u32, u32) {
    // SAFETY: the caller upholds the module contract.
    unsafe {
        section!(
            [
                "mov {h}, qword ptr [{slot}]",
                "mov dword ptr [{lk}], {h:e}",
                "shr {h}, 32",
                "shl {h}, 32",
                "or {h}, {el}",
                "mov qword ptr [{slot}], {h}",
            ],
            area, idx, n, base, stride,
            lk = in(reg) link, el = in(reg) u64::from(enc), h = out(reg) _,
        )
    }
}

/// Treiber pop from the list whose head is at `slot` (encoding as in
/// [`list_push`]) over the blocks `blocks` describes. Returns `(status,
/// index, enc)`: on success `enc - 1` is the popped block's index; on a miss
/// `enc` is 0 for an empty list, or the head's out-of-range value, which was
/// not dereferenced.
///
/// The descriptor's fields are read in the section (one register for all
/// three, so the section needs 11 of the 13 allocatable registers), and the
/// index is compared with the number of blocks before the link is read:
///
/// ```text
///   h = [slot] ; el = low32(h)
///   el == 0           -> miss (empty)
///   el > blocks.len   -> miss, el kept (index el - 1 out of range)
///   nx = [blocks.base + (el - 1) * blocks.size]   the link, 64-bit offset
///   h = (high32(h) + 1) << 32 | nx
///   [slot] = h                                    the commit
/// ```
///
/// # Safety
///
/// See the module doc; `blocks` satisfies the contract of
/// [`Blocks::new`](super::Blocks::new).
#[inline(always)]
pub(super) unsafe fn list_pop(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    blocks: &super::Blocks,
) -> (u32, u32, u32) {
    let enc: u64;
    // SAFETY: the caller upholds the module contract; the link is read only
    // at an index below `blocks.len`, inside the region.
    let (st, cpu) = unsafe {
        section!(
            [
                "mov {h}, qword ptr [{slot}]",
                "mov {el:e}, {h:e}",
                "test {el:e}, {el:e}",
                "jz 8b",
                "cmp {el:e}, dword ptr [{bk} + {len}]",
                "ja 8b",
                "lea {nx}, [{el} - 1]",
                "imul {nx}, qword ptr [{bk} + {size}]",
                "add {nx}, qword ptr [{bk} + {rg}]",
                "mov {nx:e}, dword ptr [{nx}]",
                "shr {h}, 32",
                "add {h}, 1",
                "shl {h}, 32",
                "or {h}, {nx}",
                "mov qword ptr [{slot}], {h}",
            ],
            area, idx, n, base, stride,
            bk = in(reg) blocks as *const super::Blocks,
            rg = const super::list::OFF_BASE,
            size = const super::list::OFF_SIZE,
            len = const super::list::OFF_LEN,
            el = out(reg) enc, h = out(reg) _, nx = out(reg) _,
        )
    };
    (st, cpu, enc as u32)
}

/// Bounded stack push: the stack at `slot` is a count word then `cap`
/// value words (encoding in the `stack` module doc). Stores `v` in the
/// first free value word, then commits the count + 1. Returns `(status,
/// index, count)`: on success the new count; on a miss (the stack holds
/// `cap` values or more) the count found.
///
/// ```text
///   c = [slot]
///   c >= cap          -> miss (full, or a count out of range)
///   [slot + 8 + c * 8] = v        try-store: the value
///   [slot] = c + 1                the commit
/// ```
///
/// # Safety
///
/// See the module doc; `slot + 8 .. slot + 8 + cap * 8` is valid in every
/// slot.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn stack_push(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    cap: u64,
    v: u64,
) -> (u32, u32, u64) {
    let c: u64;
    // SAFETY: the caller upholds the module contract; the value word is
    // written only at a count below `cap`, inside the stack.
    let (st, cpu) = unsafe {
        section!(
            [
                "mov {c}, qword ptr [{slot}]",
                "cmp {c}, {cap}",
                "jae 8b",
                "mov qword ptr [{slot} + {c} * 8 + 8], {v}",
                "add {c}, 1",
                "mov qword ptr [{slot}], {c}",
            ],
            area, idx, n, base, stride,
            cap = in(reg) cap, v = in(reg) v, c = out(reg) c,
        )
    };
    (st, cpu, c)
}

/// Bounded stack pop from the stack at `slot` (see [`stack_push`]).
/// Returns `(status, index, word)`: on success the value popped; on a miss
/// the count found, 0 for an empty stack or a count above `cap` (out of
/// range: nothing was read through it).
///
/// ```text
///   c = [slot]
///   c == 0            -> miss (empty)
///   c > cap           -> miss, c kept (out of range)
///   v = [slot + c * 8]            the top value (word c - 1)
///   [slot] = c - 1                the commit
/// ```
///
/// # Safety
///
/// As [`stack_push`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn stack_pop(
    area: *mut Rseq,
    idx: *const u32,
    n: u32,
    base: *mut u8,
    stride: usize,
    cap: u64,
) -> (u32, u32, u64) {
    let (c, v): (u64, u64);
    // SAFETY: the caller upholds the module contract; the value is read
    // only at a count in 1..=cap, inside the stack.
    let (st, cpu) = unsafe {
        section!(
            [
                "mov {c}, qword ptr [{slot}]",
                "test {c}, {c}",
                "jz 8b",
                "cmp {c}, {cap}",
                "ja 8b",
                "mov {v}, qword ptr [{slot} + {c} * 8]",
                "sub {c}, 1",
                "mov qword ptr [{slot}], {c}",
            ],
            area, idx, n, base, stride,
            cap = in(reg) cap, c = out(reg) c, v = out(reg) v,
        )
    };
    if st == SUCCESS {
        (st, cpu, v)
    } else {
        (st, cpu, c)
    }
}
