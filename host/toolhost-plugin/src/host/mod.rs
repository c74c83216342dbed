//! The host side of the interfaces a plugin imports, one file per WIT interface (as
//! wasmtime-wasi's `p2/host/`): [`log`], [`files`] and [`config`]; [`quota`] holds the
//! budgets they are held to; [`http`] checks and sends the plugin's outbound HTTP
//! (`wasi:http/outgoing-handler`); [`legacy`] serves `toolhost:plugin@0.1.0`'s imports.

pub mod config;
pub mod files;
pub mod http;
pub mod legacy;
pub mod log;
pub mod quota;

use super::bindings::toolhost::plugin::types;
use super::state::ImportCtx;

// `types` declares only types; its `Host` trait has no function.
impl types::Host for ImportCtx {}
