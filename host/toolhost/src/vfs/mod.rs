//! Virtual file system: the storage the built-in file tools and granted plugins work on.
//!
//! A [`Storage`] holds files under relative, forward-slash paths. It reads and writes whole
//! files only (there is no ranged read), every read is bounded ([`Storage::read_capped`],
//! [`MAX_READ_BYTES`]) and checked against the file's size before anything is allocated,
//! a write can be made conditional on the file being unchanged since it was read
//! ([`Storage::write_if_unchanged`]), and a backend may offer an atomic
//! [`rename`](Storage::rename) (the tools fall back to a write and a delete). Backends:
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

use std::ops::ControlFlow;
use std::time::SystemTime;

mod content_type;
mod error;
mod memory;
mod os;
mod path;
mod policy;
mod scope;
mod shown;
#[cfg(test)]
mod visit_tests;

pub use content_type::content_type_for;
pub use error::{OpenError, StorageError};
pub use memory::MemoryStorage;
pub use os::OsStorage;
pub use path::{validate_path, PathError, PathErrorReason, MAX_PATH_LEN, MAX_SEGMENT_LEN};
pub(crate) use policy::DEFAULT_MAX_FILE_BYTES;
pub use policy::{FilePolicy, PolicyError};
pub use scope::{scope, ScopedStorage};

/// The most bytes a plain [`Storage::read`] returns: 256 MiB. A larger file is
/// [`StorageError::FileTooLarge`], refused before its content is allocated.
///
/// A whole-file read is a buffer in host memory, so every read needs a bound; callers with
/// a tighter one (the file tools: 1 MiB for files they edit or move, 64 MiB for read_file
/// and grep by default; a plugin: its memory cap) use [`Storage::read_capped`]. 256 MiB is
/// four times the largest of those defaults, room for an operator who raises one, and
/// small enough that a few concurrent reads cannot take a typical host's memory.
pub const MAX_READ_BYTES: u64 = 256 * 1024 * 1024;

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
/// a path that names a directory, `ParentIsFile` for a write below a file, `FileTooLarge`
/// for a read over its limit, `Changed` for a conditional write that found the file
/// changed, `AlreadyExists` for a rename onto a file without `overwrite`, `Unsupported`
/// for an optional operation the backend lacks, `Io` for anything else. Directories exist
/// only implicitly, as the parents of files: `list` shows files only, and every backend
/// behaves alike here (the shared test suite in `tests/all/vfs_backends.rs` checks it).
pub trait Storage: Send + Sync {
    /// Reads a whole file of at most [`MAX_READ_BYTES`]; a larger one is
    /// [`StorageError::FileTooLarge`]. Callers that know a tighter bound use
    /// [`read_capped`](Storage::read_capped).
    ///
    /// # Errors
    /// `NotFound`, `InvalidPath`, `Denied`, `IsDirectory`, `FileTooLarge`, `Io`.
    fn read(&self, path: &str) -> Result<FileContent, StorageError>;
    /// Reads a whole file of at most `max_bytes`. A larger file is
    /// [`StorageError::FileTooLarge`] naming its size and `max_bytes`.
    ///
    /// Backends check the size before they allocate anything (an [`OsStorage`] asks the
    /// open handle, so a 200 GiB sparse file costs nothing), allocate fallibly, and stop
    /// reading at `max_bytes + 1`, so a file that grows during the read cannot pass the
    /// cap either. The default reads the whole file with [`read`](Storage::read) (bounded
    /// by [`MAX_READ_BYTES`]) and then checks its size: backends override it.
    ///
    /// # Errors
    /// As [`read`](Storage::read), with `FileTooLarge` naming `max_bytes`.
    fn read_capped(&self, path: &str, max_bytes: u64) -> Result<FileContent, StorageError> {
        let file = self.read(path)?;
        if file.size > max_bytes {
            return Err(StorageError::FileTooLarge {
                path: path.to_owned(),
                size: file.size,
                limit: max_bytes,
            });
        }
        Ok(file)
    }
    /// Creates or replaces a file. Parent directories are created as needed. A failed write
    /// leaves any previous content intact. An empty `content_type` means "derive it from
    /// the extension" ([`content_type_for`]); backends that do not store types (such as
    /// [`OsStorage`]) always derive it.
    ///
    /// # Errors
    /// `InvalidPath`, `Denied`, `IsDirectory`, `ParentIsFile`, `Io`.
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError>;
    /// Replaces the file at `path` with `content`, but only if it still holds exactly
    /// `expected` (what the caller read before): a read-modify-write that does not drop a
    /// change another writer made in between. When the file holds anything else, or is
    /// gone, nothing is written and the answer is [`StorageError::Changed`].
    ///
    /// Backends make the check as close to the replacement as they can ([`MemoryStorage`]
    /// under its lock; [`OsStorage`] after the new content is on disk, just before the
    /// rename that puts it in place). The default reads the file, compares, then calls
    /// [`write`](Storage::write): a writer between those two calls still loses its change.
    ///
    /// # Errors
    /// `Changed` when the file no longer holds `expected`; otherwise as
    /// [`write`](Storage::write).
    fn write_if_unchanged(
        &self,
        path: &str,
        expected: &[u8],
        content: &[u8],
        content_type: &str,
    ) -> Result<(), StorageError> {
        let unchanged = match self.read_capped(path, expected.len() as u64) {
            Ok(current) => current.content == expected,
            Err(StorageError::NotFound { .. } | StorageError::FileTooLarge { .. }) => false,
            Err(err) => return Err(err),
        };
        if !unchanged {
            return Err(StorageError::Changed {
                path: path.to_owned(),
            });
        }
        self.write(path, content, content_type)
    }
    /// Whether a file exists at `path`, without reading it: `Ok(false)` where
    /// [`read`](Storage::read) would give `NotFound`, the same error where it would give
    /// any other. The default reads the file; backends override it with a cheap check.
    ///
    /// # Errors
    /// As [`read`](Storage::read), except `NotFound` (which is `Ok(false)`).
    fn exists(&self, path: &str) -> Result<bool, StorageError> {
        match self.read(path) {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }
    /// Deletes a file; a missing file is `NotFound`.
    ///
    /// # Errors
    /// `NotFound`, `InvalidPath`, `Denied`, `IsDirectory`, `Io`.
    fn delete(&self, path: &str) -> Result<(), StorageError>;
    /// Renames the file `from` to `to` in one step: at every instant its content is
    /// reachable under one of the two names, even if the process is killed. Parent
    /// directories of `to` are created as needed; `from`'s directories left empty are
    /// removed. Returns whether an existing file at `to` was replaced.
    ///
    /// Without `overwrite`, an existing `to` is [`StorageError::AlreadyExists`] and nothing
    /// moves. A rename that changes only letter case works on every backend, on
    /// case-insensitive disks too (where `from` and `to` name the same file, which does
    /// not count as existing). `from == to` is a no-op. Backends that store content types
    /// keep the file's type when the extension stays the same (ignoring case) and derive
    /// it from the new extension otherwise.
    ///
    /// Optional: the default is [`StorageError::Unsupported`], and callers then build the
    /// move from [`write`](Storage::write) and [`delete`](Storage::delete).
    ///
    /// # Errors
    /// `Unsupported` (the default), `AlreadyExists`, and what [`read`](Storage::read) and
    /// [`write`](Storage::write) give for either path.
    fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<bool, StorageError> {
        let _ = (from, to, overwrite);
        Err(StorageError::Unsupported {
            operation: "rename".to_owned(),
        })
    }
    /// Every file in the store, sorted by path.
    ///
    /// # Errors
    /// `Io` when the store cannot be walked.
    fn list(&self) -> Result<Vec<FileEntry>, StorageError>;
    /// The paths of every file in the store, sorted: what [`list`](Storage::list) gives,
    /// without sizes and times, for callers that only need the paths (`grep` reads each
    /// file anyway and learns its size from [`open_read`](Storage::open_read)).
    ///
    /// The default takes them from `list`; a backend overrides it where it can list
    /// cheaper ([`OsStorage`] reads the directory entries only, with no `stat` per file).
    ///
    /// # Errors
    /// As [`list`](Storage::list).
    fn list_paths(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.list()?.into_iter().map(|entry| entry.path).collect())
    }
    /// Calls `visit` with the path of every file in the store, in the order of
    /// [`list_paths`](Storage::list_paths) (sorted by path), until it returns
    /// [`ControlFlow::Break`]: a listing that is never held whole, so its memory does not
    /// grow with the store, and that stops as soon as the caller has what it needs.
    ///
    /// The default takes the paths from `list_paths` (the whole listing at once); the
    /// backends of this crate override it and hold at most one directory's entries
    /// ([`OsStorage`]) or a chunk of 1024 paths ([`MemoryStorage`]) at a time. A file
    /// added or removed during the walk may or may not be seen.
    ///
    /// # Errors
    /// As [`list`](Storage::list); files already visited stay visited.
    fn visit_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        for path in self.list_paths()? {
            if visit(path).is_break() {
                break;
            }
        }
        Ok(())
    }
    /// Calls `visit` with every file in the store, with its size and modification time,
    /// in the order of [`list`](Storage::list) (sorted by path), until it returns
    /// [`ControlFlow::Break`]: [`visit_paths`](Storage::visit_paths) for callers that
    /// need the sizes and times.
    ///
    /// The default takes the files from `list`; the backends of this crate override it as
    /// they do `visit_paths`.
    ///
    /// # Errors
    /// As [`list`](Storage::list).
    fn visit_files(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        for entry in self.list()? {
            if visit(entry).is_break() {
                break;
            }
        }
        Ok(())
    }
    /// Opens a file for a bounded whole-file read, so the caller learns its size
    /// ([`OpenedFile::size`]) before it reads the bytes, and can read them into a buffer
    /// it reuses across files ([`OpenedFile::read_into`]).
    ///
    /// The same checks and errors as [`read_capped`](Storage::read_capped) with
    /// `max_bytes`: a file over `max_bytes` is [`StorageError::FileTooLarge`] here, and
    /// one that grows past it before the read is refused by the read.
    ///
    /// The default reads the file at once with `read_capped` and hands out its bytes;
    /// [`OsStorage`] opens it and takes the size from the handle (`fstat`), reading
    /// nothing until asked.
    ///
    /// # Errors
    /// As [`read_capped`](Storage::read_capped): `NotFound`, `FileTooLarge`, `Invalid`
    /// paths, and `Io`.
    ///
    /// ```
    /// use toolhost::vfs::{MemoryStorage, Storage};
    ///
    /// let storage = MemoryStorage::new();
    /// storage.write("a.txt", b"hello", "")?;
    /// let mut buf = Vec::new();
    /// let file = storage.open_read("a.txt", 1024)?;
    /// assert_eq!(file.size(), 5);
    /// file.read_into(&mut buf)?;
    /// assert_eq!(buf, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn open_read(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<Box<dyn OpenedFile + '_>, StorageError> {
        Ok(Box::new(ReadWhole(self.read_capped(path, max_bytes)?)))
    }
    /// The store's search capability, if it has one.
    fn searchable(&self) -> Option<&dyn Searchable> {
        None
    }
}

/// A file opened by [`Storage::open_read`]: its size is known, its bytes are read on
/// request.
pub trait OpenedFile {
    /// The file's size in bytes when it was opened.
    fn size(&self) -> u64;
    /// Reads the whole file into `buf`, replacing what `buf` held (its capacity is
    /// reused). On an error `buf` is left empty.
    ///
    /// # Errors
    /// [`StorageError::FileTooLarge`] when the file grew past the `max_bytes` it was
    /// opened with; [`StorageError::Io`] when the read fails.
    fn read_into(self: Box<Self>, buf: &mut Vec<u8>) -> Result<(), StorageError>;
}

/// The default [`Storage::open_read`]: a file already read whole.
struct ReadWhole(FileContent);

impl OpenedFile for ReadWhole {
    fn size(&self) -> u64 {
        self.0.size
    }

    fn read_into(self: Box<Self>, buf: &mut Vec<u8>) -> Result<(), StorageError> {
        *buf = self.0.content;
        Ok(())
    }
}

/// A store that can answer free-text queries (the `search` tool).
pub trait Searchable: Send + Sync {
    /// Paths matching `query`, sorted.
    ///
    /// # Errors
    /// `InvalidQuery` for a query the backend cannot parse, `Io`.
    fn search(&self, query: &str) -> Result<Vec<String>, StorageError>;
    /// A description of the query syntax, embedded in the `search` tool's description.
    fn search_syntax(&self) -> String;
}
