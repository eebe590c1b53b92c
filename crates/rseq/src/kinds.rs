//! The crate's two small types, below the area and the reads that use
//! them: how the process does per-cpu work ([`Mode`]) and what a call
//! failed with ([`Errno`]).

use core::fmt;

/// How per-cpu operations are carried out in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// glibc 2.35+ registered every thread; this crate uses its area.
    Glibc,
    /// glibc did not register (e.g. `GLIBC_TUNABLES=glibc.pthread.rseq=0`);
    /// this crate registers an area per thread and unregisters it at exit.
    Own,
    /// No rseq (old kernel, seccomp filter denying it): `sched_getcpu` plus
    /// atomic instructions.
    Fallback,
}

impl Mode {
    /// True when per-cpu data is updated with atomic read-modify-write
    /// instructions. Every process sharing one structure must agree on this
    /// (an rseq commit is a plain store and does not compose with a
    /// concurrent atomic one on another cpu).
    pub fn uses_atomics(self) -> bool {
        self == Mode::Fallback
    }

    /// Short lowercase name: `glibc`, `own` or `fallback`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Glibc => "glibc",
            Mode::Own => "own",
            Mode::Fallback => "fallback",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An errno value (`#[repr(transparent)]` over the kernel's number).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's `errno`.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (errno {})",
            std::io::Error::from_raw_os_error(self.0),
            self.0
        )
    }
}

impl std::error::Error for Errno {}
