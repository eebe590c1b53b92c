//! The system-call layer, crate `ipcns-sys` (`crates/sys`), under the path
//! the core has always used (`crate::sys`).

pub use ipcns_sys::*;
