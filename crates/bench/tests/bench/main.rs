//! Tests of `ipcns-bench` as `ipcns bench` runs it (with the same
//! arguments): output, exit codes and messages. One binary; a module per
//! concern.

mod command;
mod runs;
mod stress;
mod supervisor;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// How many `MEDIAN (MIN-MAX)` cells `line` has, each number a
/// decimal, min <= median <= max.
pub fn spreads(line: &str) -> usize {
    let num = |t: &str| t.parse::<f64>().ok().filter(|x| x.is_finite());
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| {
            let Some(median) = num(w[0]) else {
                return false;
            };
            let Some(range) = w[1].strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
                return false;
            };
            let Some((min, max)) = range.split_once('-') else {
                return false;
            };
            matches!((num(min), num(max)), (Some(a), Some(b)) if a <= median && median <= b)
        })
        .count()
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// A private, empty `IPCNS_DIR`, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "ipcns-bench-{tag}.{}.{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test IPCNS_DIR");
        TempDir(dir)
    }

    /// `ipcns-bench ARGS` with this directory as `IPCNS_DIR`, `IPCNS`
    /// unset and the C locale.
    pub fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ipcns-bench"));
        c.args(args)
            .env("IPCNS_DIR", &self.0)
            .env_remove("IPCNS")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        c
    }

    /// Runs `ipcns-bench ARGS` here (see [`TempDir::command`]).
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.command(args).output().expect("run ipcns-bench")
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
