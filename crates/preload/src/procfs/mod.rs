//! `/proc` as the kernel shows it, for the namespace: an open of
//! `/proc/sysvipc/{sem,msg,shm}` or `/proc/sys/kernel/<ipc sysctl>`
//! (`path.rs`) returns a descriptor on a memfd holding the namespace's
//! text (the core renders it byte for byte as the kernel), reopened with
//! the access mode asked for, so read, pread, fstat, mmap and stdio work on
//! it as on any file. A descriptor open for writing on a sysctl is
//! tracked (`track.rs`): each `write(2)` or `pwrite(2)` on it at offset 0 is parsed and
//! applied when it happens, as `proc_dointvec` does, its error (EINVAL for
//! bad text, ...) returned by that write; a write at a later offset is
//! ignored (the kernel's `sysctl_writes_strict` default). Streams opened
//! for writing with `fopen` are `fopencookie` streams whose writes apply
//! the same way (stdio's own writes do not go through `write`).

pub mod path;
pub mod track;

use crate::cred::with_caller;
use crate::{kfile, state, user};
use ipcns_core::Errno;
use path::Target;

/// The emulated file the path `p` (its bytes before the NUL) names
/// relative to `dirfd`, if any.
pub fn target(dirfd: i32, p: &[u8]) -> Option<Target> {
    if p.first() == Some(&b'/') {
        return path::absolute(p);
    }
    if !path::may_be_relative(p) {
        return None;
    }
    path::relative(&kfile::dir_path(dirfd)?, p)
}

/// Opens the emulated file `t` with `flags`: the descriptor or the errno.
/// Without a namespace (IPC calls fail with ENOSYS, as on a kernel built
/// without System V IPC), ENOENT: such a kernel has none of these files
/// (and the kernel's own are never reached, so a write cannot change the
/// host's limits by mistake).
pub fn open(t: Target, flags: i32) -> Option<Result<i32, i32>> {
    match state::namespace() {
        Ok(ns) => Some(open_in(ns, t, flags)),
        Err(_) => Some(Err(libc::ENOENT)),
    }
}

fn open_in(ns: &ipcns_core::Namespace, t: Target, flags: i32) -> Result<i32, i32> {
    let acc = flags & libc::O_ACCMODE;
    let writing = acc != libc::O_RDONLY;
    // fs/namei.c do_open: a regular file is not a directory; O_CREAT|O_EXCL
    // on an existing name is EEXIST (open(2)).
    if flags & libc::O_DIRECTORY != 0 {
        return Err(libc::ENOTDIR);
    }
    if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
        return Err(libc::EEXIST);
    }
    let text = match t {
        Target::Sysvipc(m) => {
            // ipc/util.c ipc_init_proc_interface: mode S_IRUGO.
            if writing {
                return Err(libc::EACCES);
            }
            with_caller(ns, |c| ns.proc_text(c, m)).map_err(Errno::raw)?
        }
        Target::Sysctl(i) => {
            // fs/proc/proc_sysctl.c test_perm, ipc/ipc_sysctl.c
            // ipc_permissions: the ipc sysctls are 0644, and the owner's
            // bits are root's and the namespace's root's (its maker).
            if writing && !writer(ns)? {
                return Err(libc::EACCES);
            }
            ns.sysctl_read(path::sysctl_name(i)).map_err(Errno::raw)?
        }
    };
    let mfd = kfile::memfd_with(text.as_bytes())?;
    // O_APPEND is dropped: proc_sys_write writes at the file position.
    let mode = if acc == libc::O_ACCMODE {
        libc::O_RDWR
    } else {
        acc
    };
    let keep = flags & (libc::O_CLOEXEC | libc::O_NONBLOCK);
    let fd = kfile::reopen(mfd, mode | keep);
    kfile::close(mfd);
    let fd = fd?;
    if let (true, Target::Sysctl(sysctl)) = (writing, t) {
        let tracked = kfile::ino(fd)
            .map(|ino| {
                let applied = false;
                track::track(
                    fd,
                    track::Entry {
                        ino,
                        sysctl,
                        applied,
                    },
                )
            })
            .unwrap_or(false);
        if !tracked {
            kfile::close(fd);
            return Err(libc::EMFILE);
        }
    }
    Ok(fd)
}

/// Before `write(fd, buf, len)`: `Ok` to let the write through (to the
/// memfd, which moves the offset), `Err` to fail it with that errno. A
/// tracked descriptor at offset 0 has the text applied first
/// (fs/proc/proc_sysctl.c proc_sys_call_handler, kernel/sysctl.c
/// proc_dointvec: EINVAL for bad text; later offsets are ignored,
/// `proc_first_pos_non_zero_ignore`).
/// `at`: pwrite's offset; `None` for write (the file's offset).
pub fn before_write(fd: i32, buf: usize, len: usize, at: Option<i64>) -> Result<(), i32> {
    let Some(e) = track::get(fd) else {
        return Ok(());
    };
    if kfile::ino(fd) != Some(e.ino) {
        // The number was closed and reused.
        track::forget(fd);
        return Ok(());
    }
    let pos = match at {
        Some(p) => Ok(p),
        None => kfile::offset(fd),
    };
    if pos != Ok(0) || len == 0 {
        return Ok(());
    }
    // kernel/sysctl.c proc_get_long: a number longer than its buffer is
    // EINVAL; one page is more than any valid text.
    let bytes = user::with_bytes(buf, len.min(4096), |b| b.to_vec()).map_err(Errno::raw)?;
    track::mark_applied(e.ino);
    apply(e.sysctl, &bytes)
}

/// Before `fd` is closed (`close`, or replaced by `dup2`/`dup3`), and at
/// exit: text written on a tracked descriptor without passing through the
/// exported `write` (stdio's own writes: bash's builtin `echo 5 >
/// /proc/sys/...`) is applied now, as the kernel applied it when it was
/// written; its error has no call left to fail. Only text written from
/// offset 0 on a description that no `write` of ours has applied counts.
pub fn closing(fd: i32) {
    let Some(e) = track::get(fd) else {
        return;
    };
    if kfile::ino(fd) != Some(e.ino) {
        track::forget(fd);
        return;
    }
    if e.applied {
        return;
    }
    let end = match kfile::offset(fd) {
        Ok(n) if n > 0 => n.min(4096) as usize,
        _ => return,
    };
    // The descriptor may be write-only: the bytes are read on a new
    // description of the same memfd.
    let Ok(r) = kfile::reopen(fd, libc::O_RDONLY | libc::O_CLOEXEC) else {
        return;
    };
    let text = kfile::pread(r, end);
    kfile::close(r);
    track::mark_applied(e.ino);
    if let Ok(text) = text {
        let _ = apply(e.sysctl, &text);
    }
}

/// At exit: what `closing` does for every descriptor still open.
pub fn closing_all() {
    if !track::any() {
        return;
    }
    for (fd, _) in track::all() {
        closing(fd);
    }
}

/// Applies `text` to sysctl `i` with the caller's credentials.
pub fn apply(i: usize, text: &[u8]) -> Result<(), i32> {
    let ns = state::namespace().map_err(Errno::raw)?;
    let text = core::str::from_utf8(text).map_err(|_| libc::EINVAL)?;
    with_caller(ns, |c| ns.sysctl_write(c, path::sysctl_name(i), text)).map_err(Errno::raw)
}

/// The current text of sysctl `i` (for a stream opened for reading and
/// writing).
pub fn read_sysctl(i: usize) -> Result<String, i32> {
    let ns = state::namespace().map_err(Errno::raw)?;
    ns.sysctl_read(path::sysctl_name(i)).map_err(Errno::raw)
}

/// Whether the caller may open a sysctl for writing: euid 0, or the
/// namespace's root (`Namespace::sysctl_root_uid`).
pub fn may_write() -> Result<(), i32> {
    let ns = state::namespace().map_err(Errno::raw)?;
    if writer(ns)? {
        Ok(())
    } else {
        Err(libc::EACCES)
    }
}

/// Whether the caller gets the sysctl files' owner bits (rw).
fn writer(ns: &ipcns_core::Namespace) -> Result<bool, i32> {
    let euid = with_caller(ns, |c| Ok(c.euid)).map_err(Errno::raw)?;
    Ok(euid == 0 || euid == ns.sysctl_root_uid())
}
