//! Walks of the linked lists kept in the arena (undo entries, attachments,
//! wait queues): bounded, proof against cycles, and free of allocation.
//!
//! Any participant can write any link, so a list may be a cycle, or a
//! chain longer than any real list. A walk never allocates in proportion
//! to what it reads (a hostile list must not make a victim allocate
//! gigabytes, nor abort on a failed allocation): it follows links one at
//! a time, stops after [`MAX_LINKS`], and detects a cycle with Brent's
//! algorithm (a saved node compared with each new one, the save point
//! moved at powers of two), in time proportional to the list's tail and
//! loop, in constant memory.
//!
//! A list with a cycle is corrupt; [`cut_point`] finds the last node
//! before the first repeated one, so the list can be cut there (what a
//! complete list would have been), again without allocation.

/// The most links any walk follows: more processes, attachments or
/// sleepers than one object can have (a list this long is corrupt).
pub const MAX_LINKS: u64 = 1 << 20;

/// The nodes of a list from `head`, each node's link read by `next`
/// (`Some(0)` at the end of the list; `None` when the offset is no valid
/// node, which ends the list before it). Yields no node twice in a row
/// of `MAX_LINKS` (or its limit); after a cycle is detected it yields no
/// more (a node may have been yielded twice before that: at most the
/// loop's length again), and [`Chain::broken`] says so.
pub struct Chain<F> {
    cur: u64,
    next: F,
    limit: u64,
    steps: u64,
    mark: u64,
    power: u64,
    lam: u64,
    broken: bool,
}

impl<F: FnMut(u64) -> Option<u64>> Chain<F> {
    pub fn new(head: u64, next: F) -> Chain<F> {
        Chain::bounded(head, next, MAX_LINKS)
    }

    /// As [`Chain::new`], at most `limit` links instead of
    /// [`MAX_LINKS`] (a list whose nodes are bounded otherwise: a queue's
    /// messages, by the heap's blocks).
    pub fn bounded(head: u64, next: F, limit: u64) -> Chain<F> {
        Chain {
            cur: head,
            next,
            limit,
            steps: 0,
            mark: 0,
            power: 1,
            lam: 0,
            broken: false,
        }
    }

    /// Whether the walk ended on a cycle, a bad link or the limit.
    pub fn broken(&self) -> bool {
        self.broken
    }
}

impl<F: FnMut(u64) -> Option<u64>> Iterator for Chain<F> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.cur == 0 || self.broken {
            return None;
        }
        if self.steps >= self.limit || (self.steps > 0 && self.cur == self.mark) {
            self.broken = true;
            return None;
        }
        let here = self.cur;
        let Some(link) = (self.next)(here) else {
            // `here` is no node: the list ends before it.
            self.cur = 0;
            self.broken = true;
            return None;
        };
        self.steps += 1;
        // Brent: move the mark here at every power of two.
        self.lam += 1;
        if self.lam == self.power {
            self.mark = here;
            self.power = self.power.saturating_mul(2);
            self.lam = 0;
        }
        self.cur = link;
        Some(here)
    }
}

/// If the list from `head` loops, the node whose link closes the loop
/// (the last node before the first repeated one): cutting its link leaves
/// the list as far as it was sound. `None` when the list ends (at 0, at a
/// bad link or at [`MAX_LINKS`]). Constant memory, at most about three
/// walks of the list.
pub fn cut_point(head: u64, mut next: impl FnMut(u64) -> Option<u64>) -> Option<u64> {
    // The loop's length, as Brent's walk finds it.
    let (mut power, mut lam) = (1u64, 1u64);
    let mut tortoise = head;
    let mut hare = next(head)?;
    let mut steps = 0u64;
    while tortoise != hare {
        if hare == 0 || steps >= MAX_LINKS {
            return None;
        }
        if power == lam {
            tortoise = hare;
            power = power.saturating_mul(2);
            lam = 0;
        }
        hare = next(hare)?;
        lam += 1;
        steps += 1;
    }
    // The first node of the loop: two walkers `lam` apart from the head
    // meet there; the one behind was at its predecessor on the loop.
    let mut ahead = head;
    for _ in 0..lam {
        ahead = next(ahead)?;
    }
    let mut behind = head;
    let mut before_ahead = 0;
    while behind != ahead {
        behind = next(behind)?;
        before_ahead = ahead;
        ahead = next(ahead)?;
    }
    if before_ahead != 0 {
        return Some(before_ahead);
    }
    // The loop starts at the head: its closing node is the one whose link
    // is the head, `lam - 1` links on.
    let mut last = head;
    for _ in 0..lam.saturating_sub(1) {
        last = next(last)?;
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(links: &[(u64, u64)]) -> impl FnMut(u64) -> Option<u64> + '_ {
        move |n| links.iter().find(|&&(a, _)| a == n).map(|&(_, b)| b)
    }

    #[test]
    fn a_sound_list_is_walked_once() {
        let l = [(8, 16), (16, 24), (24, 0)];
        let mut c = Chain::new(8, list(&l));
        assert_eq!(c.by_ref().collect::<Vec<_>>(), vec![8, 16, 24]);
        assert!(!c.broken());
        assert_eq!(cut_point(8, list(&l)), None);
    }

    #[test]
    fn cycles_end_the_walk_and_are_cut_where_they_close() {
        for (links, head, closing) in [
            (vec![(8, 8)], 8, 8),
            (vec![(8, 16), (16, 8)], 8, 16),
            (vec![(8, 16), (16, 24), (24, 16)], 8, 24),
            (vec![(8, 16), (16, 24), (24, 32), (32, 40), (40, 24)], 8, 40),
        ] {
            let mut c = Chain::new(head, list(&links));
            let n = c.by_ref().count();
            assert!(c.broken(), "{links:?}");
            assert!(n <= 3 * links.len(), "{links:?}: {n} nodes");
            assert_eq!(cut_point(head, list(&links)), Some(closing), "{links:?}");
        }
    }

    #[test]
    fn a_bounded_walk_ends_at_its_limit() {
        let l = [(8, 16), (16, 24), (24, 0)];
        let mut c = Chain::bounded(8, list(&l), 2);
        assert_eq!(c.by_ref().collect::<Vec<_>>(), vec![8, 16]);
        assert!(c.broken());
        let mut c = Chain::bounded(8, list(&l), 3);
        assert_eq!(c.by_ref().count(), 3);
        assert!(!c.broken());
    }

    #[test]
    fn a_bad_link_ends_the_walk() {
        let l = [(8, 16)];
        let mut c = Chain::new(8, list(&l));
        assert_eq!(c.by_ref().collect::<Vec<_>>(), vec![8]);
        assert!(c.broken());
    }
}
