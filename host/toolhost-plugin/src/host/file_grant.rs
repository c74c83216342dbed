//! [`FileGrant`]: one plugin's file access (its grant, its storage scoped to its root,
//! the host's path policy) and the storage calls it allows, with their errors in the
//! `files` interface's terms.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use toolhost::error::ErrorChain;
use toolhost::vfs::{content_type_for, FilePolicy, PolicyError, Storage, StorageError};

use super::file_access::FileAccess;
use crate::host::quota::ReadCap;
use crate::v0_2::toolhost::plugin::files::{File, FileError, FileInfo};

/// Why a manifest's `root` cannot be granted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RootError {
    /// The host's path policy refuses it.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The storage cannot be scoped to it (the path rules: `check_root` checks them
    /// first, so this is the same refusal).
    #[error(transparent)]
    Scope(#[from] StorageError),
}

/// One plugin's file access: its grant, the storage (scoped to its root) and the policy.
pub(crate) struct FileGrant {
    plugin: String,
    access: FileAccess,
    storage: Option<Arc<dyn Storage>>,
    /// The sub-tree the plugin is confined to, for the full-path checks.
    root: Option<String>,
    policy: FilePolicy,
}

impl FileGrant {
    /// No access at all.
    #[cfg(test)]
    pub(crate) fn none(plugin: &str) -> Self {
        Self {
            plugin: plugin.to_owned(),
            access: FileAccess::None,
            storage: None,
            root: None,
            policy: FilePolicy::default(),
        }
    }

    /// `access` to `storage`, confined to `root` when given.
    ///
    /// # Errors
    /// [`RootError::Policy`] with [`PolicyError::InvalidPath`] when `root` breaks the path
    /// rules, [`PolicyError::Hidden`] when it has a hidden segment and `policy` hides
    /// them (argument `"root"`).
    pub(crate) fn new(
        plugin: &str,
        access: FileAccess,
        storage: Option<Arc<dyn Storage>>,
        root: Option<&str>,
        policy: FilePolicy,
    ) -> Result<Self, RootError> {
        if let Some(root) = root {
            policy.check_root("root", root)?;
        }
        let storage = match (storage, root) {
            (Some(storage), Some(root)) => {
                Some(Arc::new(toolhost::vfs::scope(storage, root)?) as Arc<dyn Storage>)
            }
            (storage, _) => storage,
        };
        Ok(Self {
            plugin: plugin.to_owned(),
            access,
            storage,
            root: root.map(str::to_owned),
            policy,
        })
    }

    /// The storage, when the grant covers `need`.
    fn storage(&self, need: FileAccess) -> Result<&dyn Storage, FileError> {
        let plugin = &self.plugin;
        if self.access < need {
            return Err(FileError::Denied(match self.access {
                FileAccess::None => format!(
                    "plugin \"{plugin}\" has no file access: its manifest grants none. To grant it, put `[grants] files = \"{need}\"` in {plugin}.toml next to {plugin}.wasm and start the host with `--plugin-files {need}`"
                ),
                _ => format!(
                    "plugin \"{plugin}\" may only read files; writing needs `files = \"read-write\"` in {plugin}.toml and a host started with `--plugin-files read-write`"
                ),
            }));
        }
        self.storage.as_deref().ok_or_else(|| {
            FileError::Denied(
                "the host has no file storage for plugins; start it with a storage directory"
                    .into(),
            )
        })
    }

    /// Checks `path` with the policy the built-in tools apply to their path arguments:
    /// relative to the root first (so the error names the plugin's own path), then as
    /// the full store path `root/path` (so the decision is the one a built-in tool would
    /// make on that file). `write` adds [`FilePolicy::read_only`].
    fn check_path(&self, path: &str, write: bool) -> Result<(), FileError> {
        let check = |path: &str| {
            if write {
                self.policy.check_write("path", path)
            } else {
                self.policy.check("path", path)
            }
            .map_err(policy_error)
        };
        check(path)?;
        if let Some(root) = &self.root {
            check(&format!("{root}/{path}"))?;
        }
        Ok(())
    }

    /// Whether a listed `path` (relative to the root) shows, decided on the full path.
    fn visible(&self, path: &str) -> bool {
        match &self.root {
            Some(root) => self.policy.visible(&format!("{root}/{path}")),
            None => self.policy.visible(path),
        }
    }

    /// `read`: the whole file at `path`, refused (`too-large`, naming the file, its size
    /// and `cap`) when it is larger than `cap`.
    pub(crate) fn read(&self, path: &str, cap: ReadCap) -> Result<File, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        self.check_path(path, false)?;
        let file = storage
            .read_capped(path, cap.bytes())
            .map_err(|err| match err {
                StorageError::FileTooLarge { size, .. } => cap.refuse(path, size),
                other => storage_error(other),
            })?;
        Ok(File {
            size: file.size,
            updated_at_ms: millis(file.updated_at),
            content_type: file.content_type,
            content: file.content,
        })
    }

    /// `list`: every file the policy shows, sorted by path.
    pub(crate) fn list(&self) -> Result<Vec<FileInfo>, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        let entries = storage.list().map_err(storage_error)?;
        Ok(entries
            .into_iter()
            .filter(|entry| self.visible(&entry.path))
            .map(|entry| FileInfo {
                updated_at_ms: millis(entry.updated_at),
                size: entry.size,
                path: entry.path,
            })
            .collect())
    }

    /// Whether a `write` of `size` bytes at `path` is allowed: the grant, the path
    /// policy and the file size cap. Checked before a write's quota is reserved, so a
    /// refused path costs no quota.
    ///
    /// # Errors
    /// As [`FileGrant::write`], before the storage is called.
    pub(crate) fn check_write(&self, path: &str, size: u64) -> Result<&dyn Storage, FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.check_path(path, true)?;
        self.policy.check_size(path, size).map_err(policy_error)?;
        Ok(storage)
    }

    /// `write`: creates or replaces the file at `path`.
    pub(crate) fn write(
        &self,
        path: &str,
        content: &[u8],
        content_type: Option<&str>,
    ) -> Result<(), FileError> {
        let storage = self.check_write(path, content.len() as u64)?;
        let content_type = content_type.unwrap_or_else(|| content_type_for(path));
        storage
            .write(path, content, content_type)
            .map_err(storage_error)
    }

    /// `delete`: removes the file at `path`.
    pub(crate) fn delete(&self, path: &str) -> Result<(), FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.check_path(path, true)?;
        storage.delete(path).map_err(storage_error)
    }
}

/// Reads `path`, or fails with [`StorageError::FileTooLarge`] when it is larger than
/// `max_bytes`.
fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn policy_error(err: PolicyError) -> FileError {
    match err {
        PolicyError::InvalidPath(err) => FileError::InvalidPath(err.to_string()),
        err @ PolicyError::TooLarge { .. } => FileError::TooLarge(err.to_string()),
        other => FileError::Denied(other.to_string()),
    }
}

fn storage_error(err: StorageError) -> FileError {
    match err {
        StorageError::NotFound { .. } => FileError::NotFound(err.to_string()),
        StorageError::InvalidPath(_) => FileError::InvalidPath(err.to_string()),
        StorageError::Denied { .. } => FileError::Denied(err.to_string()),
        StorageError::FileTooLarge { .. } => FileError::TooLarge(err.to_string()),
        other => FileError::Other(ErrorChain(&other).to_string()),
    }
}

/// Bytes a listing takes in the guest: each path plus its two 64-bit numbers.
pub(crate) fn listing_bytes(entries: &[FileInfo]) -> u64 {
    entries
        .iter()
        .map(|entry| entry.path.len() as u64 + 16)
        .sum()
}
