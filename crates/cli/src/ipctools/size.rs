//! Sizes as ipcs prints them: util-linux's `ipc_print_size`
//! (sys-utils/ipcutils.c) and `size_to_human_string` with
//! `SIZE_SUFFIX_1LETTER` (lib/strutils.c).

use std::io::Write;

/// `IPC_UNIT_*`: how ipcs shows a size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Unit {
    Default,
    Bytes,
    Kb,
    Human,
}

/// `get_exp`: the power of 1024 (times 10) below `n`.
fn get_exp(n: u64) -> u32 {
    let mut shft = 10;
    while shft <= 60 {
        if n < (1u64 << shft) {
            break;
        }
        shft += 10;
    }
    shft - 10
}

/// `size_to_human_string(SIZE_SUFFIX_1LETTER, bytes)`: `"4K"`, `"1.5M"`,
/// `"16E"` (one decimal, rounded 4/5, a trailing zero dropped).
pub fn human(bytes: u64) -> String {
    let exp = get_exp(bytes);
    let letters = b"BKMGTPE";
    let c = letters[if exp != 0 { exp as usize / 10 } else { 0 }] as char;
    let mut dec = if exp != 0 {
        bytes / (1u64 << exp)
    } else {
        bytes
    } as i32;
    let mut frac = if exp != 0 { bytes % (1u64 << exp) } else { 0 };
    if frac != 0 {
        // Three digits after the decimal point.
        frac = if frac >= u64::MAX / 1000 {
            ((frac / 1024) * 1000) / (1u64 << (exp - 10))
        } else {
            (frac * 1000) / (1u64 << exp)
        };
        // Round 4/5, keeping one digit.
        frac = (frac + 50) / 100 * 10;
        if frac == 100 {
            dec += 1;
            frac = 0;
        }
    }
    if frac != 0 {
        let mut s = format!("{dec}.{frac:02}");
        // "remove potential extraneous zero"
        if s.ends_with('0') {
            s.pop();
        }
        s.push(c);
        s
    } else {
        format!("{dec}{c}")
    }
}

/// `ipc_print_size(unit, msg, size, end, width)`: an optional label
/// (`"msg = "`, `"msg (bytes) = "`, `"msg (kbytes) = "`, or `msg` itself
/// when it ends in `=`), the size in the unit padded to `width` (negative:
/// left-aligned), then `end`.
pub fn print(out: &mut Vec<u8>, unit: Unit, msg: Option<&str>, size: u64, end: &str, width: i32) {
    if let Some(m) = msg {
        if m.ends_with('=') {
            out.extend_from_slice(m.as_bytes());
        } else {
            let _ = match unit {
                Unit::Bytes => write!(out, "{m} (bytes) = "),
                Unit::Kb => write!(out, "{m} (kbytes) = "),
                _ => write!(out, "{m} = "),
            };
        }
    }
    let text = match unit {
        Unit::Default | Unit::Bytes => size.to_string(),
        Unit::Kb => (size / 1024).to_string(),
        Unit::Human => human(size),
    };
    let w = width.unsigned_abs() as usize;
    let _ = if width < 0 {
        write!(out, "{text:<w$}")
    } else {
        write!(out, "{text:>w$}")
    };
    out.extend_from_slice(end.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(1024), "1K");
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(4096), "4K");
        assert_eq!(human(1 << 20), "1M");
        assert_eq!(human(1_000_000), "976.6K");
        assert_eq!(human(u64::MAX), "16E");
        assert_eq!(human(u64::MAX - (1 << 24)), "16E");
        assert_eq!(human(8192), "8K");
        assert_eq!(human(1100), "1.1K");
        assert_eq!(human(2047), "2K");
    }
}
