//! Scaffolding that the test trees of the workspace share (a
//! dev-dependency of each, never published): private temporary
//! directories removed on drop ([`TempDir`]), and `libipcns.so` built by
//! cargo for the tests that preload it ([`preload`]).
//!
//! Standard library only, and nothing of ipcns itself: any tree can take
//! it, the core's included, without building more than it does today.

pub mod preload;
mod temp;

pub use temp::TempDir;
