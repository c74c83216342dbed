//! [`scope`]: a store bound to a sub-tree (work in progress).

use std::sync::Arc;

use super::{validate_path, FileContent, FileEntry, Storage, StorageError};

/// A view of another store bound to a sub-tree.
pub struct ScopedStorage {
    inner: Arc<dyn Storage>,
    prefix: String,
}

/// Binds `storage` to the sub-tree `prefix`.
///
/// # Errors
/// `InvalidPath` (argument `"prefix"`) for a prefix that breaks the path rules.
pub fn scope(storage: Arc<dyn Storage>, prefix: &str) -> Result<ScopedStorage, StorageError> {
    validate_path("prefix", prefix)?;
    Ok(ScopedStorage {
        inner: storage,
        prefix: prefix.to_owned(),
    })
}

impl Storage for ScopedStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        validate_path("path", path)?;
        self.inner.read(&format!("{}/{path}", self.prefix))
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        self.inner
            .write(&format!("{}/{path}", self.prefix), content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        self.inner.delete(&format!("{}/{path}", self.prefix))
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        Ok(Vec::new())
    }
}
