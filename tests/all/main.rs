//! Integration tests: the built-in tools and the built plugins in one registry, and the
//! `host` binary driven over MCP.

mod common;
mod hostile;
mod hot_reload;
mod imports;
mod mcp_schema;
mod plugins;
mod vfs_backends;
