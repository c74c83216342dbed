//! Atomic writes and renames: a temporary file renamed over the target (only if it
//! still holds the expected content, for `write_if_unchanged`), and renames that do not
//! replace (`renameat2(RENAME_NOREPLACE)` on Linux) or that only change a name's case
//! (staged through a locked temporary name).

use std::io::{self};

use cap_std::fs::{Dir, Metadata};

#[cfg(test)]
use std::io::Write;

#[cfg(test)]
use cap_std::fs::OpenOptions;

use super::errors::{io_error, not_regular, symlink_denied};
use super::names::split;
use super::names::stage_name;
use super::OsStorage;
use crate::vfs::{Storage, StorageError};

impl OsStorage {
    /// `write` and `write_if_unchanged`: the content to a temporary file, then (when
    /// `expected` is given, only if the file still holds it) renamed over `path`.
    pub(super) fn replace(
        &self,
        path: &str,
        content: &[u8],
        expected: Option<&[u8]>,
    ) -> Result<(), StorageError> {
        Self::check(path)?;
        // A concurrent delete may prune a directory we just created; try again then.
        let mut attempts = 0;
        let (tmp, handle) = loop {
            attempts += 1;
            self.create_parents(path)?;
            match self.lstat(path, path)? {
                None if expected.is_some() => {
                    return Err(StorageError::Changed { path: path.into() })
                }
                Some(md) if md.is_symlink() => return Err(symlink_denied(path, path)),
                Some(md) if md.is_dir() => {
                    return Err(StorageError::IsDirectory { path: path.into() })
                }
                Some(md) if !md.is_file() => return Err(not_regular(path)),
                None | Some(_) => {}
            }
            match self.write_temp(path, content) {
                Err(StorageError::NotFound { .. }) if attempts < 3 => continue,
                other => break other?,
            }
        };
        #[cfg(test)]
        if self
            .fail_before_rename
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            drop(handle);
            let _ = self.root.remove_file(&tmp);
            return Err(io_error(path, io::Error::other("injected failure")));
        }
        if let Some(expected) = expected {
            if let Err(err) = self.unchanged(path, expected) {
                drop(handle);
                let _ = self.root.remove_file(&tmp);
                return Err(err);
            }
        }
        if let Err(e) = self.root.rename(&tmp, &self.root, path) {
            drop(handle);
            let _ = self.root.remove_file(&tmp);
            return Err(io_error(path, e));
        }
        drop(handle);
        self.sync_dir(path);
        Ok(())
    }

    /// Whether the file at `path` still holds exactly `expected`: `Changed` when it holds
    /// anything else or is gone. Reads at most one byte more than `expected`.
    fn unchanged(&self, path: &str, expected: &[u8]) -> Result<(), StorageError> {
        #[cfg(test)]
        if let Some(bytes) = self
            .append_before_compare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let mut options = OpenOptions::new();
            options.append(true);
            let mut file = self.root.open_with(path, &options).expect("open to append");
            file.write_all(&bytes).expect("append");
        }
        match self.read_capped(path, expected.len() as u64) {
            Ok(current) if current.content == expected => Ok(()),
            Ok(_) | Err(StorageError::NotFound { .. } | StorageError::FileTooLarge { .. }) => {
                Err(StorageError::Changed { path: path.into() })
            }
            Err(err) => Err(err),
        }
    }

    /// The directory holding `path`, opened.
    fn parent_of(&self, path: &str) -> Result<Dir, StorageError> {
        let opened = match split(path).0.strip_suffix('/') {
            None => self.root.try_clone(),
            Some(dir) => self.root.open_dir(dir),
        };
        opened.map_err(|e| io_error(path, e))
    }

    /// Whether the directory of `path` holds an entry named exactly like its last
    /// segment (on a case-insensitive disk, `lstat` also finds other spellings).
    pub(super) fn listed_exactly(&self, path: &str) -> Result<bool, StorageError> {
        let name = split(path).1;
        let dir = self.parent_of(path)?;
        let entries = dir.entries().map_err(|e| io_error(path, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(path, e))?;
            if entry.file_name().to_str() == Some(name) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// One `rename` of `from` to `to`. Without `replace`, an existing `to` is
    /// `AlreadyExists`, checked by the kernel in the same call where it can
    /// (`renameat2(RENAME_NOREPLACE)` on Linux), else just before.
    pub(super) fn rename_entry(
        &self,
        from: &str,
        to: &str,
        replace: bool,
    ) -> Result<(), StorageError> {
        if !replace {
            #[cfg(target_os = "linux")]
            {
                let from_dir = self.parent_of(from)?;
                let to_dir = self.parent_of(to)?;
                match noreplace::rename(&from_dir, split(from).1, &to_dir, split(to).1) {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(StorageError::AlreadyExists { path: to.into() })
                    }
                    Err(e) => return Err(io_error(from, e)),
                }
            }
            if self.lstat(to, to)?.is_some() {
                return Err(StorageError::AlreadyExists { path: to.into() });
            }
        }
        self.root
            .rename(from, &self.root, to)
            .map_err(|e| io_error(from, e))
    }

    /// Opens the staging directory `stage` and takes its advisory lock, which tells
    /// [`OsStorage::open`] in another process that it is in use. Best effort: `None`
    /// where the directory cannot be opened as a file or locked.
    pub(super) fn lock_stage(&self, stage: &str) -> Option<std::fs::File> {
        // A plain handle: `Dir` handles are `O_PATH` on Linux, which cannot be locked.
        let handle = self.root.open(stage).ok()?.into_std();
        handle.try_lock().ok()?;
        Some(handle)
    }

    /// A case-only rename on a case-insensitive disk, where `from` and `to` are one
    /// directory entry and `rename` would change nothing: the file moves into a fresh
    /// staging directory next to it under its old name, then out under its new one.
    /// [`OsStorage::open`] moves a staged file back if the process dies in between; the
    /// staging directory is locked meanwhile, so another process's `open` leaves it be.
    pub(super) fn rename_staged(
        &self,
        from: &str,
        to: &str,
        replace: bool,
    ) -> Result<(), StorageError> {
        let (dir, name) = split(from);
        let stage = format!("{dir}{}", stage_name());
        let staged = format!("{stage}/{name}");
        self.root
            .create_dir(&stage)
            .map_err(|e| io_error(from, e))?;
        let lock = self.lock_stage(&stage);
        if let Err(e) = self.root.rename(from, &self.root, &staged) {
            let _ = self.root.remove_dir(&stage);
            return Err(io_error(from, e));
        }
        self.sync_dir(from);
        if let Err(err) = self.rename_entry(&staged, to, replace) {
            let restored = self.root.rename(&staged, &self.root, from);
            if restored.is_ok() {
                let _ = self.root.remove_dir(&stage);
            } else {
                tracing::warn!(
                    "could not move \"{from}\" back from its staging directory \"{stage}\" after a failed rename; the next start of the host restores it"
                );
            }
            return Err(match err {
                StorageError::AlreadyExists { .. } | StorageError::IsDirectory { .. } => err,
                other => StorageError::io(
                    to,
                    io::Error::other(format!(
                        "the rename failed midway: {}",
                        crate::error::ErrorChain(&other)
                    )),
                ),
            });
        }
        self.sync_dir(to);
        drop(lock);
        if let Err(e) = self.root.remove_dir(&stage) {
            tracing::warn!("renamed \"{from}\" to \"{to}\", but its empty staging directory \"{stage}\" stays ({e}); the next start of the host removes it");
        }
        Ok(())
    }
}

/// Whether two `lstat` results are the same file (device and inode).
#[cfg(unix)]
pub(super) fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use cap_std::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Without inode numbers, no two names are known to be one file.
#[cfg(not(unix))]
pub(super) fn same_file(_: &Metadata, _: &Metadata) -> bool {
    false
}

/// `renameat2(RENAME_NOREPLACE)`, for [`OsStorage::rename`] on Linux.
#[cfg(target_os = "linux")]
mod noreplace {
    use cap_std::fs::Dir;
    use rustix::fs::RenameFlags;
    use rustix::io::Errno;

    /// Renames `from_name` in `from_dir` to `to_name` in `to_dir` unless that exists
    /// (`AlreadyExists`), in one system call. `Ok(false)` when the kernel or the file
    /// system does not offer the flag (`EINVAL`, `ENOSYS`): then nothing happened.
    pub(super) fn rename(
        from_dir: &Dir,
        from_name: &str,
        to_dir: &Dir,
        to_name: &str,
    ) -> std::io::Result<bool> {
        match rustix::fs::renameat_with(
            from_dir,
            from_name,
            to_dir,
            to_name,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::INVAL | Errno::NOSYS) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
