//! Pins: `plugins.lock`, the SHA-256 of every component (and of its manifest) that a
//! plugin directory may load.
//!
//! Without a lock file, whatever `NAME.wasm` sits in the directory runs with its
//! manifest's grants, and nothing tells the operator it was swapped. With one,
//! [`PluginHost::load_dir`](super::PluginHost::load_dir) refuses every component whose
//! bytes or manifest do not match their pins, and every component the lock does not
//! list, with one error naming the file and both digests ([`LockMismatch`]); the others
//! load. The digest is checked on the very bytes that are then compiled: the file is
//! read once into memory, hashed, checked, and compiled from that buffer, so there is no
//! window to swap it between the check and the use. The compile cache is keyed by the
//! same digest.
//!
//! `host lock --plugins DIR` writes the file ([`PluginLock::scan`]); `host pull` adds
//! the entry of the component it fetched, with the reference it came from.
//!
//! ```toml
//! # plugins.lock
//! version = 1
//!
//! [[plugin]]
//! file = "greet.wasm"
//! digest = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! manifest_digest = "sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
//! source = "oci://ghcr.io/acme/greet:1"
//! source_digest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
//! ```
//!
//! `manifest_digest` absent means the plugin must have no manifest; `source` and
//! `source_digest` (the OCI manifest's digest) are there when it was pulled.
//!
//! ```
//! use toolhost_plugin::lock::{LockMismatch, PluginLock, Sha256Digest};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("greet.wasm"), b"\0asm\x0d\0\x01\0")?;
//! let (lock, _changes) = PluginLock::scan(dir.path(), None)?;
//! lock.write(dir.path())?;
//!
//! let read = PluginLock::read(dir.path())?.expect("written above");
//! let pinned = Sha256Digest::of(b"\0asm\x0d\0\x01\0");
//! assert_eq!(read.check("greet.wasm", &pinned, None), Ok(()));
//! let swapped = Sha256Digest::of(b"something else");
//! assert!(matches!(
//!     read.check("greet.wasm", &swapped, None),
//!     Err(LockMismatch::Component { .. })
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The lock file itself (entries, read, write, check, scan) is here; the digest type is in
//! `digest.rs`, the errors in `error.rs`, both re-exported.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::read::{read_manifest_bytes, read_regular_file, MAX_COMPONENT_BYTES};
use super::PluginErrorKind;

#[cfg(test)]
mod tests;

pub use crate::digest::Sha256Digest;
pub use crate::error::{LockError, LockMismatch};

/// The lock file's name inside a plugin directory.
pub const LOCK_FILE_NAME: &str = "plugins.lock";

/// The only format version this host reads and writes.
pub const LOCK_VERSION: u32 = 1;

/// Largest lock file read (1 MiB): an entry is about 300 bytes, so this is thousands of
/// plugins; the cap stops a huge file from being read into memory at start-up.
pub const MAX_LOCK_BYTES: u64 = 1024 * 1024;

/// A policy applied to a lock as it is read for a load (the CLI's `--require-signer`
/// refuses the entries not signed by its keys with [`PluginLock::refuse`]).
pub type LockPolicy = std::sync::Arc<dyn Fn(&mut PluginLock) + Send + Sync>;

/// One pinned component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The component's file name in the directory (`greet.wasm`).
    pub file: String,
    /// The digest of its bytes.
    pub digest: Sha256Digest,
    /// The digest of its manifest (`greet.toml`); `None`: it must have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_digest: Option<Sha256Digest>,
    /// Where it was pulled from (`oci://HOST/REPO:TAG`), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The OCI manifest digest `source` resolved to when it was pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_digest: Option<String>,
    /// The signature that verified it when it was pulled with `--verify-key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<LockSignature>,
}

/// What `host pull --verify-key` keeps of the signature that verified a component, so
/// that `host run --require-signer` can check it again offline: the signer's key, and
/// the evidence that ties it to these bytes (the signed payload, the signature, and the
/// manifests from the signed one down to the component's layer). This crate only keeps
/// them; the check is the OCI crate's (`toolhost_oci::signing::check_pinned`), so a lock
/// edited to name another signer is refused there, not trusted here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockSignature {
    /// The key that verified it: `sha256:` and the hex SHA-256 of its
    /// SubjectPublicKeyInfo DER.
    pub key: String,
    /// Base64 of that key's SubjectPublicKeyInfo DER: the key `host pull --update`
    /// verifies the next version with when no --verify-key is given.
    pub public_key: String,
    /// Base64 of the cosign simple-signing payload that was signed.
    pub payload: String,
    /// Base64 of the signature over the payload.
    pub signature: String,
    /// Base64 of the OCI manifests, from the signed one (`source_digest`) down to the
    /// image manifest whose layers are the component and its manifest.
    pub manifests: Vec<String>,
}

/// A plugin directory's lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginLock {
    /// [`LOCK_VERSION`].
    pub version: u32,
    /// The pinned components, sorted by file name.
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<LockEntry>,
    /// Entries refused by a policy of the host that reads the lock (`--require-signer`),
    /// with the reason: never written, and [`check`](Self::check) refuses them with it.
    #[serde(skip)]
    refused: BTreeMap<String, String>,
}

impl Default for PluginLock {
    fn default() -> Self {
        Self {
            version: LOCK_VERSION,
            plugins: Vec::new(),
            refused: BTreeMap::new(),
        }
    }
}

/// What [`PluginLock::scan`] changed, one per file, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockChange {
    /// A component pinned for the first time.
    Added {
        /// Its file name.
        file: String,
        /// Its digest.
        digest: Sha256Digest,
    },
    /// A component whose bytes or manifest changed since the last lock.
    Changed {
        /// Its file name.
        file: String,
        /// The previous entry.
        before: Box<LockEntry>,
        /// The new entry (its source is dropped when the bytes changed).
        after: Box<LockEntry>,
    },
    /// A component pinned as before.
    Unchanged {
        /// Its file name.
        file: String,
    },
    /// An entry whose file is gone.
    Removed {
        /// Its file name.
        file: String,
    },
}

impl PluginLock {
    /// The lock file of `dir`.
    pub fn path_in(dir: &Path) -> PathBuf {
        dir.join(LOCK_FILE_NAME)
    }

    /// Reads `dir/plugins.lock`; `Ok(None)` when there is none.
    ///
    /// # Sandbox
    /// Read as the loader reads plugins: a regular file only (a FIFO does not block), at
    /// most [`MAX_LOCK_BYTES`], checked on the open handle.
    ///
    /// # Errors
    /// [`LockError::Read`], [`LockError::Invalid`].
    pub fn read(dir: &Path) -> Result<Option<Self>, LockError> {
        let path = Self::path_in(dir);
        let bytes = match read_regular_file(&path, "lock file", MAX_LOCK_BYTES) {
            Ok(bytes) => bytes,
            Err(err)
                if matches!(err.kind(), PluginErrorKind::Io(source)
                    if source.kind() == std::io::ErrorKind::NotFound) =>
            {
                return Ok(None)
            }
            Err(err) => return Err(LockError::Read(Box::new(err))),
        };
        let text = String::from_utf8(bytes).map_err(|err| LockError::Invalid {
            path: path.clone(),
            message: format!(
                "it is not UTF-8 text (invalid byte at offset {})",
                err.utf8_error().valid_up_to()
            ),
        })?;
        Self::parse(&path, &text).map(Some)
    }

    /// Parses lock-file text; `path` is for the error message. Checks the version, that
    /// every file name is a plain `NAME.wasm` and is listed once.
    ///
    /// # Errors
    /// [`LockError::Invalid`] naming the line, key or entry.
    pub fn parse(path: &Path, text: &str) -> Result<Self, LockError> {
        let invalid = |message: String| LockError::Invalid {
            path: path.to_owned(),
            message,
        };
        let lock: PluginLock = toml::from_str(text).map_err(|err| {
            let line = err
                .span()
                .map(|span| {
                    let end = span.start.min(text.len());
                    format!(
                        "line {}: ",
                        text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
                    )
                })
                .unwrap_or_default();
            invalid(format!(
                "{line}{}; the keys are version and [[plugin]] file, digest, manifest_digest, source, source_digest, signature. Write it again with `host lock`",
                err.message().trim()
            ))
        })?;
        if lock.version != LOCK_VERSION {
            return Err(invalid(format!(
                "version {} is not supported (this host reads version {LOCK_VERSION}); write it again with this host's `host lock`",
                lock.version
            )));
        }
        let mut seen = BTreeSet::new();
        for entry in &lock.plugins {
            check_file_name(&entry.file).map_err(&invalid)?;
            if !seen.insert(entry.file.as_str()) {
                return Err(invalid(format!(
                    "\"{}\" is listed twice; keep one entry per file",
                    entry.file
                )));
            }
            if let Some(digest) = &entry.source_digest {
                Sha256Digest::parse(digest)
                    .map_err(|err| invalid(format!("{}: source_digest {err}", entry.file)))?;
            }
        }
        Ok(lock)
    }

    /// The lock as TOML text, entries sorted by file name, with a header comment.
    ///
    /// # Errors
    /// When the TOML serialiser refuses the lock (it holds strings and integers only, so
    /// this is not expected).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        let mut sorted = self.clone();
        sorted.plugins.sort_by(|a, b| a.file.cmp(&b.file));
        let body = toml::to_string(&sorted)?;
        Ok(format!(
            "# Pins of this plugin directory, written by `host lock` and `host pull`. The host\n\
             # loads only the components listed here, with exactly these digests.\n{body}"
        ))
    }

    /// Writes the lock to `dir/plugins.lock` atomically: a temporary file in `dir`,
    /// flushed to disk, renamed over the old one. Returns the lock file's path.
    ///
    /// # Errors
    /// [`LockError::Write`].
    pub fn write(&self, dir: &Path) -> Result<PathBuf, LockError> {
        let path = Self::path_in(dir);
        let write_error = |error: std::io::Error| LockError::Write {
            path: path.clone(),
            error,
        };
        let mut temp = tempfile::Builder::new()
            .prefix(".plugins.lock.")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(write_error)?;
        let text = self
            .to_toml()
            .map_err(|err| write_error(std::io::Error::other(err)))?;
        temp.write_all(text.as_bytes())
            .and_then(|()| temp.as_file().sync_all())
            .map_err(write_error)?;
        temp.persist(&path).map_err(|err| write_error(err.error))?;
        Ok(path)
    }

    /// The entry of `file`, if listed.
    pub fn entry(&self, file: &str) -> Option<&LockEntry> {
        self.plugins.iter().find(|entry| entry.file == file)
    }

    /// Refuses `file` with `reason` from now on (a policy such as `--require-signer`):
    /// [`check`](Self::check) answers [`LockMismatch::Refused`] for it, whatever its
    /// digest. Not written to the file.
    pub fn refuse(&mut self, file: &str, reason: String) {
        self.refused.insert(file.to_owned(), reason);
    }

    /// Adds `entry`, replacing the one of the same file.
    pub fn upsert(&mut self, entry: LockEntry) {
        match self.plugins.iter_mut().find(|e| e.file == entry.file) {
            Some(existing) => *existing = entry,
            None => self.plugins.push(entry),
        }
        self.plugins.sort_by(|a, b| a.file.cmp(&b.file));
    }

    /// Checks a component (`file`, the digest of its bytes) and its manifest (the digest
    /// of its bytes, `None` when it has none) against the pins.
    ///
    /// # Errors
    /// The [`LockMismatch`]; the component is checked before its manifest.
    pub fn check(
        &self,
        file: &str,
        digest: &Sha256Digest,
        manifest_digest: Option<&Sha256Digest>,
    ) -> Result<(), LockMismatch> {
        let Some(entry) = self.entry(file) else {
            return Err(LockMismatch::NotListed { actual: *digest });
        };
        if let Some(reason) = self.refused.get(file) {
            return Err(LockMismatch::Refused {
                reason: reason.clone(),
            });
        }
        if entry.digest != *digest {
            return Err(LockMismatch::Component {
                pinned: entry.digest,
                actual: *digest,
            });
        }
        if entry.manifest_digest.as_ref() != manifest_digest {
            return Err(LockMismatch::Manifest {
                pinned: entry.manifest_digest,
                actual: manifest_digest.copied(),
            });
        }
        Ok(())
    }

    /// Pins every component of `dir` as it is now (`host lock`): each `*.wasm` that is
    /// not a directory, with its manifest if any. An entry of `previous` keeps its source
    /// when its component's bytes are unchanged. Returns the new lock and what changed,
    /// in file-name order (removed entries last). Nothing is written.
    ///
    /// # Errors
    /// [`LockError::Component`] when a component or manifest cannot be read (not a
    /// regular file, over its cap, an I/O error), [`LockError::Read`] when `dir` cannot
    /// be listed, [`LockError::Invalid`] for a file name that is not UTF-8.
    pub fn scan(
        dir: &Path,
        previous: Option<&PluginLock>,
    ) -> Result<(PluginLock, Vec<LockChange>), LockError> {
        let entries = std::fs::read_dir(dir).map_err(|source| {
            LockError::Read(Box::new(PluginErrorKind::Io(source).at(dir.to_owned())))
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm") && !path.is_dir())
            .collect();
        files.sort();
        let mut lock = PluginLock::default();
        let mut changes = Vec::new();
        for path in files {
            let file = path
                .file_name()
                .and_then(|name| name.to_str())
                .ok_or_else(|| LockError::Invalid {
                    path: Self::path_in(dir),
                    message: format!(
                        "{} has a file name that is not UTF-8; rename it",
                        path.display()
                    ),
                })?
                .to_owned();
            let bytes = read_regular_file(&path, "component", MAX_COMPONENT_BYTES)
                .map_err(|err| LockError::Component(Box::new(err)))?;
            let manifest = read_manifest_bytes(&super::manifest::manifest_path(&path))
                .map_err(|err| LockError::Component(Box::new(err)))?;
            let digest = Sha256Digest::of(&bytes);
            let mut entry = LockEntry {
                file: file.clone(),
                digest,
                manifest_digest: manifest.as_deref().map(Sha256Digest::of),
                source: None,
                source_digest: None,
                signature: None,
            };
            let before = previous.and_then(|lock| lock.entry(&file));
            if let Some(before) = before.filter(|before| before.digest == digest) {
                entry.source = before.source.clone();
                entry.source_digest = before.source_digest.clone();
                entry.signature = before.signature.clone();
            }
            changes.push(match before {
                None => LockChange::Added { file, digest },
                Some(before) if *before == entry => LockChange::Unchanged { file },
                Some(before) => LockChange::Changed {
                    file,
                    before: Box::new(before.clone()),
                    after: Box::new(entry.clone()),
                },
            });
            lock.plugins.push(entry);
        }
        if let Some(previous) = previous {
            for entry in &previous.plugins {
                if lock.entry(&entry.file).is_none() {
                    changes.push(LockChange::Removed {
                        file: entry.file.clone(),
                    });
                }
            }
        }
        Ok((lock, changes))
    }
}

/// A lock entry's file: `NAME.wasm`, one plain path segment.
fn check_file_name(file: &str) -> Result<(), String> {
    let plain = !file.is_empty()
        && !file.contains(['/', '\\', '\0'])
        && !file.starts_with('.')
        && file.len() > ".wasm".len()
        && file.ends_with(".wasm");
    if plain {
        Ok(())
    } else {
        Err(format!(
            "file \"{}\" is not a component file name; each entry names a NAME.wasm in the lock file's directory",
            file.escape_debug()
        ))
    }
}
