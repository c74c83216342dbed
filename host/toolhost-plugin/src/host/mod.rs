//! The host side of the interfaces a plugin imports, one file per WIT interface (as
//! wasmtime-wasi's `p2/host/`): [`log`] and [`files`]; [`quota`] holds the budgets both
//! are held to.

pub mod files;
pub mod log;
pub mod quota;

use super::bindings::toolhost::plugin::types;
use super::state::ImportCtx;

// `types` declares only types; its `Host` trait has no function.
impl types::Host for ImportCtx {}
