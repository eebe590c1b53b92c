//! `ipcns ipcs|ipcmk|ipcrm`: util-linux 2.38.1's tools over an ipcns
//! namespace, with their options, output, messages and exit codes.
//!
//! The tools are written against `ipcns::sysv::SysV`, one interface over
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
mod lists;
mod rows;
mod size;
mod text;

pub use host::user_name;

use ipcns::sysv::{NsCaller, SysV};
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
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

    /// The tool's `--help` text (util-linux's, with a word on `--ns`).
    pub fn usage(self) -> &'static str {
        match self {
            Which::Ipcs => ipcs::USAGE,
            Which::Ipcmk => ipcmk::USAGE,
            Which::Ipcrm => ipcrm::USAGE,
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

    /// Writes to standard error (unbuffered, as stderr is in C).
    pub fn stderr(&self, text: &[u8]) {
        let _ = std::io::stderr().write_all(text);
    }

    /// `warnx(msg)`. Messages are bytes: they quote arguments as given.
    pub fn warnx(&self, msg: impl AsRef<[u8]>) {
        self.stderr(&[self.prog.as_bytes(), b": ", msg.as_ref(), b"\n"].concat());
    }

    /// `warn(msg)` with this errno.
    pub fn warn(&self, errno: i32, msg: impl AsRef<[u8]>) {
        let e = strerror(errno);
        let m = [
            self.prog.as_bytes(),
            b": ",
            msg.as_ref(),
            b": ",
            e.as_bytes(),
            b"\n",
        ];
        self.stderr(&m.concat());
    }

    /// `err(EXIT_FAILURE, msg)` with this errno.
    pub fn err(&self, errno: i32, msg: impl AsRef<[u8]>) -> Exit {
        self.warn(errno, msg);
        FAILURE
    }

    /// `errx(EXIT_FAILURE, msg)`.
    pub fn errx(&self, msg: impl AsRef<[u8]>) -> Exit {
        self.warnx(msg);
        FAILURE
    }

    /// `errtryhelp(EXIT_FAILURE)`.
    pub fn errtryhelp(&self) -> Exit {
        let m = format!("Try '{} --help' for more information.\n", self.prog);
        self.stderr(m.as_bytes());
        FAILURE
    }

    /// A failed util-linux number conversion: `err` when errno is set,
    /// `errx` otherwise, both as `"%s: '%s'"`.
    pub fn num_err(&self, e: cnum::NumError, what: &str, arg: &[u8]) -> Exit {
        let m = [what.as_bytes(), b": '", arg, b"'"].concat();
        match e {
            cnum::NumError::Invalid => self.errx(m),
            cnum::NumError::Errno(n) => self.err(n, m),
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

/// Runs tool `which` with `args` (after its name) on namespace `ns_name`.
/// The command line is read first: one that only prints help or fails
/// never attaches to the namespace; only ipcmk creates one.
pub fn run(which: Which, ns_name: &str, args: &[OsString]) -> anyhow::Result<ExitCode> {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let mut tool = Tool::new(which.name());
    let t = &mut tool;
    let r = match which {
        Which::Ipcs => match ipcs::parse(t, &args) {
            Ok(opts) => with_ns(ns_name, false, |sys| ipcs::show(t, sys, &opts))?,
            Err(exit) => Err(exit),
        },
        Which::Ipcmk => match ipcmk::parse(t, &args) {
            Ok(opts) => with_ns(ns_name, true, |sys| ipcmk::make(t, sys, &opts))?,
            Err(exit) => Err(exit),
        },
        Which::Ipcrm => {
            let plan = ipcrm::parse(&args);
            if plan.needs_namespace() {
                with_ns(ns_name, false, |sys| ipcrm::run(t, Some(sys), plan))?
            } else {
                ipcrm::run(t, None, plan)
            }
        }
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

/// Calls `f` on namespace `name` as this process: created on first use
/// if `create` (ipcmk), else one that exists (ipcs, ipcrm: a mistyped
/// name is an error, not a new empty namespace).
fn with_ns<T>(name: &str, create: bool, f: impl FnOnce(&dyn SysV) -> T) -> anyhow::Result<T> {
    let ns = if create {
        crate::ns::attach(name)?
    } else {
        crate::ns::existing(name)?
    };
    let cred = (*ns.cred()?).clone();
    Ok(f(&NsCaller { ns: &ns, cred }))
}
