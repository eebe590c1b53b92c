//! Where a key lands in a table of a power-of-two size: the registry's key
//! table (`keys.rs`, seeds 001, 002) and each process's memory of the keys
//! it found (`recent.rs`) index keys alike.

/// The home position of `key` in a table of `cap` entries (a power of
/// two).
pub(crate) fn home(key: i32, cap: u32) -> u32 {
    // The key's low bits with its high bits folded in: keys that differ
    // anywhere land apart, and consecutive keys (the common `k++` and
    // ftok patterns) land in consecutive slots, so a run of lookups walks
    // the table in order instead of missing the cache on every key.
    let x = key as u32;
    (x ^ (x >> 16) ^ (x >> 24)) & (cap - 1)
}
