//! `/proc/PID/maps` read without allocating (the guardian runs in a
//! copy of a process whose allocator may be locked): which processes map
//! a file, and which of the guardian's own mappings are shared.
//!
//! A line is `lo-hi perms offset MAJ:MIN inode [path]`, numbers in hex
//! but the inode (proc(5)).

use super::sys;
use core::ffi::CStr;
use ipcns_sys::Fd;

/// One line of a maps file, as far as the guardian needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub lo: usize,
    pub hi: usize,
    /// `s` in the permissions (MAP_SHARED).
    pub shared: bool,
    pub dev: (u32, u32),
    pub ino: u64,
}

fn hex(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    b.iter().try_fold(0u64, |v, &c| {
        let d = (c as char).to_digit(16)?;
        Some(v << 4 | u64::from(d))
    })
}

fn dec(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    b.iter().try_fold(0u64, |v, &c| {
        c.is_ascii_digit()
            .then(|| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))?
    })
}

/// Parses one line of a maps file.
pub fn parse(line: &[u8]) -> Option<Mapping> {
    let mut f = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let (range, perms, _off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let dash = range.iter().position(|&b| b == b'-')?;
    let colon = dev.iter().position(|&b| b == b':')?;
    Some(Mapping {
        lo: hex(&range[..dash])? as usize,
        hi: hex(&range[dash + 1..])? as usize,
        shared: perms.get(3) == Some(&b's'),
        dev: (
            u32::try_from(hex(&dev[..colon])?).ok()?,
            u32::try_from(hex(&dev[colon + 1..])?).ok()?,
        ),
        ino: dec(ino)?,
    })
}

/// Calls `f` with each mapping of the maps file at `path` until it
/// returns false. A line longer than the buffer is read by its start
/// (where the fields are). False if the file cannot be opened.
pub fn each(path: &CStr, mut f: impl FnMut(Mapping) -> bool) -> bool {
    let Ok(fd) = ipcns_sys::fs::open_c(path, libc::O_RDONLY | libc::O_NOCTTY, 0) else {
        return false;
    };
    each_line(&fd, |l| parse(l).is_none_or(&mut f));
    true
}

/// Calls `f` with each line of `fd` (without its newline) until it
/// returns false.
fn each_line(fd: &Fd, mut f: impl FnMut(&[u8]) -> bool) {
    let mut buf = [0u8; 4096];
    let mut len = 0;
    // In the middle of a line whose start was handed over already.
    let mut skipping = false;
    loop {
        let n = match fd.read(&mut buf[len..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        len += n.min(buf.len() - len);
        let mut start = 0;
        while let Some(nl) = buf[start..len].iter().position(|&b| b == b'\n') {
            if !skipping && !f(&buf[start..start + nl]) {
                return;
            }
            skipping = false;
            start += nl + 1;
        }
        if start == 0 && len == buf.len() {
            // A line longer than the buffer: its start, then skip it.
            if !skipping && !f(&buf[..len]) {
                return;
            }
            skipping = true;
            len = 0;
        } else {
            buf.copy_within(start..len, 0);
            len -= start;
        }
    }
    if len > 0 && !skipping {
        f(&buf[..len]);
    }
}

/// `/proc/<pid>/maps` as a C string, in `buf`.
fn maps_path(pid: u32, buf: &mut [u8; 32]) -> &CStr {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = pid;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut at = 0;
    for &b in b"/proc/" {
        buf[at] = b;
        at += 1;
    }
    for i in (0..n).rev() {
        buf[at] = digits[i];
        at += 1;
    }
    for &b in b"/maps\0" {
        buf[at] = b;
        at += 1;
    }
    CStr::from_bytes_until_nul(&buf[..at]).unwrap_or(c"/proc/self/maps")
}

/// The processes (besides `me`) whose maps show the file `(dev, ino)`:
/// how many, the first `pids.len()` of them in `pids`. Processes whose
/// maps this one may not read (another user's, not as root) are not
/// counted.
pub fn mappers(dev: (u32, u32), ino: u64, me: u32, pids: &mut [u32]) -> usize {
    let Ok(proc) = ipcns_sys::fs::open_c(c"/proc", libc::O_RDONLY | libc::O_DIRECTORY, 0) else {
        return 0;
    };
    let mut found = 0;
    let mut buf = [0u8; 4096];
    loop {
        let n = match sys::getdents(&proc, &mut buf) {
            Ok(0) | Err(_) => return found,
            Ok(n) => n.min(buf.len()),
        };
        let mut at = 0;
        while at + 19 <= n {
            // struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2,
            // d_type 1, then the NUL-terminated name.
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen < 19 || at + reclen > n {
                break;
            }
            let name = &buf[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            at += reclen;
            let Some(pid) = dec(name).and_then(|p| u32::try_from(p).ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let mut path = [0u8; 32];
            let mut hit = false;
            each(maps_path(pid, &mut path), |m| {
                hit = m.dev == dev && m.ino == ino;
                !hit
            });
            if hit {
                if let Some(slot) = pids.get_mut(found) {
                    *slot = pid;
                }
                found += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines() {
        let l = b"7f0000000000-7f0000001000 rw-s 00000000 00:1a 12345    /dev/shm/x (deleted)";
        assert_eq!(
            parse(l),
            Some(Mapping {
                lo: 0x7f00_0000_0000,
                hi: 0x7f00_0000_1000,
                shared: true,
                dev: (0, 0x1a),
                ino: 12345
            })
        );
        let l = b"00400000-00452000 r-xp 00000000 fd:01 2 /bin/x";
        assert_eq!(
            parse(l).map(|m| (m.shared, m.dev)),
            Some((false, (0xfd, 1)))
        );
        assert_eq!(parse(b"garbage"), None);
        let mut b = [0u8; 32];
        assert_eq!(maps_path(4194304, &mut b), c"/proc/4194304/maps");
    }

    #[test]
    fn finds_a_mapping_of_this_process() {
        let me = std::process::id();
        let mut lines = 0;
        assert!(each(c"/proc/self/maps", |_| {
            lines += 1;
            true
        }));
        assert!(lines > 0);
        // Some process (this one) maps the file that holds this binary.
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        use std::os::unix::fs::MetadataExt;
        let dev = (libc::major(exe.dev()), libc::minor(exe.dev()));
        let mut pids = [0u32; 4];
        assert!(mappers(dev, exe.ino(), 0, &mut pids) >= 1);
        assert!(pids.contains(&me), "{pids:?}");
    }
}
