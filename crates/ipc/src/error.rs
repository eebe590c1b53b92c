//! One error type for Rust programs: [`Error`], what every call of the
//! typed handles ([`crate::SemSet`], [`crate::MsgQueue`],
//! [`crate::ShmSegment`]) returns, and what the errors of the C-shaped
//! calls ([`Errno`]), of opening a namespace ([`ArenaError`]) and of
//! reading the caller's credentials ([`std::io::Error`]) convert into, so
//! that `?` mixes them.
//!
//! The kernel's number stays reachable: [`Error::errno`] gives it for every
//! error that has one, as a program written against the system calls
//! would have seen it in `errno`.

use crate::arena::ArenaError;
use crate::errno::Errno;

/// An error of ipcns: the errno of a System V IPC call, or a failure to
/// open, create or read the namespace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A call failed with this errno, as the kernel's would (`semop` with
    /// IPC_NOWAIT: EAGAIN; a key already in use with IPC_EXCL: EEXIST).
    #[error(transparent)]
    Errno(#[from] Errno),
    /// The namespace could not be created, opened or removed.
    #[error(transparent)]
    Arena(#[from] ArenaError),
    /// The caller's credentials could not be read (from /proc and the
    /// credential system calls). The message includes the I/O error's, so
    /// it is not also given as the source (a chain printed whole would
    /// say it twice).
    #[error("reading the caller's credentials: {0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

impl Error {
    /// The kernel's number for this error, when it has one: the errno of a
    /// call; for the namespace's file, ENOENT (no such namespace), EEXIST
    /// (it exists already) or the number of the system call that failed.
    /// `None` for the errors only ipcns has (not an arena, another layout
    /// version, a file owned by someone else, a bad name or directory).
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Errno(e) => Some(*e),
            Error::Arena(a) => match a {
                ArenaError::Errno(e) => Some(*e),
                ArenaError::NotFound { .. } | ArenaError::NoDir { .. } => Some(Errno::ENOENT),
                ArenaError::Exists { .. } => Some(Errno::EEXIST),
                ArenaError::Io { source, .. } => source.raw_os_error().map(Errno),
                _ => None,
            },
            Error::Io(e) => e.raw_os_error().map(Errno),
        }
    }
}

/// `Result<T, ipcns::Error>`.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn errno_is_kept_through_every_conversion() {
        assert_eq!(Error::from(Errno::EIDRM).errno(), Some(Errno::EIDRM));
        let gone = ArenaError::NotFound {
            path: PathBuf::from("/nowhere"),
        };
        assert_eq!(Error::from(gone).errno(), Some(Errno::ENOENT));
        let io = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(Error::from(io).errno(), Some(Errno::EACCES));
        let name = ArenaError::BadName {
            name: "..".into(),
            why: "test",
        };
        assert_eq!(Error::from(name).errno(), None);
    }

    #[test]
    fn displays_as_the_errno_and_is_a_std_error() {
        let e: Box<dyn std::error::Error> = Box::new(Error::from(Errno::EAGAIN));
        assert!(e.to_string().starts_with("EAGAIN: "), "{e}");
        // Said once: no source repeats the message.
        assert!(e.source().is_none());
        let io = Error::from(std::io::Error::from_raw_os_error(libc::ENOENT));
        assert!(std::error::Error::source(&io).is_none());
        assert!(
            io.to_string()
                .starts_with("reading the caller's credentials: ")
        );
    }
}
