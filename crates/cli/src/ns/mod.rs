//! `ipcns ns create|list|info|check|remove|prune`; attaching to the namespace that
//! the other namespace commands work on is in [`attach`].

mod attach;
mod list;

use anyhow::{Context, bail};
use ipcns::sysv::{self, NsCaller};
use ipcns::{Census, CreateOptions, Namespace, abi};
use lexopt::prelude::*;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;

pub const USAGE: &str = "\
usage: ipcns ns create NAME [--extend] [--mode OCTAL]
       ipcns ns list
       ipcns ns info [NAME]
       ipcns ns check [NAME]
       ipcns ns remove NAME...
       ipcns ns prune [--dry-run]
Namespaces are arena files ipcns.NAME in $IPCNS_DIR (default /dev/shm/ipcns-UID).
list shows each one's owner, mode, the bytes it takes (arena and segments) and name.
Without NAME, info and check work on the namespace of --ns, $IPCNS, else default;
check prints \"ok: ...\" and exits 0, or prints each problem found and exits 1.
prune removes the namespaces ipcns run --private and unshare(CLONE_NEWIPC) made
(run-PID-*, unshare-PID-*) that no process uses any more.";

use attach::open;
pub use attach::{attach, check_dir, existing, take_ns_option, valid_name};

pub fn run(ns_name: &str, args: &[OsString]) -> anyhow::Result<ExitCode> {
    if crate::args::wants_help(args) {
        return crate::print_out(&format!("{USAGE}\n"));
    }
    let Some((cmd, rest)) = args.split_first() else {
        bail!("ns: no subcommand\nTry 'ipcns ns --help' for more information.");
    };
    let mut p = lexopt::Parser::from_args(rest.iter().cloned());
    match cmd.to_string_lossy().as_ref() {
        "create" => create(&mut p),
        "list" => {
            if let Some(a) = p.next()? {
                return Err(a.unexpected().into());
            }
            check_dir()?;
            let text = list::text()?;
            crate::print_out(&text)
        }
        "info" => {
            let ns = match one_name(&mut p, false)? {
                Some(n) => open(&n)?,
                None => existing(ns_name)?,
            };
            crate::print_out(&info(&ns)?)
        }
        "check" => {
            let ns = match one_name(&mut p, false)? {
                Some(n) => open(&n)?,
                None => existing(ns_name)?,
            };
            check(&ns)
        }
        "remove" => {
            let mut names = Vec::new();
            while let Some(a) = p.next()? {
                match a {
                    Value(v) => names.push(valid_name(&v)?),
                    other => return Err(other.unexpected().into()),
                }
            }
            if names.is_empty() {
                bail!("a namespace NAME is required\nTry 'ipcns ns --help' for more information.");
            }
            check_dir()?;
            // Each in turn; a failure is said and the others still go.
            let mut failed = false;
            for name in &names {
                if let Err(e) = Namespace::remove(name) {
                    eprintln!("ipcns: {}", crate::message(&anyhow::Error::new(e)));
                    failed = true;
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        "prune" => {
            let mut dry = false;
            while let Some(a) = p.next()? {
                match a {
                    Short('n') | Long("dry-run") => dry = true,
                    other => return Err(other.unexpected().into()),
                }
            }
            check_dir()?;
            list::prune(dry)
        }
        "help" => crate::print_out(&format!("{USAGE}\n")),
        _ => bail!("ns: unknown subcommand {cmd:?}\nTry 'ipcns ns --help' for more information."),
    }
}

/// The NAME operand, checked.
fn one_name(p: &mut lexopt::Parser, required: bool) -> anyhow::Result<Option<String>> {
    let mut name = None;
    while let Some(a) = p.next()? {
        match a {
            Value(v) if name.is_none() => name = Some(valid_name(&v)?),
            other => return Err(other.unexpected().into()),
        }
    }
    if required && name.is_none() {
        bail!("a namespace NAME is required\nTry 'ipcns ns --help' for more information.");
    }
    Ok(name)
}

fn create(p: &mut lexopt::Parser) -> anyhow::Result<ExitCode> {
    let mut opts = CreateOptions::default();
    let mut name = None;
    while let Some(a) = p.next()? {
        match a {
            Long("extend") => opts.extend = true,
            Long("mode") => {
                let v = p.value()?;
                opts.mode = v
                    .to_str()
                    .and_then(|v| u32::from_str_radix(v, 8).ok())
                    .filter(|m| *m <= 0o7777)
                    .with_context(|| format!("--mode {v:?}: not an octal file mode"))?;
            }
            Value(v) if name.is_none() => name = Some(valid_name(&v)?),
            other => return Err(other.unexpected().into()),
        }
    }
    let Some(name) = name else {
        bail!("a namespace NAME is required\nTry 'ipcns ns --help' for more information.");
    };
    check_dir()?;
    // The library gives the file exactly `opts.mode`, whatever the umask.
    let ns = Namespace::create(&name, opts)?;
    crate::print_out(&format!("{}\n", ns.path().display()))
}

/// `ns check`: the census, or each problem on its own line and exit 1.
fn check(ns: &Namespace) -> anyhow::Result<ExitCode> {
    match problems(ns) {
        Ok(c) => crate::print_out(&format!(
            "ok: {} semaphore sets, {} queues, {} segments\n",
            c.sem, c.msg, c.shm
        )),
        Err(problems) => {
            let mut out = String::new();
            for p in problems {
                out.push_str(&p);
                out.push('\n');
            }
            crate::print_out(&out)?;
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The namespace's consistency check: what it holds, or every problem
/// found (today the library stops at the first one).
fn problems(ns: &Namespace) -> Result<Census, Vec<String>> {
    // Clean up after processes that died without exiting through ipcns,
    // as any caller would, then check.
    let _ = ipcns::with_lock_limit(INFO_LOCKS, || ns.reap_exited());
    match ns.problems() {
        (census, p) if p.is_empty() => Ok(census),
        (_, p) => Err(p),
    }
}

/// How long `ns info` waits for the arena's locks, in all: a lock kept by
/// a stopped participant is named, never waited for.
const INFO_LOCKS: std::time::Duration = std::time::Duration::from_secs(3);

/// The text of `ns info`.
fn info(ns: &Namespace) -> anyhow::Result<String> {
    ipcns::with_lock_limit(INFO_LOCKS, || info_bounded(ns))
}

fn info_bounded(ns: &Namespace) -> anyhow::Result<String> {
    let meta = std::fs::metadata(ns.path()).with_context(|| format!("{}", ns.path().display()))?;
    let cred = (*ns.cred()?).clone();
    let sys = NsCaller { ns, cred };
    // The locks first: a registry held by a live holder (one that is
    // stopped, say) would block its INFO call, so it is named instead.
    let held = ns.lock_holders();
    let busy = |m: &str| {
        held.iter().find_map(|(name, h)| {
            (name == &format!("{m} registry") && h.verdict == ipcns::Liveness::Alive)
                .then(|| format!("(not counted: its registry is held by thread {})", h.tid))
        })
    };
    let sem = match busy("sem") {
        Some(why) => why,
        None => {
            let (_, i) = sysv::sem_info(&sys, abi::SEM_INFO)?;
            format!("{} sets, {} semaphores", i.semusz, i.semaem)
        }
    };
    let msg = match busy("msg") {
        Some(why) => why,
        None => {
            let (_, i) = sysv::msg_info(&sys, abi::MSG_INFO)?;
            format!(
                "{} queues, {} messages, {} bytes queued",
                i.msgpool, i.msgmap, i.msgtql
            )
        }
    };
    let shm = match busy("shm") {
        Some(why) => why,
        None => {
            let (_, i) = sysv::shm_shm_info(&sys)?;
            format!("{} segments, {} pages", i.used_ids, i.shm_tot)
        }
    };
    Ok(format!(
        "name:    {}\n\
         path:    {}\n\
         size:    {} bytes ({} allocated)\n\
         mode:    {:04o} (owner {}, group {})\n\
         extend:  {} (ipc_mni {}, {}-bit index)\n\
         sem:     {sem}\n\
         msg:     {msg}\n\
         shm:     {shm}\n\
         heap:    {}\n\
         locks:   {}\n",
        ns.name(),
        ns.path().display(),
        meta.len(),
        meta.blocks() * 512,
        meta.mode() & 0o7777,
        meta.uid(),
        meta.gid(),
        if ns.extend() { "yes" } else { "no" },
        ns.ipc_mni(),
        ns.index_bits(),
        heap_report(&ns.heap_stats()),
        lock_report(&held),
    ))
}

/// The heap's line: bytes in use, free on the lists, free in the per-cpu
/// caches (and over how many cpus), of the bytes handed out so far.
fn heap_report(s: &ipcns::HeapStats) -> String {
    let caches = match s.cache_cpus {
        0 => "no per-cpu caches".to_string(),
        1 => format!("{} in the per-cpu cache of 1 cpu", s.cached),
        n => format!("{} in the per-cpu caches of {n} cpus", s.cached),
    };
    format!(
        "{} bytes in use, {} free ({caches}), {} handed out",
        s.in_use,
        s.listed + s.cached,
        s.used
    )
}

/// The held namespace locks: `none held`, or each with its holder's thread
/// id and state (a stopped holder stalls everyone: this names it).
fn lock_report(held: &[(String, ipcns::Holder)]) -> String {
    if held.is_empty() {
        return "none held".to_string();
    }
    held.iter()
        .map(|(name, h)| {
            let who = match (h.tid, h.state, h.verdict) {
                (0, _, _) => "free, awaiting repair".to_string(),
                (tid, _, ipcns::Liveness::Gone) => format!("held by dead thread {tid}"),
                (tid, Some(s), _) => format!("held by thread {tid} (state {s})"),
                (tid, None, _) => format!("held by thread {tid}"),
            };
            format!(
                "{name} {who}{}",
                if h.dirty { ", repair pending" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
