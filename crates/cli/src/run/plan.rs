//! What `ipcns run` will do, worked out before anything is created: which
//! library it preloads, which namespace the program gets and where, the
//! environment handed down; and the text that `ipcns run` without a
//! program prints.

use super::Options;
use anyhow::{Context, bail};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The library's file name, as the preload crate builds it.
pub const LIBRARY: &str = "libipcns.so";

/// Where the library was found.
pub struct Library {
    pub path: PathBuf,
    /// Where it was found (`$IPCNS_PRELOAD`, beside the executable, ...).
    pub from: String,
}

/// Finds `libipcns.so`: `$IPCNS_PRELOAD` if set (a path, made absolute),
/// else beside the running executable, else in `../lib/ipcns` beside it
/// (a package's place), else the copy the executable carries, written out
/// (`carried.rs`); an error naming them otherwise.
pub fn find_library() -> anyhow::Result<Library> {
    let lib = match std::env::var_os("IPCNS_PRELOAD").filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = std::path::absolute(&p)
                .with_context(|| format!("$IPCNS_PRELOAD {}", Path::new(&p).display()))?;
            if !p.is_file() {
                bail!(
                    "$IPCNS_PRELOAD is {}, which is not a file (unset it to use {LIBRARY} beside the ipcns executable)",
                    p.display()
                );
            }
            Library {
                path: p,
                from: "$IPCNS_PRELOAD".into(),
            }
        }
        None => {
            let exe = std::env::current_exe().context("the ipcns executable's path")?;
            let dir = exe.parent().unwrap_or(Path::new("/"));
            let p = dir.join(LIBRARY);
            // A package's place for it: PREFIX/lib/ipcns beside PREFIX/bin.
            let packaged = dir.join("../lib/ipcns").join(LIBRARY);
            if p.is_file() {
                Library {
                    path: p,
                    from: "beside the ipcns executable".into(),
                }
            } else if packaged.is_file() {
                Library {
                    path: std::fs::canonicalize(&packaged).unwrap_or(packaged),
                    from: "in ../lib/ipcns beside the ipcns executable".into(),
                }
            } else {
                match super::carried::path() {
                    Ok(path) => Library {
                        path,
                        from: "carried by the ipcns executable".into(),
                    },
                    Err(why) => bail!(
                        "{LIBRARY} not found: $IPCNS_PRELOAD is not set, {} does not exist, \
                         and {why} (build it with 'cargo build --release -p ipcns-preload', \
                         which puts it beside target/release/ipcns, or set IPCNS_PRELOAD to its path)",
                        p.display()
                    ),
                }
            }
        }
    };
    // ld.so splits LD_PRELOAD at colons and spaces (ld.so(8)).
    if lib
        .path
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b':' | b' ' | b'\t' | b'\n'))
    {
        bail!(
            "{}: LD_PRELOAD cannot carry a path with a colon or a space",
            lib.path.display()
        );
    }
    Ok(lib)
}

/// `LD_PRELOAD` for the program: `lib` first, then what `previous` held
/// (ld.so's separators, colons and spaces, become colons; an entry equal to
/// `lib`, or loading a file `lib` loads, is dropped, so a nested `ipcns
/// run` does not list it twice: `musl::files_of`).
pub fn ld_preload(lib: &Path, previous: Option<&OsStr>) -> OsString {
    let mut out = lib.as_os_str().as_bytes().to_vec();
    let ours = super::musl::files_of(lib);
    let loads_ours = |e: &[u8]| {
        std::fs::metadata(OsStr::from_bytes(e)).is_ok_and(|m| ours.contains(&(m.dev(), m.ino())))
    };
    for entry in previous
        .map(OsStr::as_bytes)
        .unwrap_or_default()
        .split(|b| matches!(b, b':' | b' ' | b'\t' | b'\n'))
        .filter(|e| !e.is_empty() && *e != lib.as_os_str().as_bytes() && !loads_ours(e))
    {
        out.push(b':');
        out.extend_from_slice(entry);
    }
    OsString::from_vec(out)
}

/// Which namespace the program gets.
pub struct Target {
    pub name: String,
    /// Fresh for this run (`--private`), removed at the end unless kept.
    pub private: bool,
    /// The directory of the arenas, absolute (the program may chdir).
    pub dir: PathBuf,
    pub arena: PathBuf,
    /// The mode it is created with if missing.
    pub mode: u32,
    /// Whether another user's shared namespace is accepted and
    /// `IPCNS_SHARED=1` handed down even before attaching says so.
    pub shared: bool,
    /// The directory was not given (`$IPCNS_DIR` unset): it is the caller's
    /// own `/dev/shm/ipcns-UID`, which `--shared` may open for search.
    pub default_dir: bool,
}

/// A fresh name `run-PID-XXXXXXXX` (std's random hasher keys come from the
/// system's random source).
fn fresh_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("run-{}-{:08x}", std::process::id(), h.finish() as u32)
}

/// The namespace `opts` ask for: `--private`'s fresh one, `--ns NAME`,
/// `$IPCNS`, else `default` (the namespace the other commands use).
pub fn target(opts: &Options) -> anyhow::Result<Target> {
    let name = if opts.private {
        fresh_name()
    } else {
        match &opts.ns {
            Some(n) => n.clone(),
            None => match std::env::var_os("IPCNS").filter(|v| !v.is_empty()) {
                Some(v) => crate::ns::valid_name(&v).context("$IPCNS")?,
                None => ipcns::namespace::default_name(),
            },
        }
    };
    crate::ns::check_dir()?;
    let dir = ipcns::namespace::dir()?;
    let dir = std::path::absolute(&dir).with_context(|| format!("{}", dir.display()))?;
    let mode = opts.mode.unwrap_or(if opts.shared { 0o666 } else { 0o600 });
    Ok(Target {
        arena: dir.join(format!("ipcns.{name}")),
        name,
        private: opts.private,
        dir,
        mode,
        shared: opts.shared || mode & 0o077 != 0,
        default_dir: std::env::var_os("IPCNS_DIR").is_none_or(|d| d.is_empty()),
    })
}

/// The search (x) bits the arena's directory needs so that the users a
/// shared namespace of `mode` admits can reach its files: group x if the
/// mode gives the group anything, other x if it gives others anything;
/// `None` if the directory `dir_mode` has them already.
pub fn missing_search(mode: u32, dir_mode: u32) -> Option<u32> {
    let mut want = 0;
    if mode & 0o070 != 0 {
        want |= 0o010;
    }
    if mode & 0o007 != 0 {
        want |= 0o001;
    }
    let missing = want & !dir_mode;
    (missing != 0).then_some(missing)
}

/// What `ipcns run` without a program prints: the plan, or `Err` with
/// the same text when running would fail (the library is missing, the
/// namespace cannot be attached).
pub fn text(opts: &Options) -> anyhow::Result<(String, bool)> {
    let mut t = String::new();
    let mut ok = true;
    let lib = match find_library().and_then(|l| super::musl::choose(l, None)) {
        Ok(l) => {
            let _ = writeln!(t, "library:   {} ({})", l.path.display(), l.from);
            Some(l.path)
        }
        Err(e) => {
            ok = false;
            let _ = writeln!(t, "library:   {}", crate::message(&e));
            None
        }
    };
    let tg = target(opts)?;
    let _ = writeln!(t, "namespace: {}", tg.name);
    let _ = writeln!(t, "arena:     {}", tg.arena.display());
    let mut shared = tg.shared;
    let state = if tg.private {
        format!(
            "fresh for this run (another name each time), created with mode {:04o}, {}",
            tg.mode,
            if opts.keep {
                "kept at the end (--keep)"
            } else {
                "removed with its segment files at the end (kept if processes the program started still run)"
            }
        )
    } else if std::fs::symlink_metadata(&tg.arena).is_err() {
        format!("would be created, mode {:04o}", tg.mode)
    } else {
        match super::attach(&tg, false) {
            Ok(ns) => {
                shared |= ns.shared();
                let m = std::fs::metadata(&tg.arena)?;
                format!(
                    "exists, owner uid {}, mode {:04o}{}",
                    m.uid(),
                    m.mode() & 0o7777,
                    match (ns.shared(), opts.shared) {
                        (true, _) => ", created shared",
                        (false, true) => ", not created shared: other users cannot attach to it",
                        (false, false) => "",
                    }
                )
            }
            Err(e) => {
                ok = false;
                format!("exists but cannot be used: {}", crate::message(&e))
            }
        }
    };
    let _ = writeln!(t, "state:     {state}");
    if shared && tg.default_dir {
        let m = std::fs::metadata(&tg.dir)?.mode();
        if let Some(x) = missing_search(tg.mode, m) {
            let _ = writeln!(
                t,
                "directory: {} would be made searchable ({:04o}) so that other users reach the files",
                tg.dir.display(),
                (m | x) & 0o7777
            );
        }
    }
    let _ = writeln!(
        t,
        "strict:    {}",
        match (opts.strict, opts.no_supervisor) {
            (true, true) => {
                "yes: the kernel's System V IPC system calls fail with ENOSYS (seccomp), \
                 and setuid programs run without gaining privileges (no_new_privs)"
            }
            (true, false) => "yes: the supervisor serves every System V IPC system call",
            (false, false) => "no: the supervisor serves what does not go through the library",
            (false, true) => {
                "no: a System V IPC system call that does not go through the library \
                 reaches the kernel"
            }
        }
    );
    let _ = writeln!(
        t,
        "supervisor: {}",
        if opts.no_supervisor {
            "no (--no-supervisor): a System V IPC system call that does not go through \
             the library reaches the kernel"
        } else {
            "yes: System V IPC system calls that reach the kernel (static binaries, Go, raw \
             system calls) are served from the namespace (seccomp user notification; \
             no_new_privs without CAP_SYS_ADMIN)"
        }
    );
    t.push_str("environment:\n");
    let previous = std::env::var_os("LD_PRELOAD");
    match &lib {
        Some(l) => {
            let v = ld_preload(l, previous.as_deref());
            let _ = writeln!(t, "  LD_PRELOAD={}", v.to_string_lossy());
        }
        None => {
            let v = ld_preload(Path::new("(the library)"), previous.as_deref());
            let _ = writeln!(t, "  LD_PRELOAD={}", v.to_string_lossy());
        }
    }
    let _ = writeln!(t, "  IPCNS={}", tg.name);
    let _ = writeln!(t, "  IPCNS_DIR={}", tg.dir.display());
    t.push_str("  IPCNS_FD=N (a descriptor open read-write on the arena, inherited)\n");
    t.push_str("  IPCNS_POOL_FD=N (one on the segment pool, likewise)\n");
    if shared {
        t.push_str("  IPCNS_SHARED=1\n");
    }
    t.push_str(
        "then:      run the program as a child subreaper, forward HUP INT QUIT TERM USR1 USR2 \
         ALRM WINCH CONT to it, and exit with its status\n",
    );
    Ok((t, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_preload_puts_the_library_first_and_keeps_the_rest() {
        let lib = Path::new("/l/libipcns.so");
        assert_eq!(ld_preload(lib, None), "/l/libipcns.so");
        assert_eq!(ld_preload(lib, Some(OsStr::new(""))), "/l/libipcns.so");
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/a.so:/b.so"))),
            "/l/libipcns.so:/a.so:/b.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new(" /a.so  /b.so: ::"))),
            "/l/libipcns.so:/a.so:/b.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/a.so:/l/libipcns.so"))),
            "/l/libipcns.so:/a.so"
        );
        let odd = OsStr::from_bytes(b"/x\xff.so");
        assert_eq!(
            ld_preload(lib, Some(odd)).as_bytes(),
            b"/l/libipcns.so:/x\xff.so"
        );
    }

    #[test]
    fn search_bits_follow_the_classes_the_mode_admits() {
        assert_eq!(missing_search(0o666, 0o700), Some(0o011));
        assert_eq!(missing_search(0o660, 0o700), Some(0o010));
        assert_eq!(missing_search(0o606, 0o700), Some(0o001));
        assert_eq!(missing_search(0o666, 0o711), None);
        assert_eq!(missing_search(0o666, 0o701), Some(0o010));
        assert_eq!(missing_search(0o600, 0o700), None);
    }

    #[test]
    fn fresh_names_are_valid_and_differ() {
        let (a, b) = (fresh_name(), fresh_name());
        assert_ne!(a, b);
        ipcns::namespace::check_name(&a).unwrap();
        assert!(a.starts_with(&format!("run-{}-", std::process::id())));
    }
}
