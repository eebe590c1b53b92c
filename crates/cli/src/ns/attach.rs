//! Which namespace a command works on and attaching to it: the `--ns NAME`
//! option every namespace command takes, `$IPCNS`, the name's rule, and
//! the directory, each checked before the library is asked so that a
//! problem is named as what it is.

use anyhow::{Context, bail};
use ipcns::namespace::{check_name, default_name, dir};
use ipcns::{ArenaError, Namespace};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// Splits `--ns NAME` / `--ns=NAME` (before any `--`) off `args`: the
/// namespace to use (`$IPCNS`, else `default`, when absent), its name
/// checked, and the rest.
pub fn take_ns_option(args: &[OsString]) -> anyhow::Result<(String, Vec<OsString>)> {
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
        } else if let Some(v) = a.as_bytes().strip_prefix(b"--ns=") {
            name = Some(OsStr::from_bytes(v).to_owned());
        } else {
            rest.push(a.clone());
        }
    }
    let name = match name {
        Some(n) => valid_name(&n)?,
        None => default_ns()?,
    };
    Ok((name, rest))
}

/// `name` if it is a valid namespace name, else an error saying so (the
/// library's rule, said with the name as given).
pub fn valid_name(name: &OsStr) -> anyhow::Result<String> {
    // The rule admits ASCII only, so a name that passes is its lossy text.
    let text = name.to_string_lossy();
    match check_name(&text) {
        Ok(()) => Ok(text.into_owned()),
        Err(ArenaError::BadName { why, .. }) => bail!("invalid namespace name {name:?}: {why}"),
        Err(e) => Err(e.into()),
    }
}

/// The namespace named by `$IPCNS`, else `default`.
fn default_ns() -> anyhow::Result<String> {
    match std::env::var_os("IPCNS") {
        Some(v) if !v.is_empty() => valid_name(&v).context("$IPCNS"),
        _ => Ok(default_name()),
    }
}

/// Fails unless the namespace directory exists: the library, asked to
/// attach there, would name a missing temporary file instead.
pub fn check_dir() -> anyhow::Result<()> {
    let d = dir()?;
    let from = if std::env::var_os("IPCNS_DIR").is_some() {
        " ($IPCNS_DIR)"
    } else {
        ""
    };
    match std::fs::metadata(&d) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!(
            "{}: the namespace directory{from} is not a directory",
            d.display()
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            bail!(
                "{}: the namespace directory{from} does not exist",
                d.display()
            )
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("{}", d.display()))),
    }
}

/// Attaches to namespace `name`, creating it on first use.
pub fn attach(name: &str) -> anyhow::Result<Namespace> {
    check_dir()?;
    Namespace::open_or_create(name).with_context(|| format!("namespace {name}"))
}

/// Attaches to namespace `name`, which must exist.
pub fn open(name: &str) -> anyhow::Result<Namespace> {
    check_dir()?;
    Ok(Namespace::open(name)?)
}

/// Attaches to namespace `name` for a command that only reads it or
/// changes what is in it (ipcs, ipcrm, proc, sysctl, `ns info`): a
/// missing namespace is an error that says how one is made, never made
/// (a mistyped `--ns` used to leave a new empty namespace behind).
pub fn existing(name: &str) -> anyhow::Result<Namespace> {
    check_dir()?;
    match Namespace::open(name) {
        Err(ArenaError::NotFound { .. }) => bail!(
            "no such namespace: {name} (ipcns ns list shows them; ipcmk, 'ipcns ns create {name}' \
             or 'ipcns run --ns {name}' makes one)"
        ),
        r => r.with_context(|| format!("namespace {name}")),
    }
}
