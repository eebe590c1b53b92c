//! Errors: the errno the kernel would return, plus what exactly is wrong.

use crate::extent::Side;
use core::fmt;

/// A Linux errno value. `#[repr(transparent)]` so it converts without loss.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(libc::EPERM);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(libc::EINVAL);

    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// The symbolic name (`"EINVAL"`), or `"E?"` for numbers this crate never
    /// produces.
    pub fn name(self) -> &'static str {
        match self.0 {
            libc::EPERM => "EPERM",
            libc::EINVAL => "EINVAL",
            libc::ENOENT => "ENOENT",
            libc::ESRCH => "ESRCH",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::ENOMEM => "ENOMEM",
            _ => "E?",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Upper => "upper",
        Side::Lower => "lower",
    }
}

/// What is wrong with a map, in the order `map_write` discovers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The text is 4096 bytes or more: the kernel takes under a page, in one write.
    TooLong { len: usize },
    /// No extent at all.
    Empty,
    /// A field is missing or is not a base-10 number (`field` is 1, 2 or 3).
    BadField { field: u8 },
    /// Something other than white space follows the third number.
    TrailingJunk,
    /// `first` (upper) or `lower_first` (lower) is 4294967295.
    StartIsMax { side: Side },
    /// `count` is 0.
    ZeroCount,
    /// `start + count` wraps past 4294967295 on `side`.
    Wraps { side: Side },
    /// The extent's range on `side` intersects that of line `other`.
    Overlap { side: Side, other: usize },
    /// More than 340 extents.
    TooMany,
    /// The lower range is not inside one extent of the parent map (`map_id_range_down` fails).
    NotInParent { lower_first: u32, count: u32 },
    /// The parent maps the lower range, but only in pieces: more than 340 after splitting.
    SplitTooMany { extents: usize },
}

/// A map the kernel would refuse: its errno, the 1-based line (or extent
/// index) at fault where there is one, and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapError {
    pub errno: Errno,
    pub line: Option<usize>,
    pub problem: Problem,
}

impl MapError {
    pub(crate) fn einval(line: Option<usize>, problem: Problem) -> Self {
        MapError {
            errno: Errno::EINVAL,
            line,
            problem,
        }
    }
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        match &self.problem {
            Problem::TooLong { len } => write!(
                f,
                "map is {len} bytes; the kernel accepts at most 4095 bytes in one write"
            ),
            Problem::Empty => f.write_str("map has no extent"),
            Problem::BadField { field } => {
                let name = ["first", "lower_first", "count"][usize::from(*field - 1)];
                write!(
                    f,
                    "field {field} ({name}) must be a base-10 number without sign, followed by white space"
                )
            }
            Problem::TrailingJunk => f.write_str("junk after the third number"),
            Problem::StartIsMax { side } => write!(
                f,
                "the {} start is 4294967295, which can never be mapped",
                side_name(*side)
            ),
            Problem::ZeroCount => f.write_str("count is 0"),
            Problem::Wraps { side } => write!(
                f,
                "the {} range wraps past 4294967295 (the last usable id is 4294967294)",
                side_name(*side)
            ),
            Problem::Overlap { side, other } => {
                write!(f, "overlaps line {other} in the {} range", side_name(*side))
            }
            Problem::TooMany => f.write_str("more than 340 extents"),
            Problem::NotInParent { lower_first, count } => write!(
                f,
                "lower range {lower_first}-{} is not inside one extent of the parent map",
                u64::from(*lower_first) + u64::from(*count) - 1
            ),
            Problem::SplitTooMany { extents } => write!(
                f,
                "split at the parent's boundaries the map needs {extents} extents; at most 340 are allowed"
            ),
        }
    }
}

impl std::error::Error for MapError {}
