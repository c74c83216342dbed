//! [`StorageError`]: what every [`Storage`](super::Storage) method returns, and
//! [`OpenError`]: why [`OsStorage::open`](super::OsStorage::open) failed.

use std::path::PathBuf;

use super::path::PathError;
use super::shown::Shown;

/// Why a [`Storage`](super::Storage) call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// There is no file at `path`.
    #[error("no file at \"{}\"; call list_files to see what exists", Shown(path))]
    NotFound {
        /// The path that was asked for.
        path: String,
    },
    /// The path breaks the rules of [`validate_path`](super::validate_path).
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    /// The backend refuses the path, e.g. a symlink in an [`OsStorage`](super::OsStorage).
    #[error("access to \"{}\" is denied: {reason}", Shown(path))]
    Denied {
        /// The path that was asked for.
        path: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The path names a directory, where a file was expected.
    #[error(
        "\"{}\" is a directory, not a file; call list_files to see the files in it",
        Shown(path)
    )]
    IsDirectory {
        /// The path that was asked for.
        path: String,
    },
    /// A write needs `parent` to be a directory, but it is a file.
    #[error(
        "cannot write \"{}\": \"{}\" is a file, not a directory; choose another path or delete \"{}\" first",
        Shown(path),
        Shown(parent),
        Shown(parent)
    )]
    ParentIsFile {
        /// The path that was written.
        path: String,
        /// The ancestor of `path` that is a file.
        parent: String,
    },
    /// A file is larger than a read may take: the `max_bytes` given to
    /// [`Storage::read_capped`](super::Storage::read_capped), or
    /// [`MAX_READ_BYTES`](super::MAX_READ_BYTES) for a plain
    /// [`read`](super::Storage::read). Raised before the content is allocated; nothing was
    /// read. The file tools also use it for the size cap of their own reads.
    #[error(
        "\"{}\" is {size} bytes, over the limit of {limit} bytes for reading one file, so it was not read; only smaller files can be read here",
        Shown(path)
    )]
    FileTooLarge {
        /// The file's path.
        path: String,
        /// The file's size (at least this much, when it grew while it was read).
        size: u64,
        /// The limit it breaks.
        limit: u64,
    },
    /// A conditional write ([`Storage::write_if_unchanged`](super::Storage::write_if_unchanged))
    /// found the file changed (or gone) since the content it expected was read. Nothing
    /// was written; the other writer's change is kept.
    #[error(
        "\"{}\" changed while it was being edited (another writer changed or deleted it after it was read), so nothing was written and the other change is kept; read the file again and redo the edit",
        Shown(path)
    )]
    Changed {
        /// The file's path.
        path: String,
    },
    /// [`Storage::rename`](super::Storage::rename) without `overwrite` found a file at the
    /// destination. Nothing was moved.
    #[error(
        "\"{}\" already exists, so nothing was moved; choose another path, or replace it explicitly",
        Shown(path)
    )]
    AlreadyExists {
        /// The destination that exists.
        path: String,
    },
    /// The backend does not offer an optional operation (such as
    /// [`Storage::rename`](super::Storage::rename)); callers fall back to the basic ones.
    #[error("this store cannot {operation} files; use the basic operations (read, write, delete) instead")]
    Unsupported {
        /// The operation, e.g. `"rename"`.
        operation: String,
    },
    /// A search query the backend cannot parse.
    #[error("invalid search query {query:?}: {reason}")]
    InvalidQuery {
        /// The query as given.
        query: String,
        /// What is wrong with it, and what to do instead.
        reason: String,
    },
    /// Any other I/O failure. Its text names the path; the OS error is its
    /// [`source`](std::error::Error::source), not repeated in the text (print the chain,
    /// e.g. with [`ErrorChain`](crate::error::ErrorChain), to show both).
    #[error("input/output error on \"{}\"", Shown(path))]
    Io {
        /// The path being accessed.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl StorageError {
    /// Builds an [`StorageError::Io`].
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        StorageError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Why [`OsStorage::open`](super::OsStorage::open) could not open a directory as a store.
///
/// A set-up error for whoever chose the directory (an operator, a config file), not for a
/// model: it says what is wrong with the directory, once. The OS error of
/// [`OpenError::Io`] is its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Nothing exists at the path.
    #[error("{} does not exist", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The path exists but is not a directory.
    #[error("{} is not a directory", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The directory could not be opened (permissions, a broken symlink, ...).
    #[error("cannot open {}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl OpenError {
    /// The path that could not be opened.
    pub fn path(&self) -> &std::path::Path {
        match self {
            OpenError::NotFound { path }
            | OpenError::NotADirectory { path }
            | OpenError::Io { path, .. } => path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::PathErrorReason;

    #[test]
    fn not_found_message_tells_what_to_do() {
        let err = StorageError::NotFound {
            path: "x.md".into(),
        };
        assert_eq!(
            err.to_string(),
            "no file at \"x.md\"; call list_files to see what exists"
        );
    }

    #[test]
    fn io_shows_the_path_and_returns_the_os_error_as_source() {
        let err = StorageError::io("a.md", std::io::Error::other("disk on fire"));
        assert_eq!(err.to_string(), "input/output error on \"a.md\"");
        let source = std::error::Error::source(&err).expect("a source");
        assert_eq!(source.to_string(), "disk on fire");
    }

    #[test]
    fn storage_error_wraps_path_error_transparently() {
        let err: StorageError = PathError::new("path", "", PathErrorReason::Empty).into();
        assert_eq!(
            err.to_string(),
            "argument \"path\" is empty; give a relative path such as \"notes/todo.md\""
        );
    }
}
