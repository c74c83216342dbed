//! The host side of the interfaces a plugin imports, one file per WIT interface (as
//! wasmtime-wasi's `p2/host/`): [`log`] and [`files`]; [`quota`] holds the budgets both
//! are held to, and [`ImportCtx`] is the per-store context they all work with. Nothing
//! here depends on the store's state (`state.rs`), which holds an [`ImportCtx`].

mod ctx;
pub(crate) mod files;
pub(crate) mod log;
pub(crate) mod quota;

use super::bindings::toolhost::plugin::types;
pub(crate) use ctx::{ImportCtx, Imports};

// `types` declares only types; its `Host` trait has no function.
impl types::Host for ImportCtx {}
