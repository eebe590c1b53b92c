//! Scaffolding that the test trees of the workspace share (a
//! dev-dependency of each, never published): private temporary
//! directories removed on drop ([`TempDir`]), `libipcns.so` built by
//! cargo for the tests that preload it ([`preload`]), and any other
//! package's file built the same way ([`build`]: the `ipcns` executable
//! for the benchmarks' tests).
//!
//! Standard library only, and nothing of ipcns itself: any tree can take
//! it, the core's included, without building more than it does today.

pub mod build;
pub mod preload;
mod temp;

pub use temp::TempDir;
