//! The kernel's rseq ABI: `struct rseq`, `struct rseq_cs`, flags, the
//! signature and the auxiliary-vector keys.
//!
//! References: `include/uapi/linux/rseq.h`, `kernel/rseq.c`,
//! `include/uapi/linux/auxvec.h`.
//!
//! # Layout
//!
//! `struct rseq` is 32 bytes aligned to 32 in its original form; later kernels
//! append fields. Which fields exist is decided by the *registered* size and the
//! kernel's *feature size* (`AT_RSEQ_FEATURE_SIZE`), never by
//! `size_of::<Rseq>()`: a field is usable when both cover its end.

use core::mem::{offset_of, size_of};

/// `struct rseq` (`include/uapi/linux/rseq.h`), the area the kernel updates on
/// every return to user space of a registered thread.
///
/// # Layout
///
/// | offset | field          | since |
/// |--------|----------------|-------|
/// | 0      | `cpu_id_start` | 4.18  |
/// | 4      | `cpu_id`       | 4.18  |
/// | 8      | `rseq_cs`      | 4.18  |
/// | 16     | `flags`        | 4.18  |
/// | 20     | `node_id`      | 6.3   |
/// | 24     | `mm_cid`       | 6.3   |
/// | 28     | `slice_ctrl`   | 7.0   |
#[repr(C, align(32))]
#[derive(Debug)]
pub struct Rseq {
    /// Always a valid cpu number (0 before registration).
    pub cpu_id_start: u32,
    /// Current cpu, or [`CPU_ID_UNINITIALIZED`] / [`CPU_ID_REGISTRATION_FAILED`].
    pub cpu_id: u32,
    /// Address of the active [`RseqCs`] descriptor, or 0.
    pub rseq_cs: u64,
    /// Deprecated per-thread flags; always 0 here.
    pub flags: u32,
    /// NUMA node of `cpu_id` (6.3+).
    pub node_id: u32,
    /// Concurrency id of the thread within its process (6.3+).
    pub mm_cid: u32,
    /// Time-slice extension control (7.0+); never touched by this crate.
    pub slice_ctrl: u32,
}

const _: () = {
    assert!(size_of::<Rseq>() == 32);
    assert!(core::mem::align_of::<Rseq>() == 32);
    assert!(offset_of!(Rseq, cpu_id_start) == OFF_CPU_ID_START);
    assert!(offset_of!(Rseq, cpu_id) == OFF_CPU_ID);
    assert!(offset_of!(Rseq, rseq_cs) == OFF_RSEQ_CS);
    assert!(offset_of!(Rseq, flags) == 16);
    assert!(offset_of!(Rseq, node_id) == OFF_NODE_ID);
    assert!(offset_of!(Rseq, mm_cid) == OFF_MM_CID);
    assert!(offset_of!(Rseq, slice_ctrl) == 28);
};

/// `struct rseq_cs`: the descriptor of one critical section. Instances live in
/// the `__rseq_cs` section, emitted by the assembly in `ops`.
///
/// # Layout
///
/// 32 bytes aligned to 32: `version` u32 @0, `flags` u32 @4, `start_ip` u64 @8,
/// `post_commit_offset` u64 @16, `abort_ip` u64 @24.
#[repr(C, align(32))]
#[derive(Debug)]
pub struct RseqCs {
    /// Always 0.
    pub version: u32,
    /// 0 (the `NO_RESTART_ON_*` flags are deprecated).
    pub flags: u32,
    /// First instruction of the section.
    pub start_ip: u64,
    /// Length of the section: `[start_ip, start_ip + post_commit_offset)`.
    pub post_commit_offset: u64,
    /// Where the kernel moves a preempted, migrated or signalled thread; the
    /// four bytes before it hold the signature.
    pub abort_ip: u64,
}

const _: () = {
    assert!(size_of::<RseqCs>() == 32);
    assert!(offset_of!(RseqCs, start_ip) == 8);
    assert!(offset_of!(RseqCs, post_commit_offset) == 16);
    assert!(offset_of!(RseqCs, abort_ip) == 24);
};

/// Offset of `cpu_id_start`.
pub const OFF_CPU_ID_START: usize = 0;
/// Offset of `cpu_id`.
pub const OFF_CPU_ID: usize = 4;
/// Offset of `rseq_cs`.
pub const OFF_RSEQ_CS: usize = 8;
/// Offset of `node_id`.
pub const OFF_NODE_ID: usize = 20;
/// Offset of `mm_cid`.
pub const OFF_MM_CID: usize = 24;

/// Size of the original `struct rseq`, the minimum registration length.
pub const ORIG_SIZE: u32 = 32;
/// Feature size of the original ABI (up to and including `flags`), assumed when
/// the kernel does not publish `AT_RSEQ_FEATURE_SIZE`.
pub const ORIG_FEATURE_SIZE: u32 = 20;

/// `cpu_id` before the kernel first writes it (`RSEQ_CPU_ID_UNINITIALIZED`).
pub const CPU_ID_UNINITIALIZED: u32 = -1i32 as u32;
/// `cpu_id` set by glibc when its registration failed
/// (`RSEQ_CPU_ID_REGISTRATION_FAILED`).
pub const CPU_ID_REGISTRATION_FAILED: u32 = -2i32 as u32;

/// `RSEQ_FLAG_UNREGISTER`.
pub const FLAG_UNREGISTER: i32 = 1;

/// `AT_RSEQ_FEATURE_SIZE` (`include/uapi/linux/auxvec.h`, 6.3+).
pub const AT_RSEQ_FEATURE_SIZE: u64 = 27;
/// `AT_RSEQ_ALIGN` (`include/uapi/linux/auxvec.h`, 6.3+).
pub const AT_RSEQ_ALIGN: u64 = 28;

/// The architecture's signature (`RSEQ_SIG`), placed in the four bytes before
/// every abort handler and passed at registration. glibc registers with the
/// same value, so sections work on glibc's area too.
#[cfg(target_arch = "x86_64")]
pub const SIGNATURE: u32 = 0x5305_3053;

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "ipcns-rseq: critical sections are written for x86-64 only; aarch64 \
     (RSEQ_SIG 0xd428bc00) is not implemented because it could not be tested"
);

/// Where a field ends, for the "registered size covers it" rule.
pub const fn field_end(offset: usize) -> u32 {
    (offset + 4) as u32
}
