//! The core of wasm-toolhost: a tool registry for LLM agents, a sandboxed virtual file
//! system, and the built-in file tools over it. No WebAssembly runtime and no CLI: an
//! agent written in Rust embeds this crate alone.
//!
//! An agent offers a model a set of tools (name, description, JSON Schema); the model
//! replies with tool calls; the agent dispatches each call through the
//! [`registry::Registry`] and hands the model a JSON result, or an error written for the
//! model. Handlers are any async function; this crate brings:
//!
//! - [`registry`]: definitions, argument checks, dispatch with deadlines, cancellation,
//!   panic capture and a result cap;
//! - [`vfs`]: the [`vfs::Storage`] the file tools work on (on disk through cap-std, in
//!   memory, or scoped to a sub-tree);
//! - [`tools`]: the built-in file tools and the plan tool `todo_write`;
//! - [`catalog`]: prompts and resources offered beside the tools, by their owners;
//! - [`error`]: how errors print (each cause once).
//!
//! Third-party tools as WebAssembly components live in the `toolhost-plugin` crate, the
//! MCP server in `toolhost-mcp`, the command line in the `host` binary.
#![deny(missing_docs)]

pub mod error;
pub mod registry;
pub mod tools;
pub mod vfs;

/// Prompts and resources offered beside the tools: [`registry::catalog`], re-exported
/// here, where most callers look for it.
pub use registry::catalog;
