//! The `ipcns` command: argument parsing and error reporting only; the work is
//! done by the libraries and the modules below.

mod args;
mod bench;
mod docs;
mod help;
mod idmap;
mod ipctools;
mod ns;
mod procfs;
mod run;
mod sysctl;
mod top;

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let argv0 = if args.is_empty() {
        OsString::new()
    } else {
        args.remove(0)
    };
    // Called as ipcs, ipcmk or ipcrm (a link to this binary): that tool.
    if let Some(base) = Path::new(&argv0).file_name().and_then(|b| b.to_str())
        && ipctools::Which::from_name(base).is_some()
    {
        args.insert(0, base.into());
    }
    match run(&args) {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "ipcns: {}", message(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[OsString]) -> anyhow::Result<ExitCode> {
    // `ipcns --ns NAME COMMAND ...` is `ipcns COMMAND --ns NAME ...`.
    let first = args.first().map(|a| a.as_bytes());
    let global = match first {
        Some(b"--ns") if args.len() >= 3 => Some((&args[..2], &args[2..])),
        Some(a) if a.starts_with(b"--ns=") && args.len() >= 2 => Some((&args[..1], &args[1..])),
        _ => None,
    };
    if let Some((opt, rest)) = global {
        let mut moved = vec![rest[0].clone()];
        moved.extend_from_slice(opt);
        moved.extend_from_slice(&rest[1..]);
        return run(&moved);
    }
    let Some((cmd, rest)) = args.split_first() else {
        anyhow::bail!("no command given\nTry 'ipcns --help' for more information.");
    };
    match cmd.to_string_lossy().as_ref() {
        "idmap" => idmap::run(rest),
        "bench" => bench::run(&args::all_utf8("bench", rest)?),
        "run" => run::run(rest),
        "__supervise" => run::supervisor::main(rest),
        name @ ("ipcs" | "ipcmk" | "ipcrm" | "sysctl" | "proc" | "ns" | "top") => {
            let (ns_name, rest) = ns::take_ns_option(rest)?;
            match name {
                "ns" => ns::run(&ns_name, &rest),
                "sysctl" => sysctl::run(&ns_name, &args::all_utf8(name, &rest)?),
                "proc" => procfs::run(&ns_name, &args::all_utf8(name, &rest)?),
                "top" => top::run(&ns_name, &args::all_utf8(name, &rest)?),
                tool => {
                    let which = ipctools::Which::from_name(tool).expect("one of the three tools");
                    ipctools::run(which, &ns_name, &rest)
                }
            }
        }
        "-V" | "--version" => print_out(&format!("ipcns {}\n", env!("CARGO_PKG_VERSION"))),
        "-h" | "--help" => print_out(help::USAGE),
        "help" => print_out(&help::text(rest)?),
        "man" => match rest {
            [] => print_out(&docs::man()),
            [extra, ..] => anyhow::bail!("man: unexpected argument {extra:?}"),
        },
        "completions" => match rest {
            [shell] => print_out(&docs::completions(&shell.to_string_lossy())?),
            _ => anyhow::bail!(
                "completions: name one shell: bash, zsh or fish\nTry 'ipcns help' for more information."
            ),
        },
        _ => anyhow::bail!("unknown command {cmd:?} ('ipcns help' lists them)"),
    }
}

/// The error and its causes, each said once: anyhow's `{:#}` would repeat
/// a source that the message above it already includes (an
/// `ArenaError::Io` prints its `io::Error` as part of its own text).
pub(crate) fn message(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = without_os_error(&cause.to_string());
        if text.contains(&c) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&c);
    }
    text
}

/// `text` without the " (os error N)" that Rust's io::Error adds to the
/// C library's message (util-linux's tools print strerror's text alone).
pub(crate) fn without_os_error(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(i)
            if text.ends_with(')')
                && text[i + 11..text.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit()) =>
        {
            text[..i].to_string()
        }
        _ => text.to_string(),
    }
}

/// Writes `text` to standard output (a broken pipe surfaces as an error
/// that `main` treats as success).
fn print_out(text: &str) -> anyhow::Result<ExitCode> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::message;
    use anyhow::Context;

    #[test]
    fn a_source_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::from_raw_os_error(libc::EACCES);
        let e = Err::<(), _>(ipcns::ArenaError::Io {
            path: "/x/ipcns.a".into(),
            source: io,
        })
        .context("namespace a")
        .unwrap_err();
        assert_eq!(message(&e), "namespace a: /x/ipcns.a: Permission denied");
        // A cause that adds something is kept (without Rust's "(os error
        // N)", as the C library's tools print strerror's text).
        let e = Err::<(), _>(std::io::Error::from_raw_os_error(libc::ENOENT))
            .context("read map")
            .unwrap_err();
        assert_eq!(message(&e), "read map: No such file or directory");
    }
}
