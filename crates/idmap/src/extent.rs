//! One extent of an id map: `count` ids starting at `first` inside the
//! namespace, mapped onto `count` ids starting at `lower_first` outside.

/// `struct uid_gid_extent` (include/linux/user_namespace.h): three u32.
///
/// # Layout
/// 12 bytes, align 4: `first` @0, `lower_first` @4, `count` @8, as in Linux.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Extent {
    /// First id inside the namespace.
    pub first: u32,
    /// First id outside (in the parent namespace, or kernel ids once composed).
    pub lower_first: u32,
    /// Number of ids; at least 1 in a valid map.
    pub count: u32,
}

const _: () = {
    assert!(core::mem::size_of::<Extent>() == 12);
    assert!(core::mem::align_of::<Extent>() == 4);
    assert!(core::mem::offset_of!(Extent, first) == 0);
    assert!(core::mem::offset_of!(Extent, lower_first) == 4);
    assert!(core::mem::offset_of!(Extent, count) == 8);
};

/// Which side of an extent: the namespace's own ids or the ids outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// `first ..`: ids as seen inside the namespace.
    Upper,
    /// `lower_first ..`: ids as seen in the parent namespace.
    Lower,
}

impl Extent {
    /// `Extent { first, lower_first, count }`.
    pub const fn new(first: u32, lower_first: u32, count: u32) -> Self {
        Extent {
            first,
            lower_first,
            count,
        }
    }

    /// The start of this extent on `side`.
    pub const fn start(&self, side: Side) -> u32 {
        match side {
            Side::Upper => self.first,
            Side::Lower => self.lower_first,
        }
    }

    /// The last id on `side`, computed in u32 as the kernel does
    /// (`first + count - 1`, wrapping).
    pub const fn last(&self, side: Side) -> u32 {
        self.start(side).wrapping_add(self.count).wrapping_sub(1)
    }

    /// Whether `id` falls inside this extent on `side`. Exact for valid
    /// extents (no wrap, count >= 1).
    #[inline]
    pub const fn contains(&self, side: Side, id: u32) -> bool {
        id.wrapping_sub(self.start(side)) < self.count
    }

    /// Whether the ranges of `self` and `other` on `side` intersect, as the
    /// kernel's `mappings_overlap` decides it (inclusive last ids, u32).
    pub const fn overlaps(&self, other: &Extent, side: Side) -> bool {
        other.start(side) <= self.last(side) && other.last(side) >= self.start(side)
    }

    /// This extent with its two sides swapped.
    pub const fn inverted(&self) -> Extent {
        Extent::new(self.lower_first, self.first, self.count)
    }
}

impl core::fmt::Display for Extent {
    /// The kernel's read-back line without its newline: `"%10u %10u %10u"`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:>10} {:>10} {:>10}",
            self.first, self.lower_first, self.count
        )
    }
}
