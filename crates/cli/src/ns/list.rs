//! `ipcns ns list`: the namespaces in the directory, with owner, mode and
//! size. A file is opened only if it is a regular file (`lstat`), and then
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
    size: u64,
    name: String,
}

/// The text of `ns list`: a header, then one aligned row per namespace,
/// by name.
pub fn text() -> anyhow::Result<String> {
    let d = dir()?;
    let mut rows: Vec<Row> = std::fs::read_dir(&d)
        .map_err(|e| anyhow::Error::new(e).context(format!("{}", d.display())))?
        .filter_map(|e| e.ok())
        .filter_map(|e| row(&e))
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let owner_w = rows.iter().map(|r| r.owner.len()).fold(5, usize::max);
    let size_w = rows
        .iter()
        .map(|r| r.size.to_string().len())
        .fold(4, usize::max);
    let mut out = format!("{:<owner_w$}  MODE  {:>size_w$}  NAME\n", "OWNER", "SIZE");
    for r in &rows {
        out.push_str(&format!(
            "{:<owner_w$}  {:04o}  {:>size_w$}  {}\n",
            r.owner, r.mode, r.size, r.name
        ));
    }
    Ok(out)
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
    Some(Row {
        owner,
        mode: meta.mode() & 0o7777,
        size: meta.len(),
        name: name.to_string(),
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
