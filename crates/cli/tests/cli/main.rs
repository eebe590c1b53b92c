//! Tests of the `ipcns` command as a user runs it: output, exit codes and
//! messages. One binary; a module per command family.

mod adversary;
mod bench;
mod command;
mod fuzz;
mod idmap;
mod ipcmk;
mod ipcrm;
mod ipcs;
mod kernel;
mod musl;
mod nscmds;
mod run;
mod static_programs;
mod top;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `ipcns ARGS` with `stdin` as standard input.
pub fn ipcns(args: &[&str], stdin: &str) -> Output {
    ipcns_os(args, stdin)
}

/// [`ipcns`] with arguments that need not be UTF-8.
pub fn ipcns_os<S: AsRef<OsStr>>(args: &[S], stdin: &str) -> Output {
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

/// A private, empty `IPCNS_DIR` (`ipcns-cli-TAG`), removed on drop.
pub struct TempDir(ipcns_testkit::TempDir);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(ipcns_testkit::TempDir::new(&format!("ipcns-cli-{tag}")))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// `ipcns ARGS` with this directory as `IPCNS_DIR`, `IPCNS` unset and
    /// the C locale.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        c.args(args)
            .env("IPCNS_DIR", self.path())
            .env_remove("IPCNS")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        c
    }

    /// Runs `ipcns ARGS` here (see [`TempDir::command`]).
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.command(args).output().expect("run ipcns")
    }

    /// The names in the directory.
    pub fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path())
            .expect("read the test IPCNS_DIR")
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

/// Runs `c` to completion, killing it if it takes longer than `limit`:
/// `None` then.
pub fn output_within(c: &mut Command, limit: Duration) -> Option<Output> {
    use std::io::Read;
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    // ETXTBSY: an executable a test just copied is still open for writing
    // in a child another test thread forked meanwhile (its descriptor is
    // close-on-exec, but open until that child's exec): again, shortly.
    let mut tries = 0;
    let mut child = loop {
        match c.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => break r.expect("run ipcns"),
        }
    };
    // Drain both pipes meanwhile, so that a chatty child cannot block.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for ipcns") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}
