//! Composition with the parent namespace's map: the translation `map_write`
//! applies to lower ids (step 9 of reference/idmap.md), and, beyond the
//! kernel, splitting extents at the parent's boundaries so that a map whose
//! lower ranges straddle parent extents becomes writable.

use crate::MAX_EXTENTS;
use crate::error::{Errno, MapError, Problem};
use crate::extent::{Extent, Side};
use crate::map::IdMap;

impl IdMap {
    /// The map as the kernel installs it when written into a child of the
    /// namespace whose map is `parent`: every lower range translated with
    /// `map_id_range_down(parent, lower_first, count)`, in written order.
    ///
    /// EPERM when a lower range is not inside one extent of `parent`
    /// (map_write: "Fail if we can not map the specified extent to the
    /// kernel global id space"); the line is the extent's written position.
    pub fn compose(&self, parent: &IdMap) -> Result<IdMap, MapError> {
        let mut out = Vec::with_capacity(self.len());
        for (i, e) in self.extents_written().iter().enumerate() {
            let Some(lower) = parent.map_range_down(e.lower_first, e.count) else {
                return Err(MapError {
                    errno: Errno::EPERM,
                    line: Some(i + 1),
                    problem: Problem::NotInParent {
                        lower_first: e.lower_first,
                        count: e.count,
                    },
                });
            };
            out.push(Extent::new(e.first, lower, e.count));
        }
        // The parent's upper ranges are disjoint and each maps one-to-one,
        // so translated lower ranges stay disjoint and in bounds.
        Ok(IdMap::new(&out).expect("translation through a valid parent keeps a map valid"))
    }

    /// This map with every extent cut where its lower range crosses from one
    /// extent of `parent` into the next, so that [`IdMap::compose`] (and
    /// the kernel) accept it. What podman does by hand for nested
    /// namespaces.
    ///
    /// EPERM (as the kernel would give) when part of a lower range is not
    /// mapped by `parent` at all; EINVAL when the pieces number more than 340.
    pub fn split_for_parent(&self, parent: &IdMap) -> Result<IdMap, MapError> {
        let mut out = Vec::new();
        for (i, e) in self.extents_written().iter().enumerate() {
            let mut done = 0u32;
            while done < e.count {
                let lo = e.lower_first + done;
                let Some(p) = parent.find(Side::Upper, lo) else {
                    return Err(MapError {
                        errno: Errno::EPERM,
                        line: Some(i + 1),
                        problem: Problem::NotInParent {
                            lower_first: lo,
                            count: e.count - done,
                        },
                    });
                };
                let room = p.count - (lo - p.first);
                let piece = room.min(e.count - done);
                out.push(Extent::new(e.first + done, lo, piece));
                done += piece;
            }
        }
        if out.len() > MAX_EXTENTS {
            return Err(MapError::einval(
                None,
                Problem::SplitTooMany { extents: out.len() },
            ));
        }
        // Pieces of disjoint extents are disjoint.
        IdMap::new(&out)
    }
}
