//! The [`StorageError`]s this store reports for what the file system said: an I/O error
//! mapped to its kind, a symbolic link, a path outside the root, a file that is not
//! regular, a modification time.

use std::io::{self};
use std::time::SystemTime;

use cap_std::fs::Metadata;

use crate::vfs::StorageError;

pub(super) fn modified(path: &str, md: &Metadata) -> Result<SystemTime, StorageError> {
    md.modified()
        .map(cap_std::time::SystemTime::into_std)
        .map_err(|e| io_error(path, e))
}

pub(super) fn symlink_denied(path: &str, link: &str) -> StorageError {
    StorageError::Denied {
        path: path.into(),
        reason: format!(
            "\"{link}\" is a symbolic link, and this store does not follow symbolic links; use the path of the real file"
        ),
    }
}

/// The kernel found the path leading outside the root. `validate_path` refuses `..` and
/// absolute paths, and `openat2` refuses links before following them, so this is not
/// expected; refused all the same.
#[cfg(target_os = "linux")]
pub(super) fn outside(path: &str) -> StorageError {
    StorageError::Denied {
        path: path.into(),
        reason: "it leads outside the store's root directory; use a path inside it".into(),
    }
}

pub(super) fn not_regular(path: &str) -> StorageError {
    StorageError::Denied {
        path: path.into(),
        reason:
            "it is not a regular file (a device, socket or pipe); only regular files can be used"
                .into(),
    }
}

/// Maps an I/O error on `path` to the matching [`StorageError`].
pub(super) fn io_error(path: &str, e: io::Error) -> StorageError {
    match e.kind() {
        io::ErrorKind::NotFound => StorageError::NotFound { path: path.into() },
        io::ErrorKind::IsADirectory => StorageError::IsDirectory { path: path.into() },
        // cap-std reports an attempt to leave the root as PermissionDenied too.
        io::ErrorKind::PermissionDenied => StorageError::Denied {
            path: path.into(),
            reason: format!("the operating system refused access ({e}); choose another path"),
        },
        _ => StorageError::Io {
            path: path.into(),
            source: e,
        },
    }
}
