//! Generators of map texts, valid and adversarial, for the kernel
//! differential tests.

use crate::support::Rng;
use ipcns_idmap::Extent;

/// `n` extents, pairwise disjoint on both sides, in random order; ids from a
/// random scale (small ids, 32-bit wide, or crowded against 4294967295).
pub fn random_extents(rng: &mut Rng, n: usize) -> Vec<Extent> {
    let max_count: u64 = *rng.pick(&[1, 10, 1000, 100_000, 1 << 24, 1 << 28]);
    // Keep the total below 2^32 - 1 so that every extent fits.
    let max_count = max_count.min((u64::from(u32::MAX) - 1) / n.max(1) as u64);
    let counts: Vec<u64> = (0..n).map(|_| 1 + rng.below(max_count)).collect();
    let upper = place(rng, &counts);
    let lower = place(rng, &counts);
    let mut v: Vec<Extent> = (0..n)
        .map(|i| Extent::new(upper[i] as u32, lower[i] as u32, counts[i] as u32))
        .collect();
    shuffle(rng, &mut v);
    v
}

/// Starts for ranges of the given lengths, disjoint, below 2^32 - 1, in a
/// random order of placement.
fn place(rng: &mut Rng, counts: &[u64]) -> Vec<u64> {
    let limit: u64 = u64::from(u32::MAX); // exclusive end: id 4294967295 is never usable
    let total: u64 = counts.iter().sum();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    shuffle(rng, &mut order);
    let room = limit.saturating_sub(total);
    // Spread the free room over the gaps; sometimes pack everything at the top.
    let max_gap = match rng.below(4) {
        0 => 0,
        1 => 3,
        _ => room / (counts.len() as u64 + 1),
    };
    let mut starts = vec![0u64; counts.len()];
    let mut cur = if rng.chance(5) {
        room.saturating_sub(max_gap * counts.len() as u64)
    } else {
        0
    };
    for &i in &order {
        cur += if max_gap > 0 {
            rng.below(max_gap + 1)
        } else {
            0
        };
        starts[i] = cur;
        cur += counts[i];
    }
    starts
}

pub fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

const SEPS: &[&[u8]] = &[
    b" ", b"  ", b"\t", b"\x0b", b"\x0c", b"\r", b"\xa0", b" \t ",
];

fn sep(rng: &mut Rng) -> &'static [u8] {
    let i = rng.below(SEPS.len() as u64) as usize;
    SEPS[i]
}

fn number(rng: &mut Rng, v: u32, out: &mut Vec<u8>) {
    match rng.below(12) {
        // Leading zeros.
        0 => out.extend_from_slice(format!("000{v}").as_bytes()),
        // Beyond 32 bits: the kernel truncates.
        1 => out.extend_from_slice(
            format!("{}", u64::from(v) + (rng.below(1000) + 1) * (1u64 << 32)).as_bytes(),
        ),
        // Beyond 64 bits: still truncated (wrapping in u64 first).
        2 => out.extend_from_slice(
            format!(
                "{}",
                u128::from(v) + (u128::from(rng.below(1000)) + 1) * (1u128 << 64)
            )
            .as_bytes(),
        ),
        _ => out.extend_from_slice(v.to_string().as_bytes()),
    }
}

/// Renders extents as map text, with varied but valid white space.
pub fn render(rng: &mut Rng, v: &[Extent], fancy: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, e) in v.iter().enumerate() {
        if fancy && rng.chance(4) {
            out.extend_from_slice(sep(rng));
        }
        for (k, x) in [e.first, e.lower_first, e.count].into_iter().enumerate() {
            if fancy {
                number(rng, x, &mut out);
            } else {
                out.extend_from_slice(x.to_string().as_bytes());
            }
            if k < 2 {
                out.extend_from_slice(if fancy { sep(rng) } else { b" " });
            }
        }
        if fancy && rng.chance(4) {
            out.extend_from_slice(sep(rng));
        }
        if i + 1 < v.len() || !fancy || !rng.chance(4) {
            out.push(b'\n');
        }
    }
    out
}

/// A mutation that may make the extents invalid.
pub fn mutate_extents(rng: &mut Rng, v: &mut [Extent]) -> &'static str {
    let n = v.len();
    let i = rng.below(n as u64) as usize;
    let j = rng.below(n as u64) as usize;
    match rng.below(10) {
        0 => {
            v[i].first = v[j]
                .first
                .wrapping_add(rng.below(u64::from(v[j].count) + 1) as u32);
            "upper start moved into another extent"
        }
        1 => {
            v[i].lower_first = v[j]
                .lower_first
                .wrapping_add(rng.below(u64::from(v[j].count) + 1) as u32);
            "lower start moved into another extent"
        }
        2 => {
            v[i].count = 0;
            "count 0"
        }
        3 => {
            v[i].first = u32::MAX;
            "first 4294967295"
        }
        4 => {
            v[i].lower_first = u32::MAX;
            "lower 4294967295"
        }
        5 => {
            v[i].count = (u32::MAX - v[i].first).wrapping_add(rng.below(3) as u32);
            "upper end at the top"
        }
        6 => {
            v[i].count = (u32::MAX - v[i].lower_first).wrapping_add(rng.below(3) as u32);
            "lower end at the top"
        }
        7 => {
            v[i].count = v[i].count.wrapping_add(rng.below(1 << 20) as u32);
            "count grown"
        }
        8 => {
            v[i].first = v[i].first.wrapping_sub(rng.below(1 << 20) as u32);
            "upper start moved down"
        }
        _ => {
            v[i].count = u32::MAX - rng.below(4) as u32;
            "huge count"
        }
    }
}

/// A syntax mutation of rendered text.
pub fn mutate_text(rng: &mut Rng, t: &mut Vec<u8>) -> &'static str {
    let at = if t.is_empty() {
        0
    } else {
        rng.below(t.len() as u64 + 1) as usize
    };
    let insert = |t: &mut Vec<u8>, s: &[u8]| {
        t.splice(at..at, s.iter().copied());
    };
    match rng.below(16) {
        0 => {
            insert(t, b"+");
            "plus sign"
        }
        1 => {
            insert(t, b"-");
            "minus sign"
        }
        2 => {
            insert(t, b"0x1");
            "hex"
        }
        3 => {
            insert(t, b"x");
            "junk byte"
        }
        4 => {
            insert(t, b"\n");
            "extra newline"
        }
        5 => {
            t.push(b'\n');
            "extra trailing newline"
        }
        6 => {
            t.insert(0, b'\n');
            "leading empty line"
        }
        7 => {
            insert(t, b"\0");
            "NUL byte"
        }
        8 => {
            t.extend_from_slice(b"\0junk");
            "NUL then junk"
        }
        9 => {
            if !t.is_empty() {
                t.remove(at.min(t.len() - 1));
            }
            "byte removed"
        }
        10 => {
            insert(t, b" 7");
            "extra field"
        }
        11 => {
            insert(t, b"#c");
            "comment"
        }
        12 => {
            insert(t, b"1e3");
            "exponent"
        }
        13 => {
            insert(t, b"\xc2\xa0");
            "UTF-8 no-break space"
        }
        14 => {
            insert(t, b"\xa0");
            "Latin-1 no-break space"
        }
        _ => {
            insert(t, b"99999999999999999999999");
            "huge number"
        }
    }
}

/// `n` extents of one id each, with small numbers so that 341 fit under
/// 4096 bytes.
pub fn many_small(rng: &mut Rng, n: usize) -> Vec<Extent> {
    let mut v: Vec<Extent> = (0..n as u32)
        .map(|i| Extent::new(i * 2, 1000 + i, 1))
        .collect();
    shuffle(rng, &mut v);
    v
}

/// Text padded with trailing spaces on its first line to exactly `len` bytes.
pub fn padded(text: &[u8], len: usize) -> Vec<u8> {
    let nl = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    let mut t = text[..nl].to_vec();
    t.resize(t.len() + len.saturating_sub(text.len()), b' ');
    t.extend_from_slice(&text[nl..]);
    t
}

/// Either many one-id extents or random ones.
pub fn many_or_random(rng: &mut Rng, n: usize) -> Vec<Extent> {
    if rng.chance(3) {
        many_small(rng, n)
    } else {
        random_extents(rng, n)
    }
}
