//! The crate plugin authors use to write tools for wasm-toolhost.
//!
//! A plugin is a WebAssembly component (WASI preview 2) that exports the
//! `toolhost:plugin/tools` interface of the WIT package in `wit/`. This crate hides the
//! bindings: declare each tool with a name, description and JSON Schema built with
//! [`schema`], write a handler over serde-typed arguments, and export them all with
//! [`export_plugin!`].
//!
//! The [`schema`] module is shared with the host, which builds the built-in tools' schemas
//! with the same helpers. Everything else needs the default `guest` feature.
//!
//! # A complete plugin
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [package]
//! name = "greet"
//! version = "0.1.0"
//! edition = "2021"
//!
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! toolhost-sdk = { path = "../../sdk" }
//! serde = { version = "1", features = ["derive"] }
//! ```
//!
//! `src/lib.rs`:
//!
//! ```
//! use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};
//!
//! #[derive(serde::Deserialize)]
//! struct Args {
//!     name: String,
//! }
//!
//! /// Any `fn(T, Env) -> Result<impl Serialize, ToolError>` with `T: Deserialize` will do.
//! fn greet(args: Args, _env: Env) -> Result<String, ToolError> {
//!     if args.name.trim().is_empty() {
//!         return Err(ToolError::invalid_arguments("name is empty; pass the person's name"));
//!     }
//!     toolhost_sdk::log::debug("greeting someone");
//!     Ok(format!("Hello, {}!", args.name))
//! }
//!
//! export_plugin!(|| vec![Tool::new(
//!     "greet",
//!     "Greet a person by name.",
//!     schema::object([("name", schema::string("Who to greet."))], ["name"]),
//!     greet,
//! )]);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (install the target once
//! with `rustup target add wasm32-wasip2`): `target/wasm32-wasip2/release/greet.wasm` is
//! the component. Put it in the host's plugin directory, with a `greet.toml` manifest next
//! to it if it needs file access or other limits (see `plugins/README.md`).
//!
//! # What a handler gets and gives
//!
//! - The arguments arrive as JSON text; [`Tool::new`] parses them into your type and turns
//!   a parse error into [`ToolError::InvalidArguments`] with a message for the model that
//!   names the argument (`argument "numbers[1]" must be a number, got string "2"`; see
//!   [`arguments`]). [`Tool::raw`] hands you the text instead.
//! - A title, behaviour hints and an output schema for clients come from builders on
//!   [`Tool`] ([`Tool::with_title`], [`Tool::read_only`], [`Tool::with_output_schema`], ...).
//! - The result is serialised to JSON and given to the model; `Ok("Hello")` arrives as the
//!   JSON string `"Hello"` (the client shows it as the text `Hello`).
//! - Rich results: a [`Tool::rich`] handler returns [`Content`]: text, images, audio,
//!   resource links and whole resources, plus optional structured JSON (see [`content`]).
//! - [`ToolError`] messages are shown to the model: say what was wrong and what to do.
//! - A panic aborts the instance; the host reports it as a panicked tool with the panic
//!   message (it reads the plugin's stderr), and the next call gets a fresh instance.
//! - [`files`] reaches the host's file system as far as the manifest granted; [`log`]
//!   writes to the host's log; [`http`] sends HTTP requests to the hosts the manifest
//!   was granted; [`config`] reads the values the operator set for the keys the
//!   manifest declares (secrets included); [`interaction`] asks the client's user to
//!   confirm a step or fill in a small form (manifest `[grants] ask = true`, and the
//!   operator's `--plugin-ask`); [`sampling`] asks the client's language model for a
//!   completion (manifest `[grants] sampling`, bounded per call and per request, and the
//!   operator's `--plugin-sampling`); [`registry`] lists and calls the other tools of the
//!   host (manifest `[grants] tools`, at most `max_tool_calls` per call, and the
//!   operator's `--plugin-tools`).
//! - Resources and prompts besides the tools: [`catalog`], exported with
//!   `export_plugin!(tools, resources = .., prompts = ..)`.
//! - Unit-test a tool natively with [`Tool::call`] (the imports, [`files`], [`log`],
//!   [`http`] and [`config`], only work inside the host).
//!
//! The crate targets `toolhost:plugin@0.3.0` (`wit/plugin.wit`, world `rich-plugin`: every
//! plugin exports `resources` and `prompts`, empty unless it declares some); the host
//! still loads plugins built against 0.2.0 and 0.1.0.
#![deny(missing_docs)]

pub mod arguments;
pub mod schema;

#[cfg(feature = "guest")]
#[doc(hidden)]
pub mod bindings;
#[cfg(feature = "guest")]
pub mod catalog;
#[cfg(feature = "guest")]
pub mod config;
#[cfg(feature = "guest")]
pub mod content;
#[cfg(feature = "guest")]
mod export;
#[cfg(feature = "guest")]
pub mod files;
#[cfg(feature = "guest")]
pub mod http;
#[cfg(feature = "guest")]
pub mod interaction;
#[cfg(feature = "guest")]
pub mod log;
#[cfg(feature = "guest")]
pub mod registry;
#[cfg(feature = "guest")]
pub mod sampling;
#[cfg(feature = "guest")]
mod tool;

#[cfg(feature = "guest")]
pub use content::{Content, ContentBlock, ResourceBody, ResourceLink};
#[cfg(feature = "guest")]
#[doc(hidden)]
pub use export::__private;
#[cfg(feature = "guest")]
pub use tool::{Annotations, Env, Output, Tool, ToolError};
