//! What may live in the arena: types any participant may write any bits
//! into (the mapping, `arena/map.rs`, hands out views of these only).
//!
//! # Safety
//! [`Shared`] is an unsafe marker trait; [`shared_types!`] implements it
//! for types whose definitions satisfy its contract (each use sits beside
//! the type's layout assertions).
#![allow(unsafe_code)]

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
            // of `Shared` (see shared.rs).
            #[allow(unsafe_code)]
            unsafe impl $crate::shared::Shared for $t {}
        )*
    };
}
pub(crate) use shared_types;
