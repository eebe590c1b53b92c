//! `ipcns idmap ...`: the id-map tools on top of `ipcns-idmap`.

use anyhow::{Context, anyhow, bail};
use ipcns_idmap::proc::{IdKind, Pid, Setgroups, read_map, write_maps};
use ipcns_idmap::{ExceptLayout, IdMap, MAX_INLINE_EXTENTS, MAX_WRITE, OVERFLOW_ID};
use lexopt::prelude::*;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns idmap show PID
       ipcns idmap check FILE|- [--parent FILE]
       ipcns idmap split FILE|- --parent FILE
       ipcns idmap map PID [--uid N] [--gid N]
       ipcns idmap except --count N --host-base H [--first F] [--keep ID[,ID...]]...
       ipcns idmap write PID [--uid-map FILE|-] [--gid-map FILE|-] [--setgroups auto|deny|leave]
PID may be 'self'.";

pub fn run(args: &[OsString]) -> anyhow::Result<ExitCode> {
    if crate::args::wants_help(args) {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let Some((cmd, rest)) = args.split_first() else {
        bail!("idmap: no subcommand\nTry 'ipcns idmap --help' for more information.");
    };
    let mut p = lexopt::Parser::from_args(rest.iter().cloned());
    match cmd.to_string_lossy().as_ref() {
        "show" => show(&mut p),
        "check" => check(&mut p),
        "split" => split(&mut p),
        "map" => map(&mut p),
        "except" => except(&mut p),
        "write" => write(&mut p),
        "help" => crate::print_out(&format!("{USAGE}\n")),
        _ => bail!(
            "idmap: unknown subcommand {cmd:?}\nTry 'ipcns idmap --help' for more information."
        ),
    }
}

fn parse_pid(s: &OsStr) -> anyhow::Result<Pid> {
    if s == "self" {
        return Ok(Pid::SelfProcess);
    }
    s.to_str()
        .and_then(|s| s.parse::<u32>().ok())
        .filter(|&p| p > 0)
        .map(Pid::Id)
        .ok_or_else(|| anyhow!("invalid pid {s:?}"))
}

fn parse_u32(what: &str, s: &OsStr) -> anyhow::Result<u32> {
    s.to_str()
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| anyhow!("{what}: {s:?} is not a number from 0 to 4294967295"))
}

fn one_pid(p: &mut lexopt::Parser) -> anyhow::Result<Pid> {
    match p.next()? {
        Some(Value(v)) => parse_pid(&v),
        Some(other) => Err(other.unexpected().into()),
        None => bail!("a PID is required\nTry 'ipcns idmap --help' for more information."),
    }
}

/// How much of a map is read: what the kernel would take, and a byte
/// more. A write to uid_map of 4096 bytes or more is EINVAL
/// (kernel/user_namespace.c `map_write`), so reading on could only make
/// the parser's same refusal slower, or endless (`/dev/zero`).
const READ_LIMIT: u64 = MAX_WRITE as u64 + 2;

/// Reads map text (at most [`READ_LIMIT`] bytes) from a file, or standard
/// input for `-`.
fn read_text(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut v = Vec::new();
    if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(READ_LIMIT)
            .read_to_end(&mut v)
            .context("read standard input")?;
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(READ_LIMIT).read_to_end(&mut v))
            .with_context(|| format!("read {}", path.display()))?;
    }
    Ok(v)
}

fn parse_map(path: &Path) -> anyhow::Result<IdMap> {
    let text = read_text(path)?;
    IdMap::parse(&text).map_err(|e| {
        let unread = if text.len() as u64 == READ_LIMIT {
            " (the rest was not read)"
        } else {
            ""
        };
        anyhow!("{}: {}: {e}{unread}", path.display(), e.errno)
    })
}

fn form(map: &IdMap) -> String {
    match map.len() {
        0 => "not written: maps nothing, every id reads as 65534".to_string(),
        n if n <= MAX_INLINE_EXTENTS => format!(
            "{n} extent{}; Linux keeps up to {MAX_INLINE_EXTENTS} inline and scans them linearly",
            if n == 1 { "" } else { "s" }
        ),
        n => format!(
            "{n} extents; Linux keeps 6 to 340 in forward and reverse arrays sorted by id and binary-searches them"
        ),
    }
}

fn show(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let pid = one_pid(p)?;
    if let Some(arg) = p.next()? {
        return Err(arg.unexpected().into());
    }
    let mut out = String::new();
    for kind in [IdKind::Uid, IdKind::Gid] {
        let map = read_map(pid, kind)
            .with_context(|| format!("read the {}_map of {pid}", kind.name()))?;
        out.push_str(&format!(
            "{}_map of {pid}: {}\n{map}",
            kind.name(),
            form(&map)
        ));
    }
    crate::print_out(&out)
}

/// `FILE|-` and an optional `--parent FILE`, in any order.
fn file_and_parent(
    p: &mut lexopt::Parser,
    cmd: &str,
) -> anyhow::Result<(PathBuf, Option<PathBuf>)> {
    let (mut file, mut parent) = (None, None);
    while let Some(arg) = p.next()? {
        match arg {
            Long("parent") => parent = Some(PathBuf::from(p.value()?)),
            Value(v) if file.is_none() => file = Some(PathBuf::from(v)),
            _ => return Err(arg.unexpected().into()),
        }
    }
    let file = file.ok_or_else(|| {
        anyhow!("{cmd}: FILE or - is required\nTry 'ipcns idmap --help' for more information.")
    })?;
    Ok((file, parent))
}

fn check(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let (file, parent) = file_and_parent(p, "check")?;
    let map = parse_map(&file)?;
    if let Some(parent) = parent {
        let parent_map = parse_map(&parent)?;
        if let Err(e) = map.compose(&parent_map) {
            let (file, parent) = (file.display(), parent.display());
            bail!("{file}: {}: {e} (parent map {parent})", e.errno);
        }
    }
    crate::print_out(&format!("{}: valid, {}\n", file.display(), form(&map)))
}

/// Prints the map cut at the parent's extent boundaries, ready to write.
fn split(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let (file, parent) = file_and_parent(p, "split")?;
    let parent = parent.ok_or_else(|| {
        anyhow!("split: --parent FILE is required\nTry 'ipcns idmap --help' for more information.")
    })?;
    let (map, parent_map) = (parse_map(&file)?, parse_map(&parent)?);
    let split = map.split_for_parent(&parent_map).map_err(|e| {
        let (file, parent) = (file.display(), parent.display());
        anyhow!("{file}: {}: {e} (parent map {parent})", e.errno)
    })?;
    crate::print_out(&split.to_compact_text())
}

fn map(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let pid = one_pid(p)?;
    let mut asks = Vec::new();
    while let Some(arg) = p.next()? {
        match arg {
            Long("uid") => asks.push((IdKind::Uid, parse_u32("--uid", &p.value()?)?)),
            Long("gid") => asks.push((IdKind::Gid, parse_u32("--gid", &p.value()?)?)),
            _ => return Err(arg.unexpected().into()),
        }
    }
    if asks.is_empty() {
        bail!("map: give --uid N and/or --gid N\nTry 'ipcns idmap --help' for more information.");
    }
    let mut out = String::new();
    for (kind, id) in asks {
        let m = read_map(pid, kind)
            .with_context(|| format!("read the {}_map of {pid}", kind.name()))?;
        let k = kind.name();
        let show = |x: Option<u32>| match x {
            Some(v) => v.to_string(),
            None => format!("{OVERFLOW_ID} (unmapped)"),
        };
        out.push_str(&format!(
            "{k} {id} inside {pid}'s namespace is {} outside\n\
             {k} {id} outside is {} inside {pid}'s namespace\n",
            show(m.map_down(id)),
            show(m.map_up(id))
        ));
    }
    crate::print_out(&out)
}

fn except(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let (mut first, mut count, mut host_base, mut keep) = (0u32, None, None, Vec::new());
    while let Some(arg) = p.next()? {
        match arg {
            Long("first") => first = parse_u32("--first", &p.value()?)?,
            Long("count") => count = Some(parse_u32("--count", &p.value()?)?),
            Long("host-base") => host_base = Some(parse_u32("--host-base", &p.value()?)?),
            Long("keep") => {
                let ids = p.value()?;
                for id in ids
                    .as_bytes()
                    .split(|&b| b == b',')
                    .filter(|s| !s.is_empty())
                {
                    keep.push(parse_u32("--keep", OsStr::from_bytes(id))?);
                }
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    let layout = ExceptLayout {
        first,
        count: count.ok_or_else(|| {
            anyhow!("except: --count is required\nTry 'ipcns idmap --help' for more information.")
        })?,
        host_base: host_base.ok_or_else(|| {
            anyhow!(
                "except: --host-base is required\nTry 'ipcns idmap --help' for more information."
            )
        })?,
        keep,
    };
    let map = layout.build().map_err(|e| anyhow!("{}: {e}", e.errno))?;
    crate::print_out(&map.to_compact_text())
}

fn write(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let pid = one_pid(p)?;
    let (mut uid, mut gid, mut setgroups) = (None, None, Setgroups::Auto);
    while let Some(arg) = p.next()? {
        match arg {
            Long("uid-map") => uid = Some(parse_map(Path::new(&p.value()?))?),
            Long("gid-map") => gid = Some(parse_map(Path::new(&p.value()?))?),
            Long("setgroups") => {
                let v = p.value()?;
                setgroups = match v.to_str() {
                    Some("auto") => Setgroups::Auto,
                    Some("deny") => Setgroups::Deny,
                    Some("leave") => Setgroups::Leave,
                    _ => bail!("--setgroups: {v:?} is not auto, deny or leave"),
                }
            }
            _ => return Err(arg.unexpected().into()),
        }
    }
    if uid.is_none() && gid.is_none() {
        bail!(
            "write: give --uid-map FILE and/or --gid-map FILE\nTry 'ipcns idmap --help' for more information."
        );
    }
    write_maps(pid, uid.as_ref(), gid.as_ref(), setgroups)?;
    Ok(ExitCode::SUCCESS)
}
