//! Integration tests of the ipcns core. One binary; a module per concern.

mod basics;
mod crash;
mod diff;
mod security;
mod support;
