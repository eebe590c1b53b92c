//! The atomics the lock and wait-handshake algorithms use, in one place:
//! `core`'s normally, `loom`'s under `--cfg loom`, so that they can be
//! model-checked with threads standing in for processes (crossbeam's
//! approach).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
