//! `/etc/subuid` and `/etc/subgid` with shadow-utils' rules (4.13,
//! lib/subordinateio.c `subordinate_parse`, lib/getulong.c): lines of
//! `owner:start:count`, owner by name or by uid, start and count read by
//! `strtoul(.., 0)` and required to fit 32 bits, lines of 1024 bytes or
//! more refused, entries of count 0 skipped when ranges are looked up.

use crate::extent::Extent;
use crate::map::IdMap;
use std::io;
use std::path::Path;

/// One valid line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubidEntry {
    /// 1-based line number in the file.
    pub line: usize,
    /// User name or numeric uid, as written.
    pub owner: String,
    pub start: u32,
    pub count: u32,
}

impl SubidEntry {
    /// One past the last id, in 64 bits (a range may end at 2^32).
    pub fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.count)
    }
}

/// A line shadow ignores, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub reason: &'static str,
}

/// A parsed subordinate-id file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubidFile {
    pub entries: Vec<SubidEntry>,
    pub bad_lines: Vec<BadLine>,
}

/// shadow's line buffer: `strlen(line) >= sizeof rangebuf` fails.
const MAX_LINE: usize = 1024;

/// The login.defs defaults useradd allocates from: SUB_UID_MIN, SUB_UID_MAX,
/// SUB_UID_COUNT (the same for gids).
pub const SUB_ID_MIN: u32 = 100_000;
pub const SUB_ID_MAX: u32 = 600_100_000;
pub const SUB_ID_COUNT: u32 = 65_536;

/// `getulong`: `strtoul(s, &end, 0)`, the whole string consumed, no ERANGE,
/// and the value representable as an unsigned int.
fn getulong(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let mut p = 0;
    // strtoul skips isspace (C locale) and takes one optional sign.
    while p < b.len() && matches!(b[p], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        p += 1;
    }
    let mut negative = false;
    if p < b.len() && (b[p] == b'+' || b[p] == b'-') {
        negative = b[p] == b'-';
        p += 1;
    }
    let (radix, digits_at) = if b[p..].len() >= 3
        && b[p] == b'0'
        && (b[p + 1] | 0x20) == b'x'
        && b[p + 2].is_ascii_hexdigit()
    {
        (16, p + 2)
    } else if b[p..].first() == Some(&b'0') {
        (8, p)
    } else {
        (10, p)
    };
    let digits = &s[digits_at..];
    if digits.is_empty() || !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    let v = u64::from_str_radix(digits, radix).ok()?; // ERANGE
    let v = if negative { v.wrapping_neg() } else { v };
    u32::try_from(v).ok()
}

impl SubidFile {
    /// Parses the text of a subuid or subgid file. Lines shadow would not
    /// parse are kept in `bad_lines` with their number and reason; shadow
    /// ignores them too.
    pub fn parse(text: &str) -> SubidFile {
        let mut f = SubidFile::default();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let bad = |reason| BadLine { line: n, reason };
            if line.len() >= MAX_LINE {
                f.bad_lines.push(bad("line of 1024 bytes or more"));
                continue;
            }
            // subordinate_parse: the first three colon-separated fields;
            // text after a third colon is ignored, as shadow ignores it.
            let mut fields = line.splitn(4, ':');
            let (Some(owner), Some(start), Some(count)) =
                (fields.next(), fields.next(), fields.next())
            else {
                f.bad_lines.push(bad("not owner:start:count"));
                continue;
            };
            if owner.is_empty() || start.is_empty() || count.is_empty() {
                f.bad_lines.push(bad("an empty field"));
                continue;
            }
            let count = count.split(':').next().unwrap_or(count);
            let Some(start) = getulong(start) else {
                f.bad_lines.push(bad("start is not a number below 2^32"));
                continue;
            };
            let Some(count) = getulong(count) else {
                f.bad_lines.push(bad("count is not a number below 2^32"));
                continue;
            };
            f.entries.push(SubidEntry {
                line: n,
                owner: owner.to_string(),
                start,
                count,
            });
        }
        f
    }

    /// Reads and parses `path` (`/etc/subuid`, `/etc/subgid`).
    pub fn read(path: impl AsRef<Path>) -> io::Result<SubidFile> {
        Ok(SubidFile::parse(&std::fs::read_to_string(path)?))
    }

    /// The entries of the user `name` with uid `uid` (an owner field equal
    /// to either), count-0 entries skipped, in file order.
    pub fn ranges_for<'a>(
        &'a self,
        name: &'a str,
        uid: u32,
    ) -> impl Iterator<Item = &'a SubidEntry> + 'a {
        // find_range compares the owner with the name, then with the uid
        // printed as "%lu".
        let uid = uid.to_string();
        self.entries
            .iter()
            .filter(move |e| e.count > 0 && (e.owner == name || e.owner == uid))
    }

    /// The lowest start in `[min, max]` of `count` ids that overlap no entry
    /// of any owner and end at or before `max` (useradd's
    /// `find_free_range`). `None` when there is no room.
    pub fn find_free(&self, count: u32, min: u32, max: u32) -> Option<u32> {
        if count == 0 || min > max {
            return None;
        }
        let mut taken: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|e| e.count > 0)
            .map(|e| (u64::from(e.start), e.end()))
            .collect();
        taken.sort_unstable();
        let mut low = u64::from(min);
        let need = u64::from(count);
        for (s, e) in taken {
            if e <= low {
                continue;
            }
            if s >= low + need {
                break;
            }
            low = e;
        }
        (low + need - 1 <= u64::from(max)).then_some(low as u32)
    }

    /// Whether newuidmap would let user `name` (uid `uid`, whose own id on
    /// this side is `own_id`) write `map`: each extent either maps just
    /// `own_id` (count 1) or has its lower range inside one of the user's
    /// entries. On refusal, the 1-based extent and a message.
    pub fn allows(
        &self,
        name: &str,
        uid: u32,
        own_id: u32,
        map: &IdMap,
    ) -> Result<(), (usize, String)> {
        for (i, e) in map.extents_written().iter().enumerate() {
            if e.count == 1 && e.lower_first == own_id {
                continue;
            }
            let lo = u64::from(e.lower_first);
            let hi = lo + u64::from(e.count);
            if !self.covers(name, uid, lo, hi) {
                return Err((
                    i + 1,
                    format!(
                        "lower range {}-{} is not inside one subordinate range of {name}",
                        lo,
                        hi - 1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// shadow's `have_range`: `[lo, hi)` is covered by the user's entries,
    /// one after another if need be.
    fn covers(&self, name: &str, uid: u32, mut lo: u64, hi: u64) -> bool {
        while let Some(r) = self
            .ranges_for(name, uid)
            .find(|r| u64::from(r.start) <= lo && lo < r.end())
        {
            if r.end() >= hi {
                return true;
            }
            lo = r.end();
        }
        false
    }

    /// A map giving user `name` (uid `uid`) all its ranges, in file order,
    /// packed from inside id `first` on, as `unshare --map-subids` would
    /// (which takes only the first range; this takes them all, up to 340).
    pub fn map_all(&self, name: &str, uid: u32, first: u32) -> Result<IdMap, crate::MapError> {
        let mut next = u64::from(first);
        let mut v = Vec::new();
        for r in self.ranges_for(name, uid) {
            v.push(Extent::new(next as u32, r.start, r.count));
            next += u64::from(r.count);
        }
        IdMap::new(&v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "alice:100000:65536\n\
                        1000:165536:65536\n\
                        bob:0x40000:0\n\
                        broken line\n\
                        carol:-1:5\n\
                        dave:231072:65536:extra\n\
                        \n\
                        eve:010:8\n";

    #[test]
    fn shadow_rules() {
        let f = SubidFile::parse(TEXT);
        let owners: Vec<_> = f
            .entries
            .iter()
            .map(|e| (e.owner.as_str(), e.start, e.count))
            .collect();
        assert_eq!(
            owners,
            [
                ("alice", 100000, 65536),
                ("1000", 165536, 65536),
                ("bob", 0x40000, 0),
                ("dave", 231072, 65536),
                ("eve", 8, 8),
            ]
        );
        let bad: Vec<_> = f.bad_lines.iter().map(|b| b.line).collect();
        assert_eq!(bad, [4, 5, 7]);
        // By name or by uid; count 0 skipped.
        let alice: Vec<_> = f.ranges_for("alice", 1000).map(|e| e.start).collect();
        assert_eq!(alice, [100000, 165536]);
        assert_eq!(f.ranges_for("bob", 7).count(), 0);
    }

    #[test]
    fn long_lines_refused() {
        let line = format!("{}:1:1", "x".repeat(1020));
        assert_eq!(SubidFile::parse(&line).bad_lines.len(), 1);
        let line = format!("{}:1:1", "x".repeat(1018));
        assert_eq!(SubidFile::parse(&line).entries.len(), 1);
    }

    #[test]
    fn getulong_like_strtoul_base_0() {
        assert_eq!(getulong("10"), Some(10));
        assert_eq!(getulong("0x10"), Some(16));
        assert_eq!(getulong("010"), Some(8));
        assert_eq!(getulong(" +7"), Some(7));
        assert_eq!(getulong("-0"), Some(0));
        assert_eq!(getulong("-1"), None);
        assert_eq!(getulong("4294967295"), Some(u32::MAX));
        assert_eq!(getulong("4294967296"), None);
        assert_eq!(getulong("08"), None);
        assert_eq!(getulong("12x"), None);
        assert_eq!(getulong(""), None);
    }

    #[test]
    fn free_range() {
        let f = SubidFile::parse("a:100000:65536\nb:165536:65536\nc:400000:10\n");
        assert_eq!(f.find_free(65536, SUB_ID_MIN, SUB_ID_MAX), Some(231072));
        assert_eq!(f.find_free(10, 0, SUB_ID_MAX), Some(0));
        assert_eq!(f.find_free(200000, SUB_ID_MIN, SUB_ID_MAX), Some(400010));
        assert_eq!(f.find_free(10, 100000, 100009), None);
    }

    #[test]
    fn newuidmap_check() {
        let f = SubidFile::parse("alice:100000:65536\n");
        let ok = IdMap::parse("0 1000 1\n1 100000 65536\n").unwrap();
        assert_eq!(f.allows("alice", 1000, 1000, &ok), Ok(()));
        let bad = IdMap::parse("0 1000 1\n1 100000 65537\n").unwrap();
        assert_eq!(f.allows("alice", 1000, 1000, &bad).unwrap_err().0, 2);
        // Adjacent entries cover a range together, as have_range allows.
        let two = SubidFile::parse("alice:100000:10\n1000:100010:10\n");
        let map = IdMap::parse("0 100000 20\n").unwrap();
        assert_eq!(two.allows("alice", 1000, 1000, &map), Ok(()));
    }
}
