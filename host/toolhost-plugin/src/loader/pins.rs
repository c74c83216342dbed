//! Pins: the lock file a directory's plugins are checked against, and the check of one
//! component's bytes and manifest against it before anything else is done with them.

use std::path::Path;

use crate::lock::{LockMismatch, PluginLock, Sha256Digest};
use crate::manifest::{self};
use crate::{PluginError, PluginErrorKind};

/// The lock file a directory's plugins are checked against, and its path.
#[derive(Clone, Copy)]
pub(super) struct Pins<'a> {
    pub(super) lock: &'a PluginLock,
    pub(super) path: &'a Path,
}

/// Checks the component at `path` (`digest` of its bytes) and its manifest (`manifest`,
/// the bytes read) against the lock.
pub(super) fn check_pins(
    pins: Pins<'_>,
    path: &Path,
    digest: &Sha256Digest,
    manifest: Option<&[u8]>,
) -> Result<(), PluginError> {
    let file = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let manifest_digest = manifest.map(Sha256Digest::of);
    pins.lock
        .check(file, digest, manifest_digest.as_ref())
        .map_err(|mismatch| {
            let file = match mismatch {
                LockMismatch::Manifest { .. } => manifest::manifest_path(path),
                _ => path.to_owned(),
            };
            PluginErrorKind::Unpinned {
                lock: pins.path.to_owned(),
                mismatch,
            }
            .at(file)
        })
}
