//! The host's virtual file system, as far as the plugin's manifest was granted.
//!
//! Paths are relative and forward-slash (`notes/todo.md`); the host checks them with the
//! same rules and policy as its built-in file tools (no `..`, no absolute path, no hidden
//! path, allowed extensions, size cap). A plugin without a grant gets
//! [`FileError::Denied`] from every call: ask for access in the plugin's manifest (see
//! `plugins/README.md`).
//!
//! ```no_run
//! use toolhost_sdk::files;
//!
//! let file = files::read("notes/todo.md")?;
//! let text = String::from_utf8_lossy(&file.content);
//! files::write("notes/todo.md", text.replace("[ ]", "[x]").as_bytes(), None)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::bindings::toolhost::plugin::files as wit;
use crate::ToolError;

/// Why a file operation failed. The message comes from the host and is written for the
/// model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// No file at that path.
    #[error("not found: {0}")]
    NotFound(String),
    /// The plugin's grant or the host policy does not allow this path or operation.
    #[error("denied: {0}")]
    Denied(String),
    /// The path breaks the path rules (absolute, `..`, empty segment, too long...).
    #[error("invalid path: {0}")]
    InvalidPath(String),
    /// The content is larger than the host's file size cap.
    #[error("too large: {0}")]
    TooLarge(String),
    /// Any other failure of the storage.
    #[error("{0}")]
    Other(String),
}

impl FileError {
    /// The host's message, without the kind prefix `Display` adds.
    pub fn message(&self) -> &str {
        match self {
            FileError::NotFound(m)
            | FileError::Denied(m)
            | FileError::InvalidPath(m)
            | FileError::TooLarge(m)
            | FileError::Other(m) => m,
        }
    }
}

impl From<wit::FileError> for FileError {
    fn from(error: wit::FileError) -> Self {
        match error {
            wit::FileError::NotFound(m) => FileError::NotFound(m),
            wit::FileError::Denied(m) => FileError::Denied(m),
            wit::FileError::InvalidPath(m) => FileError::InvalidPath(m),
            wit::FileError::TooLarge(m) => FileError::TooLarge(m),
            wit::FileError::Other(m) => FileError::Other(m),
        }
    }
}

/// A bad path usually came from the model's arguments, so it becomes
/// [`ToolError::InvalidArguments`]; every other file error is [`ToolError::Failed`]. The
/// message is the error's `Display` text. This lets a handler use `?` on file calls.
impl From<FileError> for ToolError {
    fn from(error: FileError) -> Self {
        match error {
            FileError::InvalidPath(_) => ToolError::InvalidArguments(error.to_string()),
            _ => ToolError::Failed(error.to_string()),
        }
    }
}

/// A whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct File {
    /// The file's bytes.
    pub content: Vec<u8>,
    /// MIME type.
    pub content_type: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileInfo {
    /// Relative path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
}

/// Reads a whole file (needs a read grant).
///
/// # Errors
///
/// [`FileError::NotFound`], [`FileError::Denied`] (no read grant, or a path the grant or
/// policy does not cover), [`FileError::InvalidPath`], [`FileError::TooLarge`] or
/// [`FileError::Other`].
pub fn read(path: &str) -> Result<File, FileError> {
    let file = wit::read(path)?;
    Ok(File {
        content: file.content,
        content_type: file.content_type,
        size: file.size,
        updated_at_ms: file.updated_at_ms,
    })
}

/// Every file the plugin may see, sorted by path (needs a read grant).
///
/// # Errors
///
/// [`FileError::Denied`] without a read grant, [`FileError::Other`] when the storage fails.
pub fn list() -> Result<Vec<FileInfo>, FileError> {
    let entries = wit::list()?;
    Ok(entries
        .into_iter()
        .map(|info| FileInfo {
            path: info.path,
            size: info.size,
            updated_at_ms: info.updated_at_ms,
        })
        .collect())
}

/// Creates or replaces a file (needs a write grant). The content type defaults from the
/// extension when `None`.
///
/// # Errors
///
/// [`FileError::Denied`], [`FileError::InvalidPath`], [`FileError::TooLarge`] or
/// [`FileError::Other`].
pub fn write(path: &str, content: &[u8], content_type: Option<&str>) -> Result<(), FileError> {
    wit::write(path, content, content_type)?;
    Ok(())
}

/// Deletes a file (needs a write grant).
///
/// # Errors
///
/// [`FileError::NotFound`], [`FileError::Denied`], [`FileError::InvalidPath`] or
/// [`FileError::Other`].
pub fn delete(path: &str) -> Result<(), FileError> {
    wit::delete(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_errors_keep_their_kind_and_map_to_tool_errors() {
        let denied = FileError::from(wit::FileError::Denied("no read grant".into()));
        assert_eq!(denied, FileError::Denied("no read grant".into()));
        assert_eq!(denied.message(), "no read grant");
        assert_eq!(denied.to_string(), "denied: no read grant");
        assert_eq!(
            ToolError::from(denied),
            ToolError::Failed("denied: no read grant".into())
        );
        assert_eq!(
            ToolError::from(FileError::InvalidPath("`..` is not allowed".into())),
            ToolError::InvalidArguments("invalid path: `..` is not allowed".into())
        );
        assert_eq!(
            FileError::Other("disk full".into()).to_string(),
            "disk full"
        );
    }
}
