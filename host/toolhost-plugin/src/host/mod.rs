//! The host side of the interfaces a plugin imports, one file per WIT interface (as
//! wasmtime-wasi's `p2/host/`): [`log`], [`files`] and [`config`]; [`quota`] holds the
//! budgets they are held to, and [`ImportCtx`] is the per-store context they all work
//! with. [`http`] checks and sends the plugin's outbound HTTP
//! (`wasi:http/outgoing-handler`); [`legacy`] serves `toolhost:plugin@0.1.0`'s imports.
//! Nothing here depends on the store's state (`state.rs`), which holds an [`ImportCtx`].

pub(crate) mod config;
mod ctx;
pub(crate) mod files;
pub(crate) mod http;
pub(crate) mod legacy;
pub(crate) mod log;
pub(crate) mod quota;

use super::bindings::toolhost::plugin::types;
pub(crate) use ctx::{ImportCtx, Imports};

// `types` declares only types; its `Host` trait has no function.
impl types::Host for ImportCtx {}
