//! Tests of the `ipcns` command as a user runs it: output, exit codes and
//! messages. One binary; a module per command family.

mod fuzz;
mod idmap;
mod ipcmk;
mod ipcrm;
mod ipcs;
mod kernel;
mod nscmds;

use std::process::{Command, Output, Stdio};

/// Runs `ipcns ARGS` with `stdin` as standard input.
pub fn ipcns(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ipcns"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ipcns");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
