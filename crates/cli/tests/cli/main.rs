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
mod nscmds;
mod run;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
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

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// A private, empty `IPCNS_DIR`, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "ipcns-cli-{tag}.{}.{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test IPCNS_DIR");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `ipcns ARGS` with this directory as `IPCNS_DIR`, `IPCNS` unset and
    /// the C locale.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipcns"));
        c.args(args)
            .env("IPCNS_DIR", &self.0)
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
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .expect("read the test IPCNS_DIR")
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `c` to completion, killing it if it takes longer than `limit`:
/// `None` then.
pub fn output_within(c: &mut Command, limit: Duration) -> Option<Output> {
    use std::io::Read;
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ipcns");
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
