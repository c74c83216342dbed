//! wasm-toolhost: a sandboxed tool host for LLM agents.
//!
//! An agent offers a model a set of tools (name, description, JSON Schema); the model
//! replies with tool calls; the host dispatches each call to its handler and returns a
//! JSON result, or an error written for the model. Two kinds of handlers live behind one
//! [`registry::Registry`]:
//!
//! - built-in tools in native Rust: the file tools over a [`vfs::Storage`] and the plan
//!   tool `todo_write`;
//! - third-party tools shipped as WebAssembly components, run under wasmtime with time
//!   and memory limits, where a trap or panic becomes a dispatch error for that one call.
#![deny(missing_docs)]

pub mod cli;
pub mod mcp;
pub mod plugin;
pub mod registry;
pub mod tools;
pub mod vfs;
