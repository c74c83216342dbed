//! Virtual file system: the storage the built-in file tools and granted plugins work on.
//!
//! A [`Storage`] holds files under relative, forward-slash paths. It reads and writes whole
//! files only: there is no ranged read and no rename (the tools build `move_file` from a
//! write and a delete). Backends:
//!
//! - [`MemoryStorage`]: in memory, thread-safe, [`Searchable`].
//! - [`OsStorage`]: a directory on disk, opened through `cap-std`, so no path, `..`,
//!   symlink or race leads outside it.
//! - [`scope`]: a view of another store bound to a sub-tree, for multi-tenant callers.
//!
//! Every path a caller supplies goes through [`validate_path`] before a backend sees it.
//!
//! ```
//! use toolhost::vfs::{MemoryStorage, Storage};
//!
//! let storage = MemoryStorage::new();
//! storage.write("notes/todo.md", b"- ship it\n", "text/markdown")?;
//! let file = storage.read("notes/todo.md")?;
//! assert_eq!(file.content, b"- ship it\n");
//! assert_eq!(storage.list()?[0].path, "notes/todo.md");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::SystemTime;

mod content_type;
mod error;
mod memory;
mod os;
mod path;
mod scope;

pub use content_type::content_type_for;
pub use error::{PathError, PathErrorReason, StorageError};
pub use memory::MemoryStorage;
pub use os::OsStorage;
pub use path::{validate_path, MAX_PATH_LEN, MAX_SEGMENT_LEN};
pub use scope::{scope, ScopedStorage};

/// A whole file as read from a [`Storage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    /// The file's bytes.
    pub content: Vec<u8>,
    /// MIME type, as stored with the file or derived from its extension.
    pub content_type: String,
    /// Size in bytes (equal to `content.len()`).
    pub size: u64,
    /// Last modification time.
    pub updated_at: SystemTime,
}

/// One file in a [`Storage::list`] answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative, forward-slash path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time.
    pub updated_at: SystemTime,
}

/// A file store. Paths are relative and forward-slash; callers validate them with
/// [`validate_path`] first, and backends check them again.
///
/// Implementations are shared between concurrent tool calls, so they are `Send + Sync`.
///
/// # Errors
/// Every method returns a [`StorageError`] the caller can match: `NotFound` for a missing
/// file, `InvalidPath` for a path that breaks the rules (argument name `"path"`), `Denied`
/// for a path the backend refuses (any symlink in an [`OsStorage`] root), `IsDirectory` for
/// a path that names a directory, `ParentIsFile` for a write below a file, `Io` for
/// anything else. Directories exist only implicitly, as the parents of files: `list`
/// shows files only, and every backend behaves alike here (the shared test suite in
/// `host/tests/vfs_backends.rs` checks it).
pub trait Storage: Send + Sync {
    /// Reads a whole file.
    fn read(&self, path: &str) -> Result<FileContent, StorageError>;
    /// Creates or replaces a file. Parent directories are created as needed. A failed write
    /// leaves any previous content intact. An empty `content_type` means "derive it from
    /// the extension" ([`content_type_for`]); backends that do not store types (such as
    /// [`OsStorage`]) always derive it.
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError>;
    /// Whether a file exists at `path`, without reading it: `Ok(false)` where
    /// [`read`](Storage::read) would give `NotFound`, the same error where it would give
    /// any other. The default reads the file; backends override it with a cheap check.
    fn exists(&self, path: &str) -> Result<bool, StorageError> {
        match self.read(path) {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }
    /// Deletes a file; a missing file is `NotFound`.
    fn delete(&self, path: &str) -> Result<(), StorageError>;
    /// Every file in the store, sorted by path.
    fn list(&self) -> Result<Vec<FileEntry>, StorageError>;
    /// The store's search capability, if it has one.
    fn searchable(&self) -> Option<&dyn Searchable> {
        None
    }
}

/// A store that can answer free-text queries (the `search` tool).
pub trait Searchable: Send + Sync {
    /// Paths matching `query`, sorted.
    fn search(&self, query: &str) -> Result<Vec<String>, StorageError>;
    /// A description of the query syntax, embedded in the `search` tool's description.
    fn search_syntax(&self) -> String;
}
