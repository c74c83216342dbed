//! The host side of the interfaces a plugin imports, one file per WIT interface (as
//! wasmtime-wasi's `p2/host/`): [`log`], [`files`] and [`config`] implement
//! `toolhost:plugin@0.2.0`'s traits with its types ([`crate::v0_2`]), and [`interaction`]
//! the 0.3.0 `interaction` import's checks, [`sampling`] the 0.3.0 `sampling` import's
//! (their traits are adapted in `v0_3/host.rs`); [`quota`] holds the
//! budgets they are held to, and [`ImportCtx`] is the per-store context they all work
//! with. [`http`] checks and sends the plugin's outbound HTTP
//! (`wasi:http/outgoing-handler`). An older version's imports are adapted to these in its
//! own module (`v0_1/host.rs`). Nothing here depends on the store's state (`state.rs`),
//! which holds an [`ImportCtx`], nor on a version module other than [`crate::v0_2`]'s
//! generated bindings.

pub(crate) mod config;
mod ctx;
pub(crate) mod file_access;
pub(crate) mod file_grant;
pub(crate) mod files;
pub(crate) mod http;
pub(crate) mod interaction;
pub(crate) mod log;
pub(crate) mod quota;
pub(crate) mod sampling;
pub(crate) mod sampling_grant;
pub(crate) mod tools;
pub(crate) mod tools_grant;

use crate::v0_2::toolhost::plugin::types;
pub(crate) use ctx::{ImportCtx, Imports};

// `types` declares only types; its `Host` trait has no function.
impl types::Host for ImportCtx {}
