//! Command-line arguments as the program gets them: bytes (`OsString`), so
//! that nothing panics on text that is not UTF-8. File names stay
//! `OsString`; arguments that must be text are converted here, with an
//! error that names them.

use anyhow::bail;
use std::ffi::{OsStr, OsString};

/// `arg` as text, or an error naming it (`sysctl: argument "\xFF" is not
/// UTF-8 text`).
pub fn utf8<'a>(cmd: &str, arg: &'a OsStr) -> anyhow::Result<&'a str> {
    match arg.to_str() {
        Some(s) => Ok(s),
        None => bail!("{cmd}: argument {arg:?} is not UTF-8 text"),
    }
}

/// Every argument as text (see [`utf8`]).
pub fn all_utf8(cmd: &str, args: &[OsString]) -> anyhow::Result<Vec<String>> {
    args.iter()
        .map(|a| utf8(cmd, a).map(str::to_string))
        .collect()
}

/// Whether `-h` or `--help` comes before any `--`: the command's help is
/// wanted, whatever else the line says.
pub fn wants_help(args: &[OsString]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
}
