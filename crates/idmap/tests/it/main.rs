//! Integration tests of ipcns-idmap: one binary, one module per concern.
//!
//! - `kernel`: differential tests against the running kernel (maps written
//!   into real child user namespaces). Need root; they say so and skip
//!   otherwise, unless IPCNS_REQUIRE_KERNEL=1 (CI), where a skip fails.
//! - `props`: property tests of every lookup against a naive linear model.

mod kernel;
mod maps;
mod props;
mod support;
