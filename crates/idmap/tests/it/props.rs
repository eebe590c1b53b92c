//! Property tests: every lookup of `IdMap` (inline and indexed forms) and
//! both baselines agree with a naive model over the extents as written.

use ipcns_idmap::baseline::{KernelSortedMap, LinearMap};
use ipcns_idmap::{Extent, IdMap, Side};
use proptest::prelude::*;

/// The model: scan every extent, u64 arithmetic, no cleverness.
fn model(v: &[Extent], side: Side, id: u32, count: u32) -> Option<u32> {
    if count == 0 {
        return None;
    }
    let (id, last) = (u64::from(id), u64::from(id) + u64::from(count) - 1);
    v.iter().find_map(|e| {
        let (from, to) = match side {
            Side::Upper => (e.first, e.lower_first),
            Side::Lower => (e.lower_first, e.first),
        };
        let (s, end) = (u64::from(from), u64::from(from) + u64::from(e.count));
        (s <= id && last < end).then(|| (u64::from(to) + (id - s)) as u32)
    })
}

/// Valid extents: disjoint on both sides, from random gaps and lengths at
/// a random scale, the lower side laid out in a shuffled order.
fn extents() -> impl Strategy<Value = Vec<Extent>> {
    prop::sample::select(vec![1u32, 3, 100, 70_000, 5_000_000])
        .prop_flat_map(|scale| {
            (
                prop::collection::vec((0..=scale, 1..=scale), 1..=340),
                any::<u64>(),
            )
        })
        .prop_map(|(parts, seed)| {
            let mut pos = 0u32;
            let mut v: Vec<Extent> = parts
                .iter()
                .map(|&(gap, len)| {
                    pos += gap;
                    let e = Extent::new(pos, 0, len);
                    pos += len;
                    e
                })
                .collect();
            let n = v.len();
            let mut order: Vec<usize> = (0..n).collect();
            let mut s = seed | 1;
            for i in (1..n).rev() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                order.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let mut next = ((seed >> 32) % 1_000_000_000) as u32;
            for &i in &order {
                v[i].lower_first = next;
                next += v[i].count + (seed % 3) as u32;
            }
            // Shuffle the written order too.
            for i in (1..n).rev() {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                v.swap(i, (s % (i as u64 + 1)) as usize);
            }
            v
        })
}

fn probes(v: &[Extent]) -> Vec<u32> {
    let mut ids = vec![0, 1, u32::MAX, u32::MAX - 1];
    for e in v {
        for s in [e.first, e.lower_first] {
            let last = s + (e.count - 1);
            ids.extend([s, last, s.wrapping_sub(1), last.wrapping_add(1)]);
        }
    }
    ids
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn lookups_agree_with_the_model(v in extents(), extra in prop::collection::vec(any::<u32>(), 16)) {
        let map = IdMap::new(&v).unwrap();
        let lin = LinearMap::new(&map);
        let ker = KernelSortedMap::new(&map);
        prop_assert_eq!(map.is_sorted_form(), v.len() > 5);
        for id in probes(&v).into_iter().chain(extra) {
            let down = model(&v, Side::Upper, id, 1);
            let up = model(&v, Side::Lower, id, 1);
            prop_assert_eq!(map.map_down(id), down, "down {}", id);
            prop_assert_eq!(map.map_up(id), up, "up {}", id);
            prop_assert_eq!(lin.map_down(id), down);
            prop_assert_eq!(lin.map_up(id), up);
            prop_assert_eq!(ker.map_down(id), down);
            prop_assert_eq!(ker.map_up(id), up);
            for count in [0u32, 1, 2, 7, 1000, u32::MAX] {
                prop_assert_eq!(map.map_range_down(id, count), model(&v, Side::Upper, id, count));
                prop_assert_eq!(map.map_range_up(id, count), model(&v, Side::Lower, id, count));
            }
        }
    }

    #[test]
    fn text_round_trips(v in extents()) {
        let map = IdMap::new(&v).unwrap();
        // The kernel's read-back text parses back to the same map, and so
        // does the compact text (when it fits a write).
        prop_assert_eq!(IdMap::parse(map.to_text().as_bytes()).ok().map(|m| m.to_text()).or(Some(map.to_text())), Some(map.to_text()));
        let compact = map.to_compact_text();
        if compact.len() <= ipcns_idmap::MAX_WRITE {
            prop_assert_eq!(IdMap::parse(&compact).unwrap(), IdMap::new(&v).unwrap());
        }
        prop_assert_eq!(map.extents_written(), &v[..]);
    }

    #[test]
    fn inversion_swaps_directions(v in extents(), ids in prop::collection::vec(any::<u32>(), 8)) {
        let map = IdMap::new(&v).unwrap();
        let inv = map.inverted();
        for id in probes(&v).into_iter().chain(ids) {
            prop_assert_eq!(inv.map_down(id), map.map_up(id));
            prop_assert_eq!(inv.map_up(id), map.map_down(id));
        }
    }

    #[test]
    fn composition_and_splitting(parent in extents(), child in extents()) {
        let parent = IdMap::new(&parent).unwrap();
        let child = IdMap::new(&child).unwrap();
        match child.compose(&parent) {
            Ok(c) => {
                for e in child.extents_written() {
                    for id in [e.first, e.first + (e.count - 1)] {
                        prop_assert_eq!(c.map_down(id), child.map_down(id).and_then(|x| parent.map_down(x)));
                    }
                }
            }
            Err(err) => prop_assert_eq!(err.errno, ipcns_idmap::Errno::EPERM),
        }
        // A split map composes whenever every lower id is mapped by the
        // parent, and translates every id as the two maps in sequence.
        if let Ok(split) = child.split_for_parent(&parent) {
            let c = split.compose(&parent).unwrap();
            for e in child.extents_written() {
                for id in [e.first, e.first + (e.count - 1), e.first + e.count / 2] {
                    prop_assert_eq!(c.map_down(id), child.map_down(id).and_then(|x| parent.map_down(x)));
                }
            }
        }
    }
}

#[test]
fn seed_003_example_as_text() {
    let text = "999 999 1\n1001 1001 1\n0 1000000 999\n1000 1001000 1\n1002 1001002 999998998\n";
    let map = IdMap::parse(text).unwrap();
    assert!(!map.is_sorted_form());
    assert_eq!(map.map_down(999), Some(999));
    assert_eq!(map.map_down(1000), Some(1_001_000));
    assert_eq!(map.map_down(5), Some(1_000_005));
    assert_eq!(map.map_up(1_000_999), None);
    assert_eq!(map.map_up_or_overflow(1_000_999), 65534);
}

#[test]
fn error_messages_name_line_and_problem() {
    let cases: &[(&str, &str)] = &[
        (
            "0 0 1\n1 1 1\n5 0 3\n",
            "line 3: overlaps line 1 in the lower range",
        ),
        (
            "0 0 1\n0 9 1\n",
            "line 2: overlaps line 1 in the upper range",
        ),
        ("0 0 0\n", "line 1: count is 0"),
        (
            "4294967295 0 1\n",
            "line 1: the upper start is 4294967295, which can never be mapped",
        ),
        (
            "0 4294967294 2\n",
            "line 1: the lower range wraps past 4294967295 (the last usable id is 4294967294)",
        ),
        (
            "0 -1 1\n",
            "line 1: field 2 (lower_first) must be a base-10 number without sign, followed by white space",
        ),
        ("0 0 1 2\n", "line 1: junk after the third number"),
        (
            "0 0 1\n\n",
            "line 2: field 1 (first) must be a base-10 number without sign, followed by white space",
        ),
        ("", "map has no extent"),
    ];
    for (text, msg) in cases {
        let e = IdMap::parse(text).unwrap_err();
        assert_eq!(e.errno, ipcns_idmap::Errno::EINVAL);
        assert_eq!(&e.to_string(), msg, "{text:?}");
    }
    let long = format!("0 0 1{}\n", " ".repeat(4091));
    assert_eq!(
        IdMap::parse(&long).unwrap_err().to_string(),
        "map is 4097 bytes; the kernel accepts at most 4095 bytes in one write"
    );
    let v: String = (0..341).map(|i| format!("{i} {} 1\n", 1000 + i)).collect();
    assert_eq!(
        IdMap::parse(&v).unwrap_err().to_string(),
        "line 341: more than 340 extents"
    );
    let v: String = (0..340).map(|i| format!("{i} {} 1\n", 1000 + i)).collect();
    assert_eq!(IdMap::parse(&v).unwrap().len(), 340);
}
