//! How many per-cpu slots a structure needs: the highest possible cpu plus one,
//! read once from `/sys/devices/system/cpu/possible` (the kernel's
//! `cpu_possible_mask`, which never changes while the system runs).

use std::sync::OnceLock;

static POSSIBLE: OnceLock<usize> = OnceLock::new();

/// Sets the number of possible cpus from the text of
/// `/sys/devices/system/cpu/possible` that the caller read itself (a
/// library that must not go through libc's file functions, which another
/// preloaded library may intercept). The first reading wins; returns the
/// number in effect. Text that is not a cpu list leaves the choice to
/// [`possible_cpus`].
pub fn possible_cpus_from(text: &str) -> usize {
    if let Some(n) = parse_cpu_list(text) {
        let _ = POSSIBLE.set(n.max(1));
    }
    possible_cpus()
}

/// Number of possible cpus (highest possible cpu number + 1), at least 1.
///
/// Read from `/sys/devices/system/cpu/possible`; if that file is missing or
/// malformed, `sysconf(_SC_NPROCESSORS_CONF)`.
pub fn possible_cpus() -> usize {
    *POSSIBLE.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/possible")
            .ok()
            .and_then(|s| parse_cpu_list(&s))
            .unwrap_or_else(|| {
                // SAFETY: sysconf has no preconditions.
                #[allow(unsafe_code)]
                let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
                usize::try_from(n).unwrap_or(1)
            })
            .max(1)
    })
}

/// Parses a kernel cpu list such as `0-3,8,10-11` and returns the highest
/// listed cpu plus one (`None` when the text is not a cpu list).
pub fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut max: Option<usize> = None;
    for part in s.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let hi = match part.split_once('-') {
            Some((lo, hi)) => {
                let lo: usize = lo.parse().ok()?;
                let hi: usize = hi.parse().ok()?;
                if hi < lo {
                    return None;
                }
                hi
            }
            None => part.parse().ok()?,
        };
        max = Some(max.map_or(hi, |m: usize| m.max(hi)));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists() {
        assert_eq!(parse_cpu_list("0\n"), Some(1));
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(12));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("3-1"), None);
    }

    #[test]
    fn possible_is_at_least_online() {
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(possible_cpus() >= online, "{} < {online}", possible_cpus());
    }
}
