//! The kernel's error numbers, as every system call here returns them and
//! the core (which re-exports the type as `ipcns::Errno`) passes them on.
//! One is ipcns's own: EUCLEAN ("structure needs cleaning") when a
//! structure read from the arena is corrupt (an offset outside its region,
//! a size that cannot be).

use core::fmt;

/// A Linux errno. `#[repr(transparent)]`: the C ABI sets `errno` from it
/// without loss.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($($name:ident),* $(,)?) => {
        impl Errno {
            $(#[doc = concat!("`", stringify!($name), "`")] pub const $name: Errno = Errno(libc::$name);)*

            /// The symbolic name, e.g. `"EINVAL"`.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $(libc::$name => stringify!($name),)*
                    _ => "E?",
                }
            }
        }
    };
}

errnos!(
    EPERM, ENOENT, ESRCH, EINTR, E2BIG, EAGAIN, ENOMEM, EACCES, EFAULT, EEXIST, EINVAL, EFBIG,
    ENOSPC, ERANGE, ENOMSG, EIDRM, EOVERFLOW, ENOSYS, EDEADLK, EUCLEAN,
);

impl Errno {
    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// The errno of the last failed libc call on this thread.
    pub fn last() -> Errno {
        Errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Errno::EUCLEAN {
            // What ipcns means by it.
            return write!(
                f,
                "EUCLEAN: the namespace is corrupt (run `ipcns ns check`)"
            );
        }
        write!(
            f,
            "{}: {}",
            self.name(),
            std::io::Error::from_raw_os_error(self.0)
        )
    }
}

impl std::error::Error for Errno {}

impl From<Errno> for std::io::Error {
    /// The same number, with the system's message.
    fn from(e: Errno) -> std::io::Error {
        std::io::Error::from_raw_os_error(e.0)
    }
}

/// `Result<T, Errno>`.
pub type SysResult<T> = Result<T, Errno>;
