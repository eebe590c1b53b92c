//! The words every call reads, in one cache line: on a machine where other
//! programs push ours out of the caches, each extra line a call touches is
//! a miss it pays.
//!
//! # Layout
//! [`Hot`]: 64 bytes, aligned to 64: `ns` @0, `generation` @8,
//! `cred_gen` @16, `cred` @24, `main` (key, lo, hi, faults) @32.

use crate::once::{Current, Published};
use crate::user::bounds::Bounds;
use core::sync::atomic::AtomicU64;
use ipcns_core::{Cred, Namespace};

#[repr(C, align(64))]
pub struct Hot {
    /// The namespace, once chosen and opened (`state.rs`).
    pub ns: Published<Namespace>,
    /// Bumped when the credentials may have changed (`cred.rs`).
    pub generation: AtomicU64,
    /// The generation `cred` was read in.
    pub cred_gen: AtomicU64,
    /// The credentials in force (a kept slot, `cred.rs`).
    pub cred: Current<Cred>,
    /// The main thread's stack bounds (`user.rs`).
    pub main: Bounds,
}

pub static HOT: Hot = Hot {
    ns: Published::new(),
    generation: AtomicU64::new(1),
    cred_gen: AtomicU64::new(0),
    cred: Current::new(),
    main: Bounds::new(),
};

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Hot>() == 64);
    assert!(offset_of!(Hot, generation) == 8);
    assert!(offset_of!(Hot, cred) == 24);
    assert!(offset_of!(Hot, main) == 32);
    assert!(size_of::<Bounds>() == 32);
};
