//! The musl build of `libipcns.so` beside glibc's, so that programs whose
//! interpreter is musl's (`/lib/ld-musl-ARCH.so.1`: Alpine's, anything
//! built with `musl-gcc`) are served too.
//!
//! # One `LD_PRELOAD` for both C libraries
//! `LD_PRELOAD` is inherited across exec, and a glibc program may exec a
//! musl program and back: one value must have each dynamic loader load
//! its own build and never see the other's (glibc's ld.so prints "cannot
//! be preloaded ... ignored" for a library it cannot load, musl's stops
//! the program when glibc's build needs `ld-linux-x86-64.so.2`). glibc's
//! ld.so expands the dynamic string token `$PLATFORM` in `LD_PRELOAD`
//! (ld.so(8)): to the kernel's `AT_PLATFORM` (`x86_64`, `aarch64`), which
//! glibc 2.26 to 2.36 replace with `haswell` or `xeon_phi` on Intel
//! processors that have their features (sysdeps/x86/cpu-features.c).
//! musl's loader expands nothing: it opens the path as written. So the
//! program gets `LD_PRELOAD=P/$PLATFORM/libipcns.so`, where the directory
//! P, a *pair*, holds
//! - `x86_64/libipcns.so`: glibc's build (`haswell` and `xeon_phi` are
//!   links to `x86_64`; on aarch64, `aarch64/libipcns.so`);
//! - `$PLATFORM/libipcns.so`: musl's, in a directory named `$PLATFORM`.
//!
//! (`$LIB` would do too, but what it expands to is each distribution's
//! choice: `lib/x86_64-linux-gnu`, `lib64`, `lib`. Two entries, one per
//! build, make each loader complain about the other's.)
//!
//! # Where the pair is
//! The Debian package ships one, `/usr/lib/ipcns` (`../lib/ipcns` beside
//! the executable): used as it is when glibc's build was found there.
//! Otherwise `ipcns run` makes one of symbolic links,
//! `ipcns-pair-HASH` (HASH: the two builds' paths), in the directory of
//! glibc's build if that is this user's alone (`target/release` of a
//! build tree: as readable as the builds, for descendants that change
//! user), else in the directory the carried libraries are written to
//! (`carried.rs`); one already there, with the right links, is used again.
//!
//! # Which musl build
//! `$IPCNS_PRELOAD_MUSL` if set; else, unless `$IPCNS_PRELOAD` is set
//! (which names glibc's alone), `ARCH-unknown-linux-musl/PROFILE/libipcns.so`
//! in the target directory of a build tree (`cargo build --release -p
//! ipcns-preload --target x86_64-unknown-linux-musl`, with the flags
//! crates/preload/README.md gives), else the one the executable carries.
//! Without one, `LD_PRELOAD` names glibc's build alone, as before, and a
//! PROGRAM whose interpreter is musl's is refused with the reason (its
//! loader would stop it on glibc's build).

use super::carried;
use super::plan::{LIBRARY, Library};
use anyhow::bail;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What glibc's ld.so may expand `$PLATFORM` to here (the first is the
/// kernel's `AT_PLATFORM`); empty where no pair is made.
#[cfg(target_arch = "x86_64")]
const PLATFORMS: &[&str] = &["x86_64", "haswell", "xeon_phi"];
#[cfg(target_arch = "aarch64")]
const PLATFORMS: &[&str] = &["aarch64"];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const PLATFORMS: &[&str] = &[];

/// The directory of musl's build in a pair, spelt as `LD_PRELOAD` has it.
const TOKEN: &str = "$PLATFORM";

/// Rust's musl target for this machine.
pub fn target() -> String {
    format!("{}-unknown-linux-musl", std::env::consts::ARCH)
}

/// The library `ipcns run` preloads for `program`: glibc's build `glibc`
/// (`plan::find_library`) paired with musl's, or glibc's alone when
/// there is no musl build, unless `program`'s interpreter is musl's.
pub fn choose(glibc: Library, program: Option<&OsStr>) -> anyhow::Result<Library> {
    let why = match pair_for(&glibc) {
        Ok(lib) => return Ok(lib),
        Err(why) => why,
    };
    if let Some(interp) = program.and_then(musl_interpreter) {
        bail!(
            "{}: its interpreter is musl's ({}), and there is no musl build of {LIBRARY} \
             ({why}): with Rust's target {} installed (rustup target add) and musl-gcc \
             (Debian's musl-tools), 'cargo build --release -p ipcns-cli' carries one; \
             or set IPCNS_PRELOAD_MUSL to one",
            program.unwrap_or_default().to_string_lossy(),
            interp.display(),
            target()
        );
    }
    Ok(glibc)
}

/// The pair for `glibc`, or why there is none.
fn pair_for(glibc: &Library) -> Result<Library, String> {
    if PLATFORMS.is_empty() {
        return Err(format!("none for {}", std::env::consts::ARCH));
    }
    // The package's own pair, beside glibc's build.
    if let Some(dir) = glibc.path.parent()
        && glibc.from.starts_with("in ../lib/ipcns")
        && is_shipped_pair(dir)
    {
        return Ok(Library {
            path: entry(dir),
            from: format!("{}, with its musl build", glibc.from),
        });
    }
    let (musl, from) = find()?;
    let dir = pair(&glibc.path, &musl)?;
    Ok(Library {
        path: entry(&dir),
        from: format!(
            "glibc's build {} ({}) and musl's {} ({}), by $PLATFORM",
            glibc.path.display(),
            glibc.from,
            musl.display(),
            from
        ),
    })
}

/// `DIR/$PLATFORM/libipcns.so`.
fn entry(dir: &Path) -> PathBuf {
    dir.join(TOKEN).join(LIBRARY)
}

/// Whether `dir` holds a pair as the package ships it (files or links).
fn is_shipped_pair(dir: &Path) -> bool {
    entry(dir).is_file()
        && PLATFORMS
            .iter()
            .all(|p| dir.join(p).join(LIBRARY).is_file())
}

/// musl's build and where it was found (see the module doc), or why
/// there is none.
fn find() -> Result<(PathBuf, &'static str), String> {
    if let Some(p) = std::env::var_os("IPCNS_PRELOAD_MUSL").filter(|v| !v.is_empty()) {
        let p = std::path::absolute(&p).map_err(|e| format!("$IPCNS_PRELOAD_MUSL: {e}"))?;
        if !p.is_file() {
            return Err(format!(
                "$IPCNS_PRELOAD_MUSL is {}, not a file",
                p.display()
            ));
        }
        return Ok((p, "$IPCNS_PRELOAD_MUSL"));
    }
    if std::env::var_os("IPCNS_PRELOAD").is_some_and(|v| !v.is_empty()) {
        return Err("$IPCNS_PRELOAD is set and $IPCNS_PRELOAD_MUSL is not".to_string());
    }
    let exe = std::env::current_exe().map_err(|e| format!("the ipcns executable's path: {e}"))?;
    // <target>/<profile>/ipcns -> <target>/<musl target>/<profile>/libipcns.so
    if let (Some(dir), Some(profile)) = (exe.parent(), exe.parent().and_then(Path::file_name)) {
        let built = dir.join("..").join(target()).join(profile).join(LIBRARY);
        if built.is_file() {
            let p = std::fs::canonicalize(&built).unwrap_or(built);
            return Ok((p, "in the build tree's target directory"));
        }
    }
    carried::musl_path().map(|p| (p, "carried by the ipcns executable"))
}

/// The pair of `glibc` and `musl` (see the module doc): its directory.
fn pair(glibc: &Path, musl: &Path) -> Result<PathBuf, String> {
    let canon = |p: &Path| std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()));
    let (g, m) = (canon(glibc)?, canon(musl)?);
    let mut key = g.as_os_str().as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(m.as_os_str().as_bytes());
    let name = format!("ipcns-pair-{:016x}", carried::fnv64(&key));
    let mut why = Vec::new();
    // glibc's own directory, if it is this user's alone (never made).
    if let Some(dir) = g.parent()
        && std::fs::symlink_metadata(dir).is_ok_and(|d| d.is_dir() && carried::ours(&d))
    {
        match make(dir, &name, &g, &m) {
            Ok(p) => return Ok(p),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    for dir in carried::dirs() {
        match carried::own_dir(&dir).and_then(|()| make(&dir, &name, &g, &m)) {
            Ok(p) => return Ok(p),
            Err(e) => why.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!("no directory for the pair: {}", why.join("; ")))
}

/// Whether `p` is this user's pair of `g` and `m`.
fn is_pair(p: &Path, g: &Path, m: &Path) -> bool {
    let link = |l: PathBuf| std::fs::read_link(l).ok();
    std::fs::symlink_metadata(p).is_ok_and(|d| d.is_dir() && carried::ours(&d))
        && link(p.join(PLATFORMS[0]).join(LIBRARY)).as_deref() == Some(g)
        && PLATFORMS[1..]
            .iter()
            .all(|a| link(p.join(a)).as_deref() == Some(Path::new(PLATFORMS[0])))
        && link(entry(p)).as_deref() == Some(m)
}

/// Makes pair `name` in `dir` (a directory of this user's alone): built
/// under a temporary name, then renamed into place; one already there
/// with the right links is kept.
fn make(dir: &Path, name: &str, g: &Path, m: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::{DirBuilderExt, symlink};
    let p = dir.join(name);
    if is_pair(&p, g, m) {
        return Ok(p);
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let mkdir = |d: &Path| std::fs::DirBuilder::new().mode(0o755).create(d);
    let built = (|| {
        mkdir(&tmp)?;
        mkdir(&tmp.join(PLATFORMS[0]))?;
        symlink(g, tmp.join(PLATFORMS[0]).join(LIBRARY))?;
        for a in &PLATFORMS[1..] {
            symlink(PLATFORMS[0], tmp.join(a))?;
        }
        mkdir(&tmp.join(TOKEN))?;
        symlink(m, entry(&tmp))?;
        // Something else under that name (ours: the directory is), unless
        // another run has just made the pair there: gone.
        if std::fs::symlink_metadata(&p).is_ok() && !is_pair(&p, g, m) {
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
        std::fs::rename(&tmp, &p)
    })();
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        // Made by another run meanwhile?
        if is_pair(&p, g, m) {
            return Ok(p);
        }
        return Err(e.to_string());
    }
    Ok(p)
}

/// The files (device, inode) an `LD_PRELOAD` entry `lib` of ours loads:
/// both builds of a pair's entry, else `lib`'s. A previous entry naming
/// one of them is dropped (`plan::ld_preload`): a nested run adds no
/// second copy, and musl's loader never meets glibc's build.
pub fn files_of(lib: &Path) -> Vec<(u64, u64)> {
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let mut v: Vec<(u64, u64)> = id(lib).into_iter().collect();
    if let Some(dir) = lib
        .parent()
        .filter(|d| d.file_name() == Some(OsStr::new(TOKEN)))
        && let Some(pair) = dir.parent()
    {
        v.extend(
            PLATFORMS
                .first()
                .and_then(|p| id(&pair.join(p).join(LIBRARY))),
        );
    }
    v
}

/// The interpreter of `program` (found on `PATH` as exec finds it; a
/// script's `#!` interpreter, through `env` too) if it is musl's
/// dynamic loader (`ld-musl-*`).
pub fn musl_interpreter(program: &OsStr) -> Option<PathBuf> {
    let path = on_path(program)?;
    let head = read_head(&path)?;
    let file = match head.strip_prefix(b"#!") {
        Some(rest) => {
            let line = rest.split(|b| *b == b'\n').next()?;
            let mut words = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty());
            let interp = Path::new(OsStr::from_bytes(words.next()?)).to_path_buf();
            if interp.file_name() == Some(OsStr::new("env")) {
                let prog = words.find(|w| !w.starts_with(b"-"))?;
                on_path(OsStr::from_bytes(prog))?
            } else {
                interp
            }
        }
        None => path,
    };
    let interp = elf_interpreter(&file)?;
    interp
        .file_name()?
        .as_bytes()
        .starts_with(b"ld-musl-")
        .then_some(interp)
}

/// `program` as exec finds it: as given if it has a slash, else the
/// first executable file of that name in `$PATH`.
fn on_path(program: &OsStr) -> Option<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// The first 4 KiB of `p` (enough for a `#!` line and an ELF header).
fn read_head(p: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut b = Vec::new();
    std::fs::File::open(p)
        .ok()?
        .take(4096)
        .read_to_end(&mut b)
        .ok()?;
    Some(b)
}

/// The `PT_INTERP` path of the 64-bit little-endian ELF file `p`, if it
/// has one.
fn elf_interpreter(p: &Path) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    const PT_INTERP: u32 = 3;
    let mut f = std::fs::File::open(p).ok()?;
    let mut h = [0u8; 64];
    f.read_exact(&mut h).ok()?;
    // ELFMAG, ELFCLASS64, ELFDATA2LSB.
    if h[..4] != *b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let (phoff, phentsize, phnum) = (u64_at(&h, 0x20), u16_at(&h, 0x36), u16_at(&h, 0x38));
    if phentsize < 56 {
        return None;
    }
    for i in 0..u64::from(phnum.min(256)) {
        let mut ph = [0u8; 56];
        f.seek(SeekFrom::Start(phoff + i * u64::from(phentsize)))
            .ok()?;
        f.read_exact(&mut ph).ok()?;
        if u32::from_le_bytes(ph[..4].try_into().unwrap()) != PT_INTERP {
            continue;
        }
        let (off, size) = (u64_at(&ph, 8), u64_at(&ph, 32).min(4096));
        let mut s = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off)).ok()?;
        f.read_exact(&mut s).ok()?;
        let end = s.iter().position(|b| *b == 0).unwrap_or(s.len());
        return Some(PathBuf::from(OsStr::from_bytes(&s[..end])));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_are_read_from_elf_files_and_scripts() {
        // This test's own executable: glibc's (or no) interpreter.
        let me = std::env::current_exe().unwrap();
        assert_eq!(musl_interpreter(me.as_os_str()), None);
        assert!(elf_interpreter(&me).is_none_or(|i| !i.to_string_lossy().contains("musl")));
        assert_eq!(musl_interpreter(OsStr::new("/nonexistent/prog")), None);
        let sh = on_path(OsStr::new("sh"));
        assert!(sh.is_some_and(|p| p.is_absolute()));
    }

    #[test]
    fn a_pairs_entry_names_both_builds() {
        let d = std::env::temp_dir().join(format!("ipcns-pair-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let (g, m) = (d.join("g.so"), d.join("m.so"));
        std::fs::write(&g, b"g").unwrap();
        std::fs::write(&m, b"m").unwrap();
        let p = make(&d, "pair", &g, &m).unwrap();
        assert!(is_pair(&p, &g, &m));
        assert_eq!(std::fs::read(entry(&p)).unwrap(), b"m");
        for plat in PLATFORMS {
            assert_eq!(std::fs::read(p.join(plat).join(LIBRARY)).unwrap(), b"g");
        }
        // Made again: the same; for other builds: replaced.
        assert_eq!(make(&d, "pair", &g, &m).unwrap(), p);
        let m2 = d.join("m2.so");
        std::fs::write(&m2, b"m2").unwrap();
        make(&d, "pair", &g, &m2).unwrap();
        assert_eq!(std::fs::read(entry(&p)).unwrap(), b"m2");
        let files = files_of(&entry(&p));
        let id = |f: &Path| {
            let m = std::fs::metadata(f).unwrap();
            (m.dev(), m.ino())
        };
        assert_eq!(files, vec![id(&m2), id(&g)]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
