//! `ipcns ns list`: the namespaces in the directory, with owner, mode and
//! the bytes they take; `ipcns ns prune`: the run-* and unshare-* ones no
//! process uses any more, removed. A file is opened only if it is a regular file (`lstat`), and then
//! with `O_NONBLOCK | O_NOFOLLOW`: opening a FIFO named `ipcns.X` would
//! block, a device's open may act. Arenas this user cannot open are not
//! listed: they cannot be told from other files without reading them.

use ipcns::ARENA_MAGIC as MAGIC;
use ipcns::namespace::{dir, path_of};
use std::fs::{DirEntry, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// A namespace as listed.
struct Row {
    owner: String,
    mode: u32,
    /// Bytes allocated to its arena and segment files (a pool is sparse:
    /// its length says nothing).
    used: u64,
    name: String,
    /// The arena file's device and inode.
    id: (u64, u64),
}

/// The text of `ns list`: a header, then one aligned row per namespace,
/// by name.
pub fn text() -> anyhow::Result<String> {
    let rows = rows()?;
    let owner_w = rows.iter().map(|r| r.owner.len()).fold(5, usize::max);
    let mut out = format!("{:<owner_w$}  MODE   USED  NAME\n", "OWNER");
    for r in &rows {
        out.push_str(&format!(
            "{:<owner_w$}  {:04o}  {:>5}  {}\n",
            r.owner,
            r.mode,
            human(r.used),
            r.name
        ));
    }
    Ok(out)
}

/// The namespaces of the directory, by name.
fn rows() -> anyhow::Result<Vec<Row>> {
    let d = dir()?;
    let mut rows: Vec<Row> = std::fs::read_dir(&d)
        .map_err(|e| anyhow::Error::new(e).context(format!("{}", d.display())))?
        .filter_map(|e| e.ok())
        .filter_map(|e| row(&e))
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(rows)
}

/// Bytes as `du -h` prints them: B under 1 KiB, then K, M, G, T with one
/// decimal below 10.
pub fn human(bytes: u64) -> String {
    let mut v = bytes as f64;
    let mut unit = "B";
    for u in ["K", "M", "G", "T"] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if unit == "B" {
        format!("{bytes}B")
    } else if v < 10.0 {
        format!("{:.1}{unit}", (v * 10.0).ceil() / 10.0)
    } else {
        format!("{:.0}{unit}", v.ceil())
    }
}

/// Bytes allocated to the regular files directly in `dir` (a
/// namespace's `NAME.d`: the segment pool and segment files).
fn allocated_in(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.file_type().is_file())
            .map(|m| m.blocks() * 512)
            .sum()
    })
}

/// `ipcns ns prune`: removes each namespace named `run-PID-...` or
/// `unshare-PID-...` (what `ipcns run --private` and `unshare(CLONE_NEWIPC)`
/// name theirs) whose PID is no live process and that no process maps
/// (`/proc/*/maps`: the arena's device and inode), saying each. Others'
/// names are the users': never pruned. `dry`: only says.
pub fn prune(dry: bool) -> anyhow::Result<std::process::ExitCode> {
    let mapped = mapped_arenas();
    let mut out = String::new();
    let mut failed = false;
    for r in rows()? {
        let Some(pid) = maker_pid(&r.name) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() || mapped.contains(&r.id) {
            continue;
        }
        if dry {
            out.push_str(&format!("would remove {}\n", r.name));
            continue;
        }
        match ipcns::Namespace::remove(&r.name) {
            Ok(()) => out.push_str(&format!("removed {}\n", r.name)),
            Err(e) => {
                eprintln!("ipcns: {}", crate::message(&anyhow::Error::new(e)));
                failed = true;
            }
        }
    }
    crate::print_out(&out)?;
    Ok(if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// The pid in a name that `ipcns run --private` or an unshare made.
fn maker_pid(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix("run-")
        .or_else(|| name.strip_prefix("unshare-"))?;
    let (pid, tail) = rest.split_once('-')?;
    (!tail.is_empty()).then_some(())?;
    pid.parse().ok().filter(|&p| p > 0)
}

/// The (device, inode) of every file some process maps, as far as
/// `/proc/*/maps` can be read (others' are unreadable to a user that is
/// not root: their namespaces are theirs to prune).
fn mapped_arenas() -> std::collections::HashSet<(u64, u64)> {
    let mut set = std::collections::HashSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return set;
    };
    for p in procs.filter_map(|e| e.ok()) {
        if !p
            .file_name()
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(p.path().join("maps")) else {
            continue;
        };
        for l in maps.lines() {
            // lo-hi perms offset MAJ:MIN inode [path]
            let mut f = l.split_ascii_whitespace().skip(3);
            let (Some(dev), Some(ino)) = (f.next(), f.next()) else {
                continue;
            };
            let Some((maj, min)) = dev.split_once(':') else {
                continue;
            };
            let (Ok(maj), Ok(min), Ok(ino)) = (
                u64::from_str_radix(maj, 16),
                u64::from_str_radix(min, 16),
                ino.parse::<u64>(),
            ) else {
                continue;
            };
            if ino != 0 {
                set.insert((libc::makedev(maj as u32, min as u32), ino));
            }
        }
    }
    set
}

/// The row of `e` if it is a namespace: named `ipcns.NAME` with a valid
/// NAME, a regular file, and an arena (its magic number, and the size its
/// header gives, as `Arena::open` checks).
fn row(e: &DirEntry) -> Option<Row> {
    let file_name = e.file_name();
    let name = file_name.to_str()?.strip_prefix("ipcns.")?;
    path_of(name).ok()?;
    // DirEntry::metadata is lstat: a symbolic link is not followed.
    if !e.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(e.path())
        .ok()?;
    // The file opened, which may have been replaced since the lstat.
    let meta = f.metadata().ok()?;
    if !meta.file_type().is_file() || !is_arena(&mut f, meta.len()) {
        return None;
    }
    let uid = meta.uid();
    let owner = crate::ipctools::user_name(uid).map_or_else(
        || uid.to_string(),
        |n| String::from_utf8_lossy(&n).into_owned(),
    );
    let segments = e.path().with_file_name(format!("ipcns.{name}.d"));
    Some(Row {
        owner,
        mode: meta.mode() & 0o7777,
        used: meta.blocks() * 512 + allocated_in(&segments),
        name: name.to_string(),
        id: (meta.dev(), meta.ino()),
    })
}

/// Whether `f` (`len` bytes) starts with an arena header: the magic
/// number, and at offset 16 the arena size, equal to the file's.
fn is_arena(f: &mut File, len: u64) -> bool {
    let mut head = [0u8; 24];
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[at..at + 8]);
        u64::from_le_bytes(b)
    };
    word(0) == MAGIC && word(16) == len
}
