//! # ipcns-idmap: Linux user-namespace id maps, kernel-exact
//!
//! The uid/gid extent maps of Linux user namespaces (seed 003: up to 340
//! extents, 5 inline, sorted arrays searched both ways), as a library:
//!
//! - [`IdMap::parse`] accepts exactly the text `map_write` accepts, refusing
//!   the rest with the kernel's errno and a message naming the line and the
//!   problem; [`IdMap`]'s `Display` prints it back exactly as the kernel does.
//! - Lookups both ways, single ids and ranges ([`IdMap::map_down`],
//!   [`IdMap::map_up`], [`IdMap::map_range_down`]), a miss being `None`
//!   ([`IdMap::map_up_or_overflow`] gives 65534). Maps of 6 or more extents
//!   are searched with a two-level, branch-free, cache-line index instead of
//!   the kernel's binary search ([`baseline`] has both for comparison).
//! - [`IdMap::compose`] translates through a parent map as the kernel does
//!   when a map is written (EPERM on a straddling range), and
//!   [`IdMap::split_for_parent`] cuts extents so they can be written.
//! - [`IdMap::inverted`], [`ExceptLayout`] ("everything except these ids"),
//!   [`SubidFile`] (/etc/subuid with shadow's rules, free-range search).
//! - [`proc`]: read a process's maps, write maps to a process (and
//!   `setgroups`), with the kernel's errno explained; [`userns`]: start a
//!   program in a new user namespace.
//!
//! ```
//! use ipcns_idmap::{IdMap, Extent};
//!
//! let map = IdMap::parse("0 100000 65536\n").unwrap();
//! assert_eq!(map.map_down(1000), Some(101000));
//! assert_eq!(map.map_up(101000), Some(1000));
//! assert_eq!(map.map_up_or_overflow(5), 65534);
//! assert_eq!(map.to_string(), "         0     100000      65536\n");
//!
//! let err = IdMap::parse("0 100000 10\n5 200000 10\n").unwrap_err();
//! assert_eq!(err.errno, ipcns_idmap::Errno::EINVAL);
//! assert_eq!(err.to_string(), "line 2: overlaps line 1 in the upper range");
//! ```

pub mod baseline;
mod compose;
mod error;
mod extent;
mod index;
mod layout;
mod map;
mod parse;
pub mod proc;
pub mod subid;
pub mod userns;

pub use error::{Errno, MapError, Problem};
pub use extent::{Extent, Side};
pub use layout::ExceptLayout;
pub use map::IdMap;
pub use parse::MAX_WRITE;
pub use subid::SubidFile;

/// Extents kept inline and scanned linearly (`UID_GID_MAP_MAX_BASE_EXTENTS`).
pub const MAX_INLINE_EXTENTS: usize = 5;
/// The most extents a map may have (`UID_GID_MAP_MAX_EXTENTS`).
pub const MAX_EXTENTS: usize = 340;
/// What unmapped ids read as (`overflowuid`, `overflowgid`).
pub const OVERFLOW_ID: u32 = 65534;
