//! `toolhost:plugin/files`: the host's [`Storage`] as far as the plugin was granted.
//!
//! Every call checks, in order: the grant ([`FileAccess::Read`] for `read` and `list`,
//! [`FileAccess::ReadWrite`] for `write` and `delete`), that the host has a storage, the
//! path policy ([`FilePolicy::check`], as the built-in file tools), the size cap for
//! writes. A manifest `root` confines the plugin to that sub-tree through
//! [`toolhost::vfs::scope`]: paths are relative to it, and nothing outside is reachable.
//! Denials are logged (target `plugin`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use toolhost::tools::{FilePolicy, PolicyError};
use toolhost::vfs::{content_type_for, Storage, StorageError};

use super::super::bindings::toolhost::plugin::files::{File, FileError, FileInfo, Host};
use super::super::state::ImportCtx;
use super::super::FileAccess;
use super::log::MAX_LOG_LINES_PER_CALL;

/// One plugin's file access: its grant, the storage (scoped to its root) and the policy.
pub struct FileGrant {
    plugin: String,
    access: FileAccess,
    storage: Option<Arc<dyn Storage>>,
    policy: FilePolicy,
}

impl FileGrant {
    /// No access at all.
    #[cfg(test)]
    pub fn none(plugin: &str) -> Self {
        Self {
            plugin: plugin.to_owned(),
            access: FileAccess::None,
            storage: None,
            policy: FilePolicy::default(),
        }
    }

    /// `access` to `storage`, confined to `root` when given.
    ///
    /// # Errors
    /// [`StorageError::InvalidPath`] when `root` breaks the path rules.
    pub fn new(
        plugin: &str,
        access: FileAccess,
        storage: Option<Arc<dyn Storage>>,
        root: Option<&str>,
        policy: FilePolicy,
    ) -> Result<Self, StorageError> {
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

    /// `read`: the whole file at `path`.
    pub fn read(&self, path: &str) -> Result<File, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        self.policy.check("path", path).map_err(policy_error)?;
        let file = storage.read(path).map_err(storage_error)?;
        Ok(File {
            size: file.size,
            updated_at_ms: millis(file.updated_at),
            content_type: file.content_type,
            content: file.content,
        })
    }

    /// `list`: every file the policy shows, sorted by path.
    pub fn list(&self) -> Result<Vec<FileInfo>, FileError> {
        let storage = self.storage(FileAccess::Read)?;
        let entries = storage.list().map_err(storage_error)?;
        Ok(entries
            .into_iter()
            .filter(|entry| self.policy.visible(&entry.path))
            .map(|entry| FileInfo {
                updated_at_ms: millis(entry.updated_at),
                size: entry.size,
                path: entry.path,
            })
            .collect())
    }

    /// `write`: creates or replaces the file at `path`.
    pub fn write(
        &self,
        path: &str,
        content: &[u8],
        content_type: Option<&str>,
    ) -> Result<(), FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.policy.check("path", path).map_err(policy_error)?;
        self.policy
            .check_size(path, content.len() as u64)
            .map_err(policy_error)?;
        let content_type = content_type.unwrap_or_else(|| content_type_for(path));
        storage
            .write(path, content, content_type)
            .map_err(storage_error)
    }

    /// `delete`: removes the file at `path`.
    pub fn delete(&self, path: &str) -> Result<(), FileError> {
        let storage = self.storage(FileAccess::ReadWrite)?;
        self.policy.check("path", path).map_err(policy_error)?;
        storage.delete(path).map_err(storage_error)
    }
}

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
        other => FileError::Other(other.to_string()),
    }
}

impl ImportCtx {
    /// Logs a denial (within the per-call log budget) and passes the result on.
    fn logged<T>(
        &mut self,
        op: &str,
        path: &str,
        result: Result<T, FileError>,
    ) -> Result<T, FileError> {
        if let Err(FileError::Denied(reason)) = &result {
            self.log_lines = self.log_lines.saturating_add(1);
            if self.log_lines <= MAX_LOG_LINES_PER_CALL {
                tracing::warn!(target: "plugin", plugin = %self.plugin, tool = %self.tool, "file {op} of \"{}\" denied: {reason}", path.escape_debug());
            }
        }
        result
    }
}

impl Host for ImportCtx {
    fn read(&mut self, path: String) -> Result<File, FileError> {
        let result = self.files.read(&path);
        self.logged("read", &path, result)
    }

    fn list(&mut self) -> Result<Vec<FileInfo>, FileError> {
        let result = self.files.list();
        self.logged("list", "", result)
    }

    fn write(
        &mut self,
        path: String,
        content: Vec<u8>,
        content_type: Option<String>,
    ) -> Result<(), FileError> {
        let result = self.files.write(&path, &content, content_type.as_deref());
        self.logged("write", &path, result)
    }

    fn delete(&mut self, path: String) -> Result<(), FileError> {
        let result = self.files.delete(&path);
        self.logged("delete", &path, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::vfs::MemoryStorage;

    fn storage() -> Arc<dyn Storage> {
        let storage = MemoryStorage::new();
        storage
            .write("docs/a.md", b"alpha", "text/markdown")
            .unwrap();
        storage.write("secret.md", b"top", "text/markdown").unwrap();
        storage
            .write("docs/.hidden.md", b"h", "text/markdown")
            .unwrap();
        Arc::new(storage)
    }

    fn grant(access: FileAccess, root: Option<&str>) -> FileGrant {
        let policy = FilePolicy {
            hide_hidden_paths: true,
            maximum_file_bytes: 10,
            ..FilePolicy::default()
        };
        FileGrant::new("wc", access, Some(storage()), root, policy).unwrap()
    }

    fn denied(result: Result<impl std::fmt::Debug, FileError>) -> String {
        match result {
            Err(FileError::Denied(message)) => message,
            other => panic!("expected Denied, got {other:?}"),
        }
    }

    #[test]
    fn no_grant_denies_everything_and_says_how_to_grant() {
        let none = grant(FileAccess::None, None);
        let message = denied(none.read("docs/a.md"));
        assert_eq!(
            message,
            "plugin \"wc\" has no file access: its manifest grants none. To grant it, put `[grants] files = \"read\"` in wc.toml next to wc.wasm and start the host with `--plugin-files read`"
        );
        denied(none.list());
        assert!(denied(none.write("x.md", b"x", None)).contains("files = \"read-write\""));
        denied(none.delete("docs/a.md"));
        denied(FileGrant::none("wc").read("docs/a.md"));
    }

    #[test]
    fn read_grant_reads_and_lists_but_does_not_write() {
        let read = grant(FileAccess::Read, None);
        let file = read.read("docs/a.md").unwrap();
        assert_eq!(file.content, b"alpha");
        assert_eq!(file.content_type, "text/markdown");
        assert_eq!(file.size, 5);
        let paths: Vec<String> = read.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["docs/a.md", "secret.md"]);
        assert_eq!(
            denied(read.write("docs/b.md", b"b", None)),
            "plugin \"wc\" may only read files; writing needs `files = \"read-write\"` in wc.toml and a host started with `--plugin-files read-write`"
        );
        denied(read.delete("docs/a.md"));
    }

    #[test]
    fn read_write_grant_writes_within_policy() {
        let rw = grant(FileAccess::ReadWrite, None);
        rw.write("notes.md", b"hi", None).unwrap();
        assert_eq!(rw.read("notes.md").unwrap().content_type, "text/markdown");
        assert!(matches!(
            rw.write("big.md", &[b'x'; 11], None),
            Err(FileError::TooLarge(_))
        ));
        rw.delete("notes.md").unwrap();
        assert!(matches!(rw.read("notes.md"), Err(FileError::NotFound(_))));
    }

    #[test]
    fn paths_go_through_the_policy() {
        let read = grant(FileAccess::Read, None);
        assert!(matches!(
            read.read("../etc/passwd"),
            Err(FileError::InvalidPath(_))
        ));
        assert!(matches!(
            read.read("/etc/passwd"),
            Err(FileError::InvalidPath(_))
        ));
        denied(read.read("docs/.hidden.md"));
    }

    #[test]
    fn root_confines_to_the_sub_tree() {
        let docs = grant(FileAccess::Read, Some("docs"));
        assert_eq!(docs.read("a.md").unwrap().content, b"alpha");
        assert!(matches!(
            docs.read("secret.md"),
            Err(FileError::NotFound(_))
        ));
        assert!(matches!(
            docs.read("../secret.md"),
            Err(FileError::InvalidPath(_))
        ));
        let paths: Vec<String> = docs.list().unwrap().into_iter().map(|f| f.path).collect();
        assert_eq!(paths, ["a.md"]);
    }

    #[test]
    fn a_grant_without_storage_is_denied() {
        let grant =
            FileGrant::new("wc", FileAccess::Read, None, None, FilePolicy::default()).unwrap();
        assert!(denied(grant.read("a.md")).starts_with("the host has no file storage"));
    }
}
