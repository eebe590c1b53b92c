//! `ipcns ns create|list|info|remove`, and the `--ns NAME` option every
//! namespace command takes.

use anyhow::{Context, bail};
use ipcns::namespace::default_name;
use ipcns::sysv::{self, NsCaller};
use ipcns::{CreateOptions, Namespace, abi};
use lexopt::prelude::*;
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;

const USAGE: &str = "\
usage: ipcns ns create NAME [--extend] [--mode OCTAL]
       ipcns ns list
       ipcns ns info [NAME]
       ipcns ns remove NAME
Namespaces are arena files ipcns.NAME in $IPCNS_DIR (default /dev/shm/ipcns-UID).
Another user's namespace is used only if created shared and IPCNS_SHARED=1.";

/// Splits `--ns NAME` / `--ns=NAME` (before any `--`) off `args`: the
/// namespace to use (`$IPCNS`, else `default`, when absent) and the rest.
pub fn take_ns_option(args: &[String]) -> anyhow::Result<(String, Vec<String>)> {
    let mut name = None;
    let mut rest = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            rest.push(a.clone());
            rest.extend(it.by_ref().cloned());
            break;
        }
        if a == "--ns" {
            match it.next() {
                Some(v) => name = Some(v.clone()),
                None => bail!("option '--ns' requires a namespace name"),
            }
        } else if let Some(v) = a.strip_prefix("--ns=") {
            name = Some(v.to_string());
        } else {
            rest.push(a.clone());
        }
    }
    Ok((name.unwrap_or_else(default_name), rest))
}

/// Attaches to namespace `name`, creating it on first use.
pub fn attach(name: &str) -> anyhow::Result<Namespace> {
    Namespace::open_or_create(name).with_context(|| format!("namespace {name}"))
}

pub fn run(ns_name: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    let Some((cmd, rest)) = args.split_first() else {
        bail!("ns: no subcommand\n{USAGE}");
    };
    let mut p = lexopt::Parser::from_args(rest.iter().cloned());
    match cmd.as_str() {
        "create" => create(&mut p),
        "list" => {
            if let Some(a) = p.next()? {
                return Err(a.unexpected().into());
            }
            let names = Namespace::list()?;
            let mut out = String::new();
            for n in names {
                out.push_str(&n);
                out.push('\n');
            }
            crate::print_out(&out)
        }
        "info" => {
            let name = one_name(&mut p, false)?;
            let ns = match name {
                Some(n) => Namespace::open(&n)?,
                None => attach(ns_name)?,
            };
            crate::print_out(&info(&ns)?)
        }
        "remove" => {
            let name = one_name(&mut p, true)?.unwrap_or_default();
            Namespace::remove(&name)?;
            Ok(ExitCode::SUCCESS)
        }
        "-h" | "--help" | "help" => crate::print_out(&format!("{USAGE}\n")),
        other => bail!("ns: unknown subcommand {other:?}\n{USAGE}"),
    }
}

fn one_name(p: &mut lexopt::Parser, required: bool) -> anyhow::Result<Option<String>> {
    let mut name = None;
    while let Some(a) = p.next()? {
        match a {
            Value(v) if name.is_none() => name = Some(v.string()?),
            other => return Err(other.unexpected().into()),
        }
    }
    if required && name.is_none() {
        bail!("a namespace NAME is required\n{USAGE}");
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
                let v = p.value()?.string()?;
                opts.mode = u32::from_str_radix(&v, 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .with_context(|| format!("--mode {v:?}: not an octal file mode"))?;
            }
            Value(v) if name.is_none() => name = Some(v.string()?),
            other => return Err(other.unexpected().into()),
        }
    }
    let Some(name) = name else {
        bail!("a namespace NAME is required\n{USAGE}");
    };
    // The library gives the file exactly `opts.mode`, whatever the umask.
    let ns = Namespace::create(&name, opts)?;
    crate::print_out(&format!("{}\n", ns.arena().path().display()))
}

/// The text of `ns info`.
fn info(ns: &Namespace) -> anyhow::Result<String> {
    let a = ns.arena();
    let meta = std::fs::metadata(a.path()).with_context(|| format!("{}", a.path().display()))?;
    let l = a.layout();
    let cred = (*ns.cred()?).clone();
    let sys = NsCaller { ns, cred };
    let (_, sem) = sysv::sem_info(&sys, abi::SEM_INFO)?;
    let (_, msg) = sysv::msg_info(&sys, abi::MSG_INFO)?;
    let (_, shm) = sysv::shm_shm_info(&sys)?;
    Ok(format!(
        "name:    {}\n\
         path:    {}\n\
         size:    {} bytes ({} allocated)\n\
         mode:    {:04o} (owner {}, group {})\n\
         extend:  {} (ipc_mni {}, {}-bit index)\n\
         sem:     {} sets, {} semaphores\n\
         msg:     {} queues, {} messages, {} bytes queued\n\
         shm:     {} segments, {} pages\n\
         heap:    {} bytes in use\n",
        ns.name(),
        a.path().display(),
        meta.len(),
        meta.blocks() * 512,
        meta.mode() & 0o7777,
        meta.uid(),
        meta.gid(),
        if l.extend { "yes" } else { "no" },
        l.ipc_mni,
        l.shift,
        sem.semusz,
        sem.semaem,
        msg.msgpool,
        msg.msgmap,
        msg.msgtql,
        shm.used_ids,
        shm.shm_tot,
        ns.heap_in_use(),
    ))
}
