//! Why a component was refused by the lock ([`LockMismatch`]) and why a lock file could
//! not be read or written ([`LockError`]), each saying what to do.

use std::fmt;
use std::path::{Path, PathBuf};

use super::Sha256Digest;
use crate::PluginError;

/// Why a component was refused by the lock. Its `Display` says what differs (both
/// digests) and what to do; [`PluginErrorKind::Unpinned`](crate::PluginErrorKind::Unpinned) adds the lock's path and
/// [`PluginError`] the file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockMismatch {
    /// The lock does not list the component.
    NotListed {
        /// The digest of the component's bytes.
        actual: Sha256Digest,
    },
    /// The component's bytes are not the ones pinned.
    Component {
        /// The digest in the lock.
        pinned: Sha256Digest,
        /// The digest of the bytes read.
        actual: Sha256Digest,
    },
    /// The manifest is not the one pinned (or one appeared, or went missing).
    Manifest {
        /// The digest in the lock; `None`: the lock pins no manifest.
        pinned: Option<Sha256Digest>,
        /// The digest of the manifest read; `None`: there is none.
        actual: Option<Sha256Digest>,
    },
}

impl fmt::Display for LockMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockMismatch::NotListed { actual } => write!(
                f,
                "it is not listed in the lock file (its digest is {actual}); pin it with `host lock` if you trust it, or remove it"
            ),
            LockMismatch::Component { pinned, actual } => write!(
                f,
                "its digest is {actual}, but the lock pins {pinned}: the file changed since it was pinned; pull it again, or pin the new file with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: Some(pinned),
                actual: Some(actual),
            } => write!(
                f,
                "its manifest's digest is {actual}, but the lock pins {pinned}: the manifest changed since it was pinned; restore it, or pin it with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: Some(pinned),
                actual: None,
            } => write!(
                f,
                "the lock pins a manifest ({pinned}) but there is none; restore it, or pin the plugin without one with `host lock`"
            ),
            LockMismatch::Manifest {
                pinned: None,
                actual: Some(actual),
            } => write!(
                f,
                "it has a manifest ({actual}) but the lock pins none; remove the manifest, or pin it with `host lock` if you trust it"
            ),
            LockMismatch::Manifest {
                pinned: None,
                actual: None,
            } => f.write_str("its manifest does not match the lock"),
        }
    }
}

/// Why a lock file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The file could not be read (not a regular file, over [`MAX_LOCK_BYTES`](super::MAX_LOCK_BYTES), an I/O
    /// error); the message names it.
    #[error(transparent)]
    Read(Box<PluginError>),
    /// The file is not a valid lock file.
    #[error("{}: invalid lock file: {message}", path.display())]
    Invalid {
        /// The lock file.
        path: PathBuf,
        /// What is wrong (names the line or the entry).
        message: String,
    },
    /// The file could not be written.
    #[error("{}: cannot write the lock file: {error}", path.display())]
    Write {
        /// The lock file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A component of the directory could not be read while pinning it.
    #[error(transparent)]
    Component(Box<PluginError>),
}

impl LockError {
    /// The file the error is about.
    pub fn path(&self) -> Option<&Path> {
        match self {
            LockError::Read(err) | LockError::Component(err) => err.path(),
            LockError::Invalid { path, .. } | LockError::Write { path, .. } => Some(path),
        }
    }
}
