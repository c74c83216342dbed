//! Integration tests: the built-in tools and the built plugins in one registry, and the
//! `host` binary driven over MCP.

mod common;
mod hostile;
mod imports;
mod plugins;
mod vfs_backends;
mod properties;
