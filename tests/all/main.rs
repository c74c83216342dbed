//! Integration tests: the built-in tools and the built plugins in one registry, and the
//! `host` binary driven over MCP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

mod common;
mod hostile;
mod hot_reload;
mod imports;
mod mcp_elicit_schema;
mod mcp_matrix;
mod mcp_schema;
mod mcp_schema_catalog;
mod mcp_schema_http;
mod plugins;
mod properties;
mod pyjs;
mod vfs_backends;
mod vfs_huge_files;
mod vfs_os_escapes;
