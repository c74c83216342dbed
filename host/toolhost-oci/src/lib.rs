//! Ship toolhost plugins through OCI registries: pull a plugin, verified, into a plugin
//! directory, and push one, in the Wasm OCI artifact layout ([`layout`]).
//!
//! [`signing`] verifies and makes cosign-format signatures (key-based: ECDSA P-256 and
//! Ed25519), found next to a plugin in its registry ([`RegistryClient::verify_signature`],
//! [`RegistryClient::push_signature`]).
//!
//! This crate speaks to registries and nothing else: it has no wasmtime in it. The CLI
//! (`host pull`, `host push`) uses it, writes the files it downloads into place and pins
//! them in the directory's `plugins.lock` (see `toolhost_plugin::lock`).
//!
//! ```no_run
//! use toolhost_oci::{ClientOptions, OciReference, RegistryClient};
//!
//! # async fn pull() -> Result<(), toolhost_oci::OciError> {
//! let reference: OciReference = "oci://127.0.0.1:5000/tools/greet:1".parse()?;
//! let client = RegistryClient::new(&reference, ClientOptions::default())?;
//! let resolved = client.resolve().await?;
//! let dir = std::path::Path::new("plugins");
//! let pulled = client.download(&resolved, dir, reference.plugin_name()).await?;
//! println!("{} is {}", reference, resolved.digest);
//! pulled.component.file.persist(dir.join("greet.wasm")).expect("rename");
//! # Ok(())
//! # }
//! ```
//!
//! # Sandbox
//! A registry is untrusted: whatever it sends, a pull ends with a verified component or
//! a clear [`OciError`], within bounded memory, disk and time. See [`RegistryClient`] for
//! the checks: HTTPS unless loopback or named insecure, every blob against its digest,
//! every body (token, manifest, index, config, blob, error answer) capped and read as it
//! arrives, no alternate layer URLs, no credentials to another host on a redirect, no
//! HTTPS-to-HTTP redirect, a time limit per request, a minimum average download rate,
//! and a time limit of the whole pull.
#![deny(missing_docs)]

mod client;
mod credentials;
mod error;
pub mod layout;
mod reference;
pub mod signing;

pub use client::{
    ClientOptions, ProgressFn, Pulled, PulledFile, Pushed, RegistryClient, Resolved, Signed,
};
pub use credentials::{docker_config_path, from_docker_config, Credentials};
pub use error::{OciError, Operation};
pub use reference::{OciReference, ReferenceError};
