//! The atomics the lock algorithm uses, in one place: `core`'s normally,
//! `loom`'s under `--cfg loom`, so that the lock can be model-checked with
//! threads standing in for processes (crossbeam's approach).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
