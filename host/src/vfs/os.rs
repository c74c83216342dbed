//! [`OsStorage`]: a directory on disk (work in progress).

use super::{FileContent, FileEntry, Storage, StorageError};

/// A [`Storage`] rooted at a directory on disk.
#[derive(Debug)]
pub struct OsStorage {
    root: cap_std::fs::Dir,
}

impl OsStorage {
    /// Opens `root` as a store.
    ///
    /// # Sandbox
    /// This is the one place that uses ambient authority.
    ///
    /// # Errors
    /// `Io` if the directory cannot be opened.
    pub fn open(root: impl AsRef<std::path::Path>) -> Result<OsStorage, StorageError> {
        let path = root.as_ref();
        let root = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority())
            .map_err(|e| StorageError::io(path.display().to_string(), e))?;
        Ok(OsStorage { root })
    }
}

impl Storage for OsStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        let _ = &self.root;
        Err(StorageError::NotFound { path: path.into() })
    }
    fn write(&self, path: &str, _content: &[u8], _content_type: &str) -> Result<(), StorageError> {
        Err(StorageError::NotFound { path: path.into() })
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        Err(StorageError::NotFound { path: path.into() })
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        Ok(Vec::new())
    }
}
