//! Errors of the storage layer.
//!
//! [`StorageError`] is what every [`Storage`](super::Storage) method returns; [`PathError`]
//! is what [`validate_path`](super::validate_path) returns, and it names the argument that
//! held the bad path. Both are written to be shown to a model as they are: each says what
//! was wrong and what to do instead.
//!
//! ```
//! use toolhost::vfs::{validate_path, PathErrorReason};
//!
//! let err = validate_path("path", "../secrets.md").unwrap_err();
//! assert_eq!(err.reason, PathErrorReason::DotDot);
//! assert!(err.to_string().starts_with("argument \"path\""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use super::path::{MAX_PATH_LEN, MAX_SEGMENT_LEN};

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
    /// Any other I/O failure.
    #[error(
        "input/output error on \"{}\": {source}; try again, or try another path",
        Shown(path)
    )]
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

/// A path argument that breaks the rules of [`validate_path`](super::validate_path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument \"{argument}\" {}", self.describe())]
pub struct PathError {
    /// The name of the argument that held the path (e.g. `"path"`, `"destination"`).
    pub argument: String,
    /// The path as given (shown shortened and escaped in the message).
    pub path: String,
    /// Which rule it breaks.
    pub reason: PathErrorReason,
}

/// Which path rule a [`PathError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathErrorReason {
    /// The path is empty.
    Empty,
    /// The path is longer than [`MAX_PATH_LEN`] bytes.
    TooLong,
    /// A segment is longer than [`MAX_SEGMENT_LEN`](super::path::MAX_SEGMENT_LEN) bytes.
    SegmentTooLong,
    /// The path holds a NUL byte.
    Nul,
    /// The path holds another control character (newline, tab, DEL, ...).
    Control,
    /// The path holds a backslash.
    Backslash,
    /// The path starts with `/`.
    Absolute,
    /// The path starts with a drive letter such as `C:`.
    Drive,
    /// The path ends with `/`.
    TrailingSlash,
    /// The path holds an empty segment (`a//b`).
    EmptySegment,
    /// The path holds a `.` segment.
    DotSegment,
    /// The path holds a `..` segment.
    DotDot,
}

impl PathError {
    /// Builds a [`PathError`].
    pub fn new(argument: &str, path: &str, reason: PathErrorReason) -> Self {
        PathError {
            argument: argument.to_owned(),
            path: path.to_owned(),
            reason,
        }
    }

    fn describe(&self) -> String {
        let p = Shown(&self.path);
        match self.reason {
            PathErrorReason::Empty => {
                "is empty; give a relative path such as \"notes/todo.md\"".to_owned()
            }
            PathErrorReason::TooLong if self.path.len() > MAX_PATH_LEN => format!(
                "is {} bytes long, over the limit of {MAX_PATH_LEN} bytes; use a shorter path",
                self.path.len()
            ),
            // A scoped store (vfs::scope) adds its prefix before the limit applies, so a
            // path under the limit can still be too long there (found by fuzzing); the
            // message must not claim it is over the limit, nor name the prefix.
            PathErrorReason::TooLong => format!(
                "is {} bytes long, too long for this store (at most {MAX_PATH_LEN} bytes, less the store's own prefix); use a shorter path",
                self.path.len()
            ),
            PathErrorReason::SegmentTooLong => {
                let longest = self.path.split('/').map(str::len).max().unwrap_or(0);
                format!(
                    "has a name of {longest} bytes in \"{p}\", over the limit of {MAX_SEGMENT_LEN} bytes per name; use shorter names"
                )
            }
            PathErrorReason::Nul => {
                format!("contains a NUL byte (\"{p}\"); remove it")
            }
            PathErrorReason::Control => {
                format!("contains a control character (\"{p}\"); use printable characters only")
            }
            PathErrorReason::Backslash => format!(
                "contains a backslash (\"{p}\"); separate names with forward slashes, e.g. \"notes/todo.md\""
            ),
            PathErrorReason::Absolute => format!(
                "must be relative to the store root, got \"{p}\"; drop the leading \"/\", e.g. \"notes/todo.md\""
            ),
            PathErrorReason::Drive => format!(
                "must be relative to the store root, got the drive path \"{p}\"; drop the drive letter, e.g. \"notes/todo.md\""
            ),
            PathErrorReason::TrailingSlash => format!(
                "ends with \"/\" (\"{p}\"); name a file, not a directory"
            ),
            PathErrorReason::EmptySegment => format!(
                "contains an empty name (\"//\") in \"{p}\"; put exactly one \"/\" between names"
            ),
            PathErrorReason::DotSegment => format!(
                "contains a \".\" segment in \"{p}\"; drop the \"./\", paths are already relative to the store root"
            ),
            PathErrorReason::DotDot => format!(
                "contains a \"..\" segment in \"{p}\"; paths cannot leave the store, name the file from the store root instead"
            ),
        }
    }
}

/// Displays a caller-supplied path for a message: control characters escaped, and at most
/// [`SHOWN_LEN`] characters (a 10,000-byte path must not flood the model's context).
struct Shown<'a>(&'a str);

/// How many characters of a path a message shows.
const SHOWN_LEN: usize = 120;

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (count, c) in self.0.chars().enumerate() {
            if count == SHOWN_LEN {
                return write!(f, "...({} bytes in all)", self.0.len());
            }
            if c.is_control() || c == '"' || c == '\\' {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn shown_escapes_and_shortens() {
        assert_eq!(Shown("a\0b\"c\n").to_string(), "a\\u{0}b\\\"c\\n");
        let long = "a".repeat(10_000);
        let shown = Shown(&long).to_string();
        assert_eq!(shown, format!("{}...(10000 bytes in all)", "a".repeat(120)));
    }

    #[test]
    fn path_error_names_the_argument() {
        let err = PathError::new("destination", "/etc/passwd", PathErrorReason::Absolute);
        assert_eq!(
            err.to_string(),
            "argument \"destination\" must be relative to the store root, got \"/etc/passwd\"; drop the leading \"/\", e.g. \"notes/todo.md\""
        );
        let err = PathError::new("path", &"a".repeat(2000), PathErrorReason::TooLong);
        assert_eq!(
            err.to_string(),
            "argument \"path\" is 2000 bytes long, over the limit of 1024 bytes; use a shorter path"
        );
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
