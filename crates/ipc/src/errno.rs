//! The kernel's error numbers, as the core returns them: the system-call
//! layer's type (crate `ipcns-sys`, its `errno.rs`), so that `crate::errno`
//! and `ipcns::Errno` name that one type.

pub use ipcns_sys::Errno;
/// Used by the namespace proper only (not built under loom).
#[cfg(not(loom))]
pub use ipcns_sys::SysResult;
