//! `ipcns ipcs|ipcmk|ipcrm`: util-linux 2.38.1's tools over an ipcns
//! namespace, with their options, output, messages and exit codes.
//!
//! The tools are written against `ipcns_oracle::SysV`, one interface over
//! a namespace and the host kernel; they read what util-linux
//! reads (/proc/sysvipc text, /proc/sys/kernel values, the `*_INFO` and
//! `*_STAT` commands) through it. Messages go to stderr with the tool's
//! name, as `err(3)` and `warnx(3)` print them; standard output is
//! collected and written once, as stdio would flush it at exit.

mod cnum;
mod details;
mod getopt;
mod host;
mod ipcmk;
mod ipcrm;
mod ipcs;
mod rows;
mod size;

use ipcns::Namespace;
use ipcns_oracle::sysv::NsCaller;
use std::io::Write;
use std::process::ExitCode;

/// The three tools.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Which {
    Ipcs,
    Ipcmk,
    Ipcrm,
}

impl Which {
    pub fn from_name(s: &str) -> Option<Which> {
        match s {
            "ipcs" => Some(Which::Ipcs),
            "ipcmk" => Some(Which::Ipcmk),
            "ipcrm" => Some(Which::Ipcrm),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Which::Ipcs => "ipcs",
            Which::Ipcmk => "ipcmk",
            Which::Ipcrm => "ipcrm",
        }
    }
}

/// A tool ending with this exit status (`exit(3)` from deep inside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub u8);

/// `EXIT_FAILURE`.
pub const FAILURE: Exit = Exit(1);

/// A running tool: its name for messages and the standard output so far.
pub struct Tool {
    prog: &'static str,
    pub out: Vec<u8>,
}

/// `strerror(errno)` in the C locale.
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

impl Tool {
    fn new(prog: &'static str) -> Tool {
        Tool {
            prog,
            out: Vec::new(),
        }
    }

    fn stderr(&self, text: &str) {
        let _ = std::io::stderr().write_all(text.as_bytes());
    }

    /// `warnx(msg)`.
    pub fn warnx(&self, msg: &str) {
        self.stderr(&format!("{}: {msg}\n", self.prog));
    }

    /// `warn(msg)` with this errno.
    pub fn warn(&self, errno: i32, msg: &str) {
        self.stderr(&format!("{}: {msg}: {}\n", self.prog, strerror(errno)));
    }

    /// `err(EXIT_FAILURE, msg)` with this errno.
    pub fn err(&self, errno: i32, msg: &str) -> Exit {
        self.warn(errno, msg);
        FAILURE
    }

    /// `errx(EXIT_FAILURE, msg)`.
    pub fn errx(&self, msg: &str) -> Exit {
        self.warnx(msg);
        FAILURE
    }

    /// `errtryhelp(EXIT_FAILURE)`.
    pub fn errtryhelp(&self) -> Exit {
        self.stderr(&format!(
            "Try '{} --help' for more information.\n",
            self.prog
        ));
        FAILURE
    }

    /// A failed util-linux number conversion: `err` when errno is set,
    /// `errx` otherwise, both as `"%s: '%s'"`.
    pub fn num_err(&self, e: cnum::NumError, what: &str, arg: &str) -> Exit {
        match e {
            cnum::NumError::Invalid => self.errx(&format!("{what}: '{arg}'")),
            cnum::NumError::Errno(n) => self.err(n, &format!("{what}: '{arg}'")),
        }
    }

    /// `print_version(EXIT_SUCCESS)`.
    fn version(&mut self) -> Exit {
        let _ = writeln!(
            self.out,
            "{} (ipcns {}; util-linux 2.38.1 compatible)",
            self.prog,
            env!("CARGO_PKG_VERSION")
        );
        Exit(0)
    }
}

/// Runs tool `which` with `args` (after its name) on namespace `ns`.
pub fn run(which: Which, ns: &Namespace, args: &[String]) -> anyhow::Result<ExitCode> {
    let cred = (*ns.cred()?).clone();
    let sys = NsCaller { ns, cred };
    let mut tool = Tool::new(which.name());
    let r = match which {
        Which::Ipcs => ipcs::main(&mut tool, &sys, args),
        Which::Ipcmk => ipcmk::main(&mut tool, &sys, args),
        Which::Ipcrm => ipcrm::main(&mut tool, &sys, args),
    };
    let code = match r {
        Ok(()) => 0,
        Err(Exit(c)) => c,
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&tool.out)?;
    stdout.flush()?;
    Ok(ExitCode::from(code))
}
