//! [`OsStorage`]: a directory on disk, reached only through a `cap_std::fs::Dir`.
//!
//! Every access goes through the root's `Dir` handle, which resolves paths itself and
//! refuses any `..`, absolute path or symlink target that would lead outside the root, also
//! when the tree changes during the call. On top of that this store refuses symbolic links
//! altogether (see [`OsStorage`]), validates every path with
//! [`validate_path`](super::validate_path), and writes atomically.
//!
//! Every read is bounded: the size comes from the open handle (`fstat`) and is checked
//! against the cap before anything is allocated, the buffer is allocated fallibly, and the
//! read stops one byte past the cap, so a file that grows meanwhile cannot pass it.
//!
//! On Linux, [`read`](Storage::read) opens the file with a single `openat2` call that
//! refuses symbolic links and any way out of the root in the kernel, instead of checking
//! each directory on the way first; it takes the portable path when that call fails, so
//! its errors are the same either way.
//!
//! This file holds the store, its path checks and the [`Storage`] impl; the steps have
//! their own files under `os/`: `read` (bounded reads, `openat2`), `rename` (atomic
//! writes and renames), `walk` (listings) and `window` (its bounded directory windows),
//! `names` (temporary and reserved names),
//! `errors` (file-system errors as [`StorageError`]s) and `recover` (clean-up at open).
//!
//! ```
//! use toolhost::vfs::{OsStorage, Storage};
//!
//! let dir = tempfile::tempdir()?;
//! let storage = OsStorage::open(dir.path())?;
//! storage.write("notes/todo.md", b"- ship it\n", "")?;
//! assert_eq!(std::fs::read(dir.path().join("notes/todo.md"))?, b"- ship it\n");
//! assert_eq!(storage.read("notes/todo.md")?.content_type, "text/markdown");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, Metadata, OpenOptions};

use super::{
    content_type_for, validate_path, FileContent, FileEntry, OpenError, OpenedFile, Storage,
    StorageError, MAX_READ_BYTES,
};
use errors::{io_error, modified, not_regular, symlink_denied};
use names::{is_reserved_name, split, tmp_name};
use read::{checked, read_rest, OsOpened};
use rename::same_file;

mod recover;

use names::STAGE_MARK;

mod errors;
mod names;
mod read;
mod rename;
mod walk;
mod window;

/// The mode of every file this store writes (`rw-r--r--`), whatever the process umask.
const FILE_MODE: u32 = 0o644;

/// Marks a temporary file: `.<name>.tmp-<32 hex digits>`.
const TMP_MARK: &str = ".tmp-";

/// Hex digits of the random part of a temporary file name.
const TMP_RANDOM_LEN: usize = 32;

/// A [`Storage`] over a directory on disk.
///
/// - **Containment**: all access goes through a `cap_std::fs::Dir` for the root, so no path,
///   `..`, symlink or concurrent rename leads outside it.
/// - **No symbolic links**: a path whose file, or any directory on the way to it, is a
///   symbolic link is refused with [`StorageError::Denied`], wherever the link points,
///   inside the root or out; [`list`](Storage::list) skips links. (The check is made just
///   before each access; if another local process swaps a link in at that moment, cap-std
///   still keeps the access inside the root.)
/// - **Regular files only**: FIFOs, sockets and devices are refused with
///   [`StorageError::Denied`]. On Linux `read` learns the type from the open handle, so a
///   FIFO or device it is asked for is opened (non-blocking, never read) before it is
///   refused.
/// - **Atomic writes**: content goes to a hidden temporary file in the target's directory
///   (`.<name>.tmp-<random>`), is synced to disk, then renamed over the target. A failed
///   write removes the temporary file and leaves the old content intact.
///   [`write_if_unchanged`](Storage::write_if_unchanged) compares the file with what the
///   caller expects after the new content is on disk, just before that rename.
/// - **Renames** ([`rename`](Storage::rename)) are one `rename` system call (on Linux
///   `renameat2(RENAME_NOREPLACE)` when nothing may be replaced), so the file is under the
///   old or the new name at every instant. A rename that only changes letter case on a
///   case-insensitive disk, where that call would change nothing, goes through a staging
///   directory next to the file (`.stage-<random>`): the file is moved into it under its
///   old name, then out under the new one.
/// - **Recovery**: [`open`](OsStorage::open) cleans up after a process that was killed
///   mid-way: it removes temporary files and moves a staged file back to its old name
///   (or removes it, when a file of that name exists again). Files in use by a live
///   process are left alone: each writer holds an advisory lock on its temporary file
///   or staging directory until it is done. Names of both forms are reserved: listings
///   skip them and every method refuses them.
/// - **Mode**: written files are `0644`, so replacing a `0600` file makes it `0644`; a
///   renamed file keeps its mode (it is the same file). Parent directories are created
///   as needed, with the default mode.
/// - **Content type**: derived from the extension by
///   [`content_type_for`](super::content_type_for); the `content_type` given to `write` is
///   not stored.
/// - **Empty directories**: `delete` removes directories the deletion leaves empty, so
///   that, as in [`MemoryStorage`](super::MemoryStorage), a directory exists only while it
///   holds files.
///
/// Not [`Searchable`](super::Searchable).
#[derive(Debug)]
pub struct OsStorage {
    root: Dir,
    /// The path `root` was opened at, canonicalised then ([`OsStorage::root`]).
    root_path: PathBuf,
    #[cfg(test)]
    fail_before_rename: std::sync::atomic::AtomicBool,
    /// Makes `read` take the portable path, as where `openat2` is missing.
    #[cfg(test)]
    force_portable_read: std::sync::atomic::AtomicBool,
    /// Reads answered by the `openat2` path.
    #[cfg(test)]
    fast_reads: std::sync::atomic::AtomicUsize,
    /// Makes a case-only `rename` go through a staging directory, as on a
    /// case-insensitive disk.
    #[cfg(test)]
    force_case_staging: std::sync::atomic::AtomicBool,
    /// Bytes `write_if_unchanged` appends to the file just before its comparison, as
    /// another writer would.
    #[cfg(test)]
    append_before_compare: std::sync::Mutex<Option<Vec<u8>>>,
}

/// What [`OsStorage::ancestors`] found on the way to a path.
enum Ancestors {
    /// Every ancestor is a directory.
    Dirs,
    /// The ancestor at this byte offset (exclusive end) and those below it are missing.
    Missing(usize),
    /// This ancestor is a file (or another non-directory).
    NotDir(String),
}

impl OsStorage {
    /// Opens the directory `root` as a store.
    ///
    /// # Sandbox
    /// This is the only place in the crate, besides the command line, that uses ambient
    /// authority (`cap_std::ambient_authority()`): it opens `root` by its path in the
    /// process's file system namespace. Whoever chooses `root` grants the store, and with it
    /// the model, read and write access to everything under it. If `root` itself is a
    /// symbolic link, it is followed here, once.
    ///
    /// Then it recovers from a process killed while it wrote or renamed here: every
    /// temporary file (`.<name>.tmp-<32 hex digits>`) not in use is removed, and every
    /// staging directory (`.stage-<32 hex digits>`) not in use is emptied, its file moved
    /// back to its old name (or removed, when a file of that name exists again, which
    /// is logged), then removed. This walks the whole tree once, reading directories only
    /// (as [`list`](Storage::list) does, without its `stat` per file). What it did is
    /// logged; a step that fails is logged and skipped, never an error.
    ///
    /// # Errors
    /// [`OpenError::NotFound`] if `root` does not exist, [`OpenError::NotADirectory`] if
    /// it is not a directory, [`OpenError::Io`] if it cannot be opened.
    pub fn open(root: impl AsRef<Path>) -> Result<OsStorage, OpenError> {
        let path = root.as_ref();
        let root = Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(|source| {
            let path = path.to_owned();
            match source.kind() {
                std::io::ErrorKind::NotFound => OpenError::NotFound { path },
                std::io::ErrorKind::NotADirectory => OpenError::NotADirectory { path },
                _ => OpenError::Io { path, source },
            }
        })?;
        let report = recover::recover(&root);
        report.log(path);
        Ok(OsStorage {
            root,
            root_path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()),
            #[cfg(test)]
            fail_before_rename: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            force_portable_read: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            fast_reads: std::sync::atomic::AtomicUsize::new(0),
            #[cfg(test)]
            force_case_staging: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            append_before_compare: std::sync::Mutex::new(None),
        })
    }

    /// The directory this store was opened at, canonicalised at [`OsStorage::open`] (the
    /// store keeps working through its handle if the directory is moved later; this path
    /// does not follow). For `toolhost_plugin::PluginHostConfig::storage_roots`.
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// Makes every case-only [`rename`](Storage::rename) in a directory take the staging
    /// path a case-insensitive disk needs (for tests on case-sensitive disks).
    #[cfg(test)]
    pub(crate) fn force_case_staging(&self, on: bool) {
        self.force_case_staging
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Validates `path` and refuses reserved temporary-file and staging names.
    fn check(path: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        if path.split('/').any(is_reserved_name) {
            return Err(StorageError::Denied {
                path: path.into(),
                reason: format!(
                    "names of the form \".<name>{TMP_MARK}<{TMP_RANDOM_LEN} hex digits>\" and \"{STAGE_MARK}<{TMP_RANDOM_LEN} hex digits>\" are reserved for the store's temporary and staging files; choose another name"
                ),
            });
        }
        Ok(())
    }

    /// `symlink_metadata` of `rel`, `None` if it does not exist.
    fn lstat(&self, path: &str, rel: &str) -> Result<Option<Metadata>, StorageError> {
        match self.root.symlink_metadata(rel) {
            Ok(md) => Ok(Some(md)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            // An ancestor turned into a file since we looked.
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => Ok(None),
            Err(e) => Err(io_error(path, e)),
        }
    }

    /// Walks the directories on the way to `path`, refusing symbolic links.
    fn ancestors(&self, path: &str) -> Result<Ancestors, StorageError> {
        for (end, _) in path.match_indices('/') {
            let dir = &path[..end];
            match self.lstat(path, dir)? {
                None => return Ok(Ancestors::Missing(end)),
                Some(md) if md.is_symlink() => return Err(symlink_denied(path, dir)),
                Some(md) if md.is_dir() => {}
                Some(_) => return Ok(Ancestors::NotDir(dir.to_owned())),
            }
        }
        Ok(Ancestors::Dirs)
    }

    /// The metadata of the file at `path`: `NotFound`, `Denied` for links and special
    /// files, `IsDirectory` for directories.
    fn file_metadata(&self, path: &str) -> Result<Metadata, StorageError> {
        match self.ancestors(path)? {
            Ancestors::Dirs => {}
            Ancestors::Missing(_) | Ancestors::NotDir(_) => {
                return Err(StorageError::NotFound { path: path.into() })
            }
        }
        match self.lstat(path, path)? {
            None => Err(StorageError::NotFound { path: path.into() }),
            Some(md) if md.is_symlink() => Err(symlink_denied(path, path)),
            Some(md) if md.is_dir() => Err(StorageError::IsDirectory { path: path.into() }),
            Some(md) if !md.is_file() => Err(not_regular(path)),
            Some(md) => Ok(md),
        }
    }

    /// Makes sure every directory on the way to `path` exists.
    fn create_parents(&self, path: &str) -> Result<(), StorageError> {
        let first_missing = match self.ancestors(path)? {
            Ancestors::Dirs => return Ok(()),
            Ancestors::NotDir(parent) => {
                return Err(StorageError::ParentIsFile {
                    path: path.into(),
                    parent,
                })
            }
            Ancestors::Missing(end) => end,
        };
        for (end, _) in path
            .match_indices('/')
            .filter(|(end, _)| *end >= first_missing)
        {
            let dir = &path[..end];
            match self.root.create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Created concurrently, or something else is there: look again.
                    match self.lstat(path, dir)? {
                        Some(md) if md.is_symlink() => return Err(symlink_denied(path, dir)),
                        Some(md) if md.is_dir() => {}
                        _ => {
                            return Err(StorageError::ParentIsFile {
                                path: path.into(),
                                parent: dir.into(),
                            })
                        }
                    }
                }
                Err(e) => return Err(io_error(path, e)),
            }
        }
        Ok(())
    }

    /// Creates the temporary file for `path` and writes `content` into it, synced. Returns
    /// the temporary file's path and its handle, which holds an advisory lock so that
    /// [`open`](OsStorage::open) in another process leaves the file alone; keep it until
    /// the file is renamed. On error nothing is left behind.
    fn write_temp(
        &self,
        path: &str,
        content: &[u8],
    ) -> Result<(String, std::fs::File), StorageError> {
        let (dir, name) = split(path);
        let tmp = format!("{dir}{}", tmp_name(name));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
        let file = self
            .root
            .open_with(&tmp, &options)
            .map_err(|e| io_error(path, e))?;
        let mut file = file.into_std();
        // Best effort: where the file system has no locks, recovery may remove a temporary
        // file in use, and this write then fails cleanly at the rename.
        let _ = file.try_lock();
        let filled = (|| {
            file.write_all(content)?;
            #[cfg(unix)]
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(FILE_MODE))?;
            file.sync_all()
        })();
        match filled {
            Ok(()) => Ok((tmp, file)),
            Err(e) => {
                drop(file);
                let _ = self.root.remove_file(&tmp);
                Err(io_error(path, e))
            }
        }
    }

    /// Syncs the directory holding `path`, so a rename in it survives a crash. Best
    /// effort: not every platform can open a directory as a file.
    fn sync_dir(&self, path: &str) {
        let (dir, _) = split(path);
        let dir = dir.strip_suffix('/').unwrap_or(".");
        if let Ok(handle) = self.root.open(dir) {
            let _ = handle.sync_all();
        }
    }

    /// Removes the directories above `path` that are now empty, deepest first.
    fn prune_empty_parents(&self, path: &str) {
        for (end, _) in path.rmatch_indices('/') {
            if self.root.remove_dir(&path[..end]).is_err() {
                break;
            }
        }
    }
}

impl Storage for OsStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        self.read_capped(path, MAX_READ_BYTES)
    }

    fn read_capped(&self, path: &str, max_bytes: u64) -> Result<FileContent, StorageError> {
        Self::check(path)?;
        let (file, md) = checked(path, self.open_file(path)?, max_bytes)?;
        let mut content = Vec::new();
        read_rest(path, file, &md, max_bytes, &mut content)?;
        Ok(FileContent {
            size: content.len() as u64,
            content,
            content_type: content_type_for(path).to_owned(),
            updated_at: modified(path, &md)?,
        })
    }

    /// One open (`openat2` on Linux, as [`read`](Storage::read)) and one `fstat` of the
    /// handle; the bytes are read by [`OpenedFile::read_into`], into the caller's buffer.
    fn open_read(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<Box<dyn OpenedFile + '_>, StorageError> {
        Self::check(path)?;
        let (file, md) = checked(path, self.open_file(path)?, max_bytes)?;
        Ok(Box::new(OsOpened {
            path: path.to_owned(),
            file,
            md,
            max_bytes,
        }))
    }

    /// The paths of [`list`](Storage::list), from the directory entries alone (no `stat`
    /// per file where the file system gives each entry's type).
    fn list_paths(&self) -> Result<Vec<String>, StorageError> {
        let mut out = Vec::new();
        self.walk_paths(&mut |path| {
            out.push(path);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Streams the paths of [`list_paths`](Storage::list_paths) in path order, holding
    /// the entries of one directory (and of those above it) at a time: each directory's
    /// entries are sorted as they are read, so the whole listing never is.
    fn visit_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.walk_paths(visit)
    }

    /// Streams the files of [`list`](Storage::list) as
    /// [`visit_paths`](Storage::visit_paths) streams their paths, with one `stat` per
    /// file visited.
    fn visit_files(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.walk(visit)
    }

    /// The checks of a portable [`read`](Storage::read) (path rules, no symlink on the
    /// way, a regular file), without opening the file.
    fn exists(&self, path: &str) -> Result<bool, StorageError> {
        Self::check(path)?;
        match self.file_metadata(path) {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    fn write(&self, path: &str, content: &[u8], _content_type: &str) -> Result<(), StorageError> {
        self.replace(path, content, None)
    }

    /// The new content goes to disk first; the comparison comes after that, just before
    /// the rename that puts it in place, so the window in which another writer's change
    /// can still be lost is the time between two system calls. (A writer that keeps the
    /// old file open and writes into it after the rename writes into a file no name
    /// leads to any more; no check can see that.)
    fn write_if_unchanged(
        &self,
        path: &str,
        expected: &[u8],
        content: &[u8],
        _content_type: &str,
    ) -> Result<(), StorageError> {
        self.replace(path, content, Some(expected))
    }

    fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<bool, StorageError> {
        Self::check(from)?;
        Self::check(to)?;
        let from_md = self.file_metadata(from)?;
        if from == to {
            return Ok(false);
        }
        self.create_parents(to)?;
        let same_directory = split(from).0 == split(to).0;
        let case_only = same_directory && from.to_lowercase() == to.to_lowercase();
        let replaced = match self.lstat(to, to)? {
            None => false,
            Some(md) if md.is_symlink() => return Err(symlink_denied(to, to)),
            Some(md) if md.is_dir() => return Err(StorageError::IsDirectory { path: to.into() }),
            Some(md) if !md.is_file() => return Err(not_regular(to)),
            Some(md) if same_file(&md, &from_md) => {
                // One file under both names: a case-insensitive disk, or a hard link.
                if case_only && !self.listed_exactly(to)? {
                    self.rename_staged(from, to, false)?;
                    return Ok(false);
                }
                return Err(StorageError::Denied {
                    path: to.into(),
                    reason: format!("it is the same file as \"{from}\" (a hard link, or the same name on a case-insensitive disk), so nothing was moved; choose another destination")
                });
            }
            Some(_) if !overwrite => return Err(StorageError::AlreadyExists { path: to.into() }),
            Some(_) => true,
        };
        #[cfg(test)]
        if case_only
            && self
                .force_case_staging
                .load(std::sync::atomic::Ordering::SeqCst)
        {
            self.rename_staged(from, to, overwrite)?;
            return Ok(replaced);
        }
        // A concurrent delete may prune the directory just created for `to`; try again then.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.rename_entry(from, to, overwrite) {
                Err(StorageError::NotFound { .. }) if attempts < 3 && self.exists(from)? => {
                    self.create_parents(to)?;
                }
                other => break other?,
            }
        }
        self.sync_dir(to);
        if !same_directory {
            self.sync_dir(from);
            self.prune_empty_parents(from);
        }
        Ok(replaced)
    }

    fn delete(&self, path: &str) -> Result<(), StorageError> {
        Self::check(path)?;
        self.file_metadata(path)?;
        self.root.remove_file(path).map_err(|e| io_error(path, e))?;
        self.prune_empty_parents(path);
        Ok(())
    }

    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        let mut out = Vec::new();
        self.walk(&mut |entry| {
            out.push(entry);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
