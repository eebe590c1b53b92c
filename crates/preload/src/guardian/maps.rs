//! `/proc` files read without allocating and without a panic site (the
//! guardian runs in a copy of a process whose allocator may be locked,
//! and must never unwind back into the program): maps, records of any
//! file, directory listings.
//!
//! A line is `lo-hi perms offset MAJ:MIN inode [path]`, numbers in hex
//! but the inode (proc(5)).

use super::sys;
use core::ffi::CStr;
use ipcns_sys::{Errno, Fd};

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

/// A decimal number of at most 20 digits, `None` on overflow.
pub fn dec(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    b.iter().try_fold(0u64, |v, &c| {
        c.is_ascii_digit()
            .then(|| v.checked_mul(10)?.checked_add(u64::from(c - b'0')))?
    })
}

/// `b` cut at the first `sep`: (before, after).
fn cut(b: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = b.iter().position(|&c| c == sep)?;
    Some((b.get(..at)?, b.get(at + 1..)?))
}

/// Parses one line of a maps file.
pub fn parse(line: &[u8]) -> Option<Mapping> {
    let mut f = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let (range, perms, _off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let (lo, hi) = cut(range, b'-')?;
    let (major, minor) = cut(dev, b':')?;
    Some(Mapping {
        lo: usize::try_from(hex(lo)?).ok()?,
        hi: usize::try_from(hex(hi)?).ok()?,
        shared: perms.get(3) == Some(&b's'),
        dev: (
            u32::try_from(hex(major)?).ok()?,
            u32::try_from(hex(minor)?).ok()?,
        ),
        ino: dec(ino)?,
    })
}

/// Calls `f` with each mapping of the maps file at `path` until it
/// returns false: the number of lines read (0 for the empty maps of a
/// process whose leader has exited, or of a kernel thread), or the errno
/// of the open (EACCES: a process this one may not inspect).
pub fn each(path: &CStr, mut f: impl FnMut(Mapping) -> bool) -> Result<usize, Errno> {
    let fd = ipcns_sys::fs::open_c(path, libc::O_RDONLY | libc::O_NOCTTY, 0)?;
    let mut lines = 0usize;
    each_record(&fd, b'\n', |l, _| {
        lines = lines.saturating_add(1);
        parse(l).is_none_or(&mut f)
    });
    Ok(lines)
}

/// Calls `f` with each record of `fd` ended by `sep` (a line, an
/// environment string), without its separator, until it returns false.
/// A record longer than the buffer is handed over by its start only, with
/// `whole` false.
pub fn each_record(fd: &Fd, sep: u8, mut f: impl FnMut(&[u8], bool) -> bool) {
    let mut buf = [0u8; 4096];
    let mut len = 0usize;
    // In the middle of a record whose start was handed over already.
    let mut skipping = false;
    loop {
        let Some(free) = buf.get_mut(len..) else {
            return;
        };
        let n = match fd.read(free) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        len = len.saturating_add(n).min(buf.len());
        let mut start = 0;
        while let Some(rest) = buf.get(start..len) {
            let Some(at) = rest.iter().position(|&b| b == sep) else {
                break;
            };
            if !skipping && !f(rest.get(..at).unwrap_or_default(), true) {
                return;
            }
            skipping = false;
            start = start.saturating_add(at).saturating_add(1);
        }
        if start == 0 && len == buf.len() {
            // A record longer than the buffer: its start, then skip it.
            if !skipping && !f(&buf, false) {
                return;
            }
            skipping = true;
            len = 0;
        } else {
            buf.copy_within(start.min(len)..len, 0);
            len = len.saturating_sub(start);
        }
    }
    if len > 0 && !skipping {
        f(buf.get(..len).unwrap_or_default(), true);
    }
}

/// Calls `f` with each name of the directory `dir` (a `getdents64`
/// listing into `buf`, from where the directory's offset is) until it
/// returns false. False if the listing failed (not at its end).
pub fn each_name(dir: &Fd, buf: &mut [u8], mut f: impl FnMut(&CStr) -> bool) -> bool {
    loop {
        let n = match sys::getdents(dir, buf) {
            Ok(0) => return true,
            Err(_) => return false,
            Ok(n) => n.min(buf.len()),
        };
        let mut records = buf.get(..n).unwrap_or_default();
        // struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1,
        // then the NUL-terminated name.
        while let (Some(&a), Some(&b)) = (records.get(16), records.get(17)) {
            let reclen = usize::from(u16::from_ne_bytes([a, b]));
            let (Some(record), Some(rest)) = (records.get(..reclen), records.get(reclen..)) else {
                break;
            };
            if reclen < 19 {
                break;
            }
            records = rest;
            let Ok(name) = CStr::from_bytes_until_nul(record.get(19..).unwrap_or_default()) else {
                continue;
            };
            if !f(name) {
                return true;
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
    }

    #[test]
    fn reads_records_and_names() {
        let mut lines = 0;
        assert!(
            each(c"/proc/self/maps", |_| {
                lines += 1;
                true
            })
            .is_ok_and(|n| n > 0)
        );
        assert!(lines > 0);
        assert_eq!(each(c"/nonexistent/maps", |_| true), Err(Errno::ENOENT));
        // The environment, NUL-separated: PATH is there in a test run.
        let env = ipcns_sys::fs::open_c(c"/proc/self/environ", libc::O_RDONLY, 0).unwrap();
        let mut path = false;
        each_record(&env, 0, |r, whole| {
            path |= whole && r.starts_with(b"PATH=");
            true
        });
        assert!(path);
        // A record longer than the buffer: its start, once.
        let long = std::env::temp_dir().join(format!("ipcns-records-{}", std::process::id()));
        let mut text = vec![b'x'; 10_000];
        text.extend_from_slice(b"\nshort\n");
        std::fs::write(&long, &text).unwrap();
        let c = std::ffi::CString::new(long.as_os_str().as_encoded_bytes()).unwrap();
        let fd = ipcns_sys::fs::open_c(&c, libc::O_RDONLY, 0).unwrap();
        let mut got = Vec::new();
        each_record(&fd, b'\n', |r, whole| {
            got.push((r.len(), whole));
            true
        });
        let _ = std::fs::remove_file(&long);
        assert_eq!(got, [(4096, false), (5, true)]);
        // This directory's names.
        let d =
            ipcns_sys::fs::open_c(c"/proc/self/fd", libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
        let mut names = 0;
        let mut buf = [0u8; 256];
        assert!(each_name(&d, &mut buf, |n| {
            names += usize::from(n.to_bytes() == b"0");
            true
        }));
        assert_eq!(names, 1);
    }
}
