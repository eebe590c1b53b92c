//! Parsing map text exactly as `map_write` (kernel/user_namespace.c) does,
//! and printing it back as the kernel's `uid_m_show` does.
//!
//! The kernel's rules, in its order: the whole text in one write of fewer
//! than 4096 bytes; the text ends at its first NUL byte; lines split on
//! `\n`, one trailing newline allowed; per line, white space (the kernel's
//! `isspace`: `\t \n \v \f \r`, space and 0xA0) then a base-10 number
//! (`simple_strtoul`: no sign, no `0x`, digits beyond 32 bits wrap), which
//! for the first two fields must be followed by white space; then only
//! white space. Then the per-extent checks of [`IdMap::new`].

use crate::error::{MapError, Problem};
use crate::extent::Extent;
use crate::map::{Builder, IdMap};

/// The kernel refuses writes of `PAGE_SIZE` (4096) bytes or more.
pub const MAX_WRITE: usize = 4095;

/// The kernel's `isspace` (lib/ctype.c: `_S` is set for 9-13, 32 and 160).
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0xa0)
}

fn skip_spaces(l: &[u8], mut p: usize) -> usize {
    while p < l.len() && is_space(l[p]) {
        p += 1;
    }
    p
}

/// `simple_strtoul(s, &end, 10)` truncated to u32: digits only, wrapping.
fn strtoul(l: &[u8], mut p: usize) -> (u32, usize) {
    let mut v = 0u32;
    while p < l.len() && l[p].is_ascii_digit() {
        v = v.wrapping_mul(10).wrapping_add(u32::from(l[p] - b'0'));
        p += 1;
    }
    (v, p)
}

/// One line (without its `\n`) as `map_write` reads it.
fn parse_line(l: &[u8]) -> Result<Extent, Problem> {
    let mut p = skip_spaces(l, 0);
    let (first, q) = strtoul(l, p);
    if q >= l.len() || !is_space(l[q]) {
        return Err(Problem::BadField { field: 1 });
    }
    p = skip_spaces(l, q);
    let (lower_first, q) = strtoul(l, p);
    if q >= l.len() || !is_space(l[q]) {
        return Err(Problem::BadField { field: 2 });
    }
    p = skip_spaces(l, q);
    let (count, q) = strtoul(l, p);
    if q < l.len() && !is_space(l[q]) {
        return Err(Problem::BadField { field: 3 });
    }
    if skip_spaces(l, q) != l.len() {
        return Err(Problem::TrailingJunk);
    }
    Ok(Extent::new(first, lower_first, count))
}

impl IdMap {
    /// Parses map text as a write to `/proc/PID/uid_map` would: the same
    /// verdict and errno (always EINVAL here) as the kernel's `map_write`
    /// steps 2, 5, 6 and 7, with the line at fault and the problem.
    pub fn parse(text: impl AsRef<[u8]>) -> Result<IdMap, MapError> {
        let text = text.as_ref();
        // map_write: "Only allow < page size writes at the beginning of the file".
        if text.len() > MAX_WRITE {
            return Err(MapError::einval(None, Problem::TooLong { len: text.len() }));
        }
        // memdup_user_nul + strchr: the text ends at the first NUL.
        let text = match text.iter().position(|&b| b == 0) {
            Some(nul) => &text[..nul],
            None => text,
        };
        if text.is_empty() {
            return Err(MapError::einval(None, Problem::Empty));
        }
        let mut b = Builder::default();
        let mut rest = Some(text);
        let mut line = 0;
        while let Some(cur) = rest {
            line += 1;
            let (l, next) = match cur.iter().position(|&c| c == b'\n') {
                // "if (*next_line == '\0') next_line = NULL": one trailing newline.
                Some(nl) => (&cur[..nl], Some(&cur[nl + 1..]).filter(|n| !n.is_empty())),
                None => (cur, None),
            };
            let e = parse_line(l).map_err(|p| MapError::einval(Some(line), p))?;
            b.push(line, e, next.is_some())?;
            rest = next;
        }
        Ok(b.finish())
    }

    /// The text the kernel prints back for this map: `"%10u %10u %10u\n"`
    /// per extent, in [`IdMap::extents`] order.
    pub fn to_text(&self) -> String {
        self.to_string()
    }
}

impl core::fmt::Display for IdMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for e in self.extents() {
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

impl core::str::FromStr for IdMap {
    type Err = MapError;
    fn from_str(s: &str) -> Result<IdMap, MapError> {
        IdMap::parse(s)
    }
}
