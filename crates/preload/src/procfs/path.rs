//! Which emulated file a path names: `/proc/sysvipc/{sem,msg,shm}` and
//! `/proc/sys/kernel/NAME` for the namespace's sysctls, as literal paths
//! (no `..`, no doubled slashes, no `/proc/self/root/...` forms), or
//! relative to a directory descriptor (or the working directory) that is
//! one of `/`, `/proc`, `/proc/sys`, `/proc/sys/kernel`, `/proc/sysvipc`.

use ipcns_core::{Mech, SYSCTLS};

/// An emulated file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/proc/sysvipc/{sem,msg,shm}` (read only).
    Sysvipc(Mech),
    /// `/proc/sys/kernel/NAME`: the index of NAME in `SYSCTLS`.
    Sysctl(usize),
}

/// The longest path looked at: anything longer is not ours.
pub const MAX: usize = 64;

/// The file an absolute path names, if emulated.
pub fn absolute(p: &[u8]) -> Option<Target> {
    let rest = p.strip_prefix(b"/proc/sys")?;
    if let Some(m) = rest.strip_prefix(b"vipc/") {
        return match m {
            b"sem" => Some(Target::Sysvipc(Mech::Sem)),
            b"msg" => Some(Target::Sysvipc(Mech::Msg)),
            b"shm" => Some(Target::Sysvipc(Mech::Shm)),
            _ => None,
        };
    }
    let name = rest.strip_prefix(b"/kernel/")?;
    SYSCTLS
        .iter()
        .position(|n| n.as_bytes() == name)
        .map(Target::Sysctl)
}

/// Whether a relative path's last component is one of the emulated
/// files' names (only then is its directory looked up).
pub fn may_be_relative(p: &[u8]) -> bool {
    if p.first().is_none_or(|&b| b == b'/') {
        return false;
    }
    let last = match p.iter().rposition(|&b| b == b'/') {
        Some(i) => &p[i + 1..],
        None => p,
    };
    matches!(last, b"sem" | b"msg" | b"shm") || SYSCTLS.iter().any(|n| n.as_bytes() == last)
}

/// The file `rel` names relative to the directory `dir`, if emulated.
pub fn relative(dir: &[u8], rel: &[u8]) -> Option<Target> {
    let mut full = Vec::with_capacity(dir.len() + 1 + rel.len());
    full.extend_from_slice(dir);
    if !dir.ends_with(b"/") {
        full.push(b'/');
    }
    full.extend_from_slice(rel);
    absolute(&full)
}

/// The sysctl's name.
pub fn sysctl_name(i: usize) -> &'static str {
    SYSCTLS.get(i).copied().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            absolute(b"/proc/sysvipc/shm"),
            Some(Target::Sysvipc(Mech::Shm))
        );
        let i = SYSCTLS.iter().position(|n| *n == "msgmni").unwrap();
        assert_eq!(
            absolute(b"/proc/sys/kernel/msgmni"),
            Some(Target::Sysctl(i))
        );
        assert_eq!(absolute(b"/proc/sys/kernel/msgmnix"), None);
        assert_eq!(absolute(b"/proc/sys/kernel/hostname"), None);
        assert_eq!(absolute(b"/proc/sysvipc/"), None);
        assert_eq!(absolute(b"/etc/passwd"), None);
        assert!(may_be_relative(b"kernel/msgmni"));
        assert!(may_be_relative(b"sem"));
        assert!(!may_be_relative(b"/proc/sysvipc/sem"));
        assert!(!may_be_relative(b"foo.txt"));
        assert_eq!(
            relative(b"/proc", b"sysvipc/sem"),
            Some(Target::Sysvipc(Mech::Sem))
        );
        assert_eq!(
            relative(b"/proc/sys/kernel", b"msgmni"),
            Some(Target::Sysctl(i))
        );
        assert_eq!(
            relative(b"/", b"proc/sys/kernel/msgmni"),
            Some(Target::Sysctl(i))
        );
        assert_eq!(relative(b"/tmp", b"msgmni"), None);
    }
}
