//! Numbers as the C library and util-linux read them: `strtoul(3)` /
//! `strtoimax(3)` (leading white space, a sign, base 0's `0x` and `0`
//! prefixes, ERANGE on overflow) and util-linux's lib/strutils.c
//! (`strtos32_or_err`, `parse_size` with its K/M/G... suffixes).

/// What a `strto*` call returns: the value, how many bytes it consumed
/// (`end - str`), and whether it set `errno = ERANGE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strto<T> {
    pub value: T,
    pub end: usize,
    pub erange: bool,
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The sign, magnitude (saturated past u64), digits' end, and overflow of
/// glibc's `____strtoul_l_internal`.
fn scan(b: &[u8], base: u32) -> (bool, u128, usize, bool) {
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let mut base = base;
    let hex_prefix = b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit());
    if (base == 0 || base == 16) && hex_prefix {
        i += 2;
        base = 16;
    } else if base == 0 {
        base = if b.get(i) == Some(&b'0') { 8 } else { 10 };
    }
    let start = i;
    let mut mag: u128 = 0;
    let mut over = false;
    while i < b.len() {
        let Some(d) = (b[i] as char).to_digit(base) else {
            break;
        };
        mag = mag * u128::from(base) + u128::from(d);
        if mag > u128::from(u64::MAX) {
            over = true;
            mag = u128::from(u64::MAX) + 1;
        }
        i += 1;
    }
    if i == start {
        // No digits: nothing is consumed (end = str).
        return (false, 0, 0, false);
    }
    (neg, mag, i, over)
}

/// `strtoul(s, &end, base)` (64-bit `unsigned long`).
pub fn strtoul(s: &[u8], base: u32) -> Strto<u64> {
    let (neg, mag, end, over) = scan(s, base);
    if over {
        return Strto {
            value: u64::MAX,
            end,
            erange: true,
        };
    }
    let m = mag as u64;
    Strto {
        value: if neg { m.wrapping_neg() } else { m },
        end,
        erange: false,
    }
}

/// `strtoimax(s, &end, base)`.
pub fn strtoimax(s: &[u8], base: u32) -> Strto<i64> {
    let (neg, mag, end, over) = scan(s, base);
    let limit = if neg { 1u128 << 63 } else { (1u128 << 63) - 1 };
    if over || mag > limit {
        return Strto {
            value: if neg { i64::MIN } else { i64::MAX },
            end,
            erange: true,
        };
    }
    Strto {
        value: if neg {
            (mag as i128).wrapping_neg() as i64
        } else {
            mag as i64
        },
        end,
        erange: false,
    }
}

/// Why a util-linux conversion failed: with `errno` set (printed with
/// `err`) or not (printed with `errx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    /// No errno: the text is not a number.
    Invalid,
    /// errno = this.
    Errno(i32),
}

/// `strtos32_or_err` without the exit: lib/strutils.c `strtos64_or_err`
/// (base 10, the whole string) narrowed to 32 bits with ERANGE.
pub fn strtos32(s: &[u8]) -> Result<i32, NumError> {
    if s.is_empty() {
        return Err(NumError::Invalid);
    }
    let r = strtoimax(s, 10);
    if r.erange {
        return Err(NumError::Errno(libc::ERANGE));
    }
    if r.end == 0 || r.end != s.len() {
        return Err(NumError::Invalid);
    }
    i32::try_from(r.value).map_err(|_| NumError::Errno(libc::ERANGE))
}

/// `do_scale_by_power`: `x * base^power`, ERANGE on overflow.
fn scale(x: u64, base: u64, power: u32) -> Result<u64, NumError> {
    let mut x = x;
    for _ in 0..power {
        x = x.checked_mul(base).ok_or(NumError::Errno(libc::ERANGE))?;
    }
    Ok(x)
}

/// lib/strutils.c `parse_size`: a number (base 0) with an optional
/// suffix K, M, G, T, P, E, Z, Y (or lower case; powers of 1024), `KiB`
/// (1024) or `KB` (1000), and an optional decimal fraction before it
/// (`1.5M`).
pub fn parse_size(b: &[u8]) -> Result<u64, NumError> {
    const SUF: &[u8] = b"KMGTPEZY";
    const SUF2: &[u8] = b"kmgtpezy";
    if b.is_empty() {
        return Err(NumError::Invalid);
    }
    let first = b.iter().position(|&c| !is_c_space(c)).unwrap_or(b.len());
    if b.get(first) == Some(&b'-') {
        return Err(NumError::Invalid);
    }
    let r = strtoul(b, 0);
    if r.end == 0 {
        return Err(NumError::Invalid);
    }
    if r.erange {
        return Err(NumError::Errno(libc::ERANGE));
    }
    let x = r.value;
    let mut p = r.end;
    if p == b.len() {
        return Ok(x);
    }
    let mut frac: u64 = 0;
    let mut frac_zeros = 0u32;
    let mut base = 1024u64;
    loop {
        let at = |k: usize| b.get(p + k).copied().unwrap_or(0);
        if at(1) == b'i' && (at(2) == b'B' || at(2) == b'b') && at(3) == 0 {
            base = 1024;
        } else if (at(1) == b'B' || at(1) == b'b') && at(2) == 0 {
            base = 1000;
        } else if at(1) != 0 {
            // A decimal point (the C locale's "."), once.
            if frac == 0 && at(0) == b'.' {
                p += 1;
                while b.get(p) == Some(&b'0') {
                    frac_zeros += 1;
                    p += 1;
                }
                if b.get(p).is_some_and(u8::is_ascii_digit) {
                    let f = strtoul(&b[p..], 0);
                    if f.end == 0 {
                        return Err(NumError::Invalid);
                    }
                    if f.erange {
                        return Err(NumError::Errno(libc::ERANGE));
                    }
                    frac = f.value;
                    p += f.end;
                }
                if frac != 0 && p >= b.len() {
                    return Err(NumError::Invalid);
                }
                continue;
            }
            return Err(NumError::Invalid);
        }
        break;
    }
    let c = b.get(p).copied().unwrap_or(0);
    let pwr = match SUF.iter().position(|&x| x == c) {
        Some(i) => i as u32 + 1,
        None => match SUF2.iter().position(|&x| x == c) {
            Some(i) => i as u32 + 1,
            None => return Err(NumError::Invalid),
        },
    };
    let mut x = scale(x, base, pwr)?;
    if frac != 0 {
        let frac_base = scale(1, base, pwr).unwrap_or(0);
        let mut frac_div: u64 = 10;
        while frac_div < frac {
            if frac_div <= u64::MAX / 10 {
                frac_div *= 10;
            } else {
                frac_div = u64::MAX;
                break;
            }
        }
        for _ in 0..frac_zeros {
            if frac_div <= u64::MAX / 10 {
                frac_div *= 10;
            } else {
                frac_div = u64::MAX;
            }
        }
        let mut frac_poz: u64 = 1;
        while frac != 0 {
            let seg = frac % 10;
            let seg_div = frac_div / frac_poz;
            frac /= 10;
            frac_poz = frac_poz.saturating_mul(10);
            if seg != 0 && seg_div / seg != 0 {
                x = x.wrapping_add(frac_base / (seg_div / seg));
            }
        }
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strto_like_glibc() {
        assert_eq!(strtoul(b" -1", 0).value, u64::MAX);
        assert_eq!(strtoul(b"0x1f", 0).value, 31);
        assert_eq!(strtoul(b"010", 0).value, 8);
        assert_eq!(strtoul(b"0x", 0).end, 1);
        assert_eq!(strtoul(b"zz", 0).end, 0);
        assert!(strtoul(b"99999999999999999999", 10).erange);
        assert_eq!(strtoimax(b"-9223372036854775808", 10).value, i64::MIN);
        assert!(strtoimax(b"9223372036854775808", 10).erange);
        assert_eq!(strtoul(b"9", 8).end, 0);
    }

    #[test]
    fn strtos32_rules() {
        assert_eq!(strtos32(b"-5"), Ok(-5));
        assert_eq!(strtos32(b"zz"), Err(NumError::Invalid));
        assert_eq!(strtos32(b"0x10"), Err(NumError::Invalid));
        assert_eq!(strtos32(b""), Err(NumError::Invalid));
        assert_eq!(strtos32(b"99999999999"), Err(NumError::Errno(libc::ERANGE)));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size(b"4096"), Ok(4096));
        assert_eq!(parse_size(b" 5"), Ok(5));
        assert_eq!(parse_size(b"1K"), Ok(1024));
        assert_eq!(parse_size(b"1KiB"), Ok(1024));
        assert_eq!(parse_size(b"1KB"), Ok(1000));
        assert_eq!(parse_size(b"1M"), Ok(1 << 20));
        assert_eq!(parse_size(b"1.5K"), Ok(1536));
        // util-linux's digit-by-digit fraction loses the last byte here.
        assert_eq!(parse_size(b"0.25G"), Ok((1 << 28) - 1));
        assert_eq!(parse_size(b"0.05M"), Ok(52428));
        assert_eq!(parse_size(b"1.005K"), Ok(1029));
        assert_eq!(parse_size(b"0x10"), Ok(16));
        assert_eq!(parse_size(b"5 "), Err(NumError::Invalid));
        assert_eq!(parse_size(b"1Q"), Err(NumError::Invalid));
        assert_eq!(parse_size(b"-1"), Err(NumError::Invalid));
        assert_eq!(parse_size(b"abc"), Err(NumError::Invalid));
        assert_eq!(parse_size(b"20E"), Err(NumError::Errno(libc::ERANGE)));
    }
}
