//! The crate plugin authors use to write tools for wasm-toolhost.
//!
//! A plugin is a WebAssembly component (WASI preview 2) that exports the
//! `toolhost:plugin/tools` interface of the WIT package in `wit/`. This crate hides the
//! bindings: declare each tool with a name, description and JSON Schema built with
//! [`schema`], write a handler over serde-typed arguments, and export.
//!
//! The [`schema`] module is shared with the host, which builds the built-in tools' schemas
//! with the same helpers.
#![deny(missing_docs)]

pub mod schema;
