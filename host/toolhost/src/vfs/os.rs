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

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::fs::{Dir, Metadata, OpenOptions};

use super::{
    content_type_for, validate_path, FileContent, FileEntry, OpenError, OpenedFile, Storage,
    StorageError, MAX_READ_BYTES, MAX_SEGMENT_LEN,
};

mod recover;

use recover::{is_stage_name, stage_name, STAGE_MARK};

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

    /// Opens the file at `path` (already checked) for reading: on Linux by one `openat2`
    /// beneath the root with no symbolic link on the way; otherwise, or when that call
    /// did not open it, the portable way (each ancestor `lstat`ed, then opened through
    /// the root's `Dir`). Whatever stopped `openat2` (a link, a missing file or parent, no
    /// permission, no `openat2` at all), the portable path meets it too and reports it as
    /// it always has. The handle's type and size are not checked yet ([`checked`]).
    fn open_file(&self, path: &str) -> Result<cap_std::fs::File, StorageError> {
        #[cfg(target_os = "linux")]
        if let Some(opened) = self.open_beneath(path) {
            return opened;
        }
        self.file_metadata(path)?;
        self.root.open(path).map_err(|e| io_error(path, e))
    }

    /// The Linux fast path of [`open_file`](Self::open_file); `None` when the portable
    /// path must answer.
    #[cfg(target_os = "linux")]
    fn open_beneath(&self, path: &str) -> Option<Result<cap_std::fs::File, StorageError>> {
        #[cfg(test)]
        if self
            .force_portable_read
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        let fd = match beneath::open(&self.root, path) {
            Ok(fd) => fd,
            Err(beneath::Miss::Outside) => return Some(Err(outside(path))),
            Err(beneath::Miss::Unsupported | beneath::Miss::Portable) => return None,
        };
        #[cfg(test)]
        self.fast_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(Ok(cap_std::fs::File::from_std(std::fs::File::from(fd))))
    }

    /// The paths of the files under `dir`, as [`walk`](Self::walk) finds them, from the
    /// directory entries alone: no `stat` per file where the file system reports each
    /// entry's type (`d_type`; one `lstat` for an entry whose type it leaves unknown).
    fn walk_paths(
        &self,
        dir: &Dir,
        prefix: &str,
        out: &mut Vec<String>,
    ) -> Result<(), StorageError> {
        self.walk_files(dir, prefix, &mut |_, rel| {
            out.push(rel);
            Ok(())
        })
    }

    /// The files under `dir` with their size and modification time.
    fn walk(&self, dir: &Dir, prefix: &str, out: &mut Vec<FileEntry>) -> Result<(), StorageError> {
        self.walk_files(dir, prefix, &mut |entry, rel| {
            let md = match entry.metadata() {
                Ok(md) => md,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_error(&rel, e)),
            };
            out.push(FileEntry {
                updated_at: modified(&rel, &md)?,
                size: md.len(),
                path: rel,
            });
            Ok(())
        })
    }

    /// Calls `on_file` with each regular file under `dir` (its entry and its path, `prefix`
    /// first), in directory order, depth first. Skips what no method could reach (links,
    /// temporary files, bad names) and entries gone since the listing.
    fn walk_files(
        &self,
        dir: &Dir,
        prefix: &str,
        on_file: &mut dyn FnMut(&cap_std::fs::DirEntry, String) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let shown = if prefix.is_empty() { "." } else { prefix };
        let entries = dir.entries().map_err(|e| io_error(shown, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(shown, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let rel = format!("{prefix}{name}");
            // Skip what no method could reach: links, temporary files, bad names.
            if is_reserved_name(name) || validate_path("path", &rel).is_err() {
                continue;
            }
            let mut file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&rel, e)),
            };
            if !(file_type.is_dir() || file_type.is_file() || file_type.is_symlink()) {
                // Unknown to the directory entry (or a special file): ask the file.
                file_type = match entry.metadata() {
                    Ok(md) => md.file_type(),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error(&rel, e)),
                };
            }
            if file_type.is_dir() {
                match entry.open_dir() {
                    Ok(sub) => self.walk_files(&sub, &format!("{rel}/"), on_file)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_error(&rel, e)),
                }
            } else if file_type.is_file() {
                on_file(&entry, rel)?;
            }
        }
        Ok(())
    }
}

impl OsStorage {
    /// `write` and `write_if_unchanged`: the content to a temporary file, then (when
    /// `expected` is given, only if the file still holds it) renamed over `path`.
    fn replace(
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
    fn listed_exactly(&self, path: &str) -> Result<bool, StorageError> {
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
    fn rename_entry(&self, from: &str, to: &str, replace: bool) -> Result<(), StorageError> {
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
    fn lock_stage(&self, stage: &str) -> Option<std::fs::File> {
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
    fn rename_staged(&self, from: &str, to: &str, replace: bool) -> Result<(), StorageError> {
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
        self.walk_paths(&self.root, "", &mut out)?;
        out.sort_unstable();
        Ok(out)
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
        self.walk(&self.root, "", &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }
}

/// Whether two `lstat` results are the same file (device and inode).
#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use cap_std::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Without inode numbers, no two names are known to be one file.
#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
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

/// A file [`OsStorage::open_read`] opened: the handle and its `fstat`.
struct OsOpened {
    path: String,
    file: cap_std::fs::File,
    md: Metadata,
    max_bytes: u64,
}

impl OpenedFile for OsOpened {
    fn size(&self) -> u64 {
        self.md.len()
    }

    fn read_into(self: Box<Self>, buf: &mut Vec<u8>) -> Result<(), StorageError> {
        let OsOpened {
            path,
            file,
            md,
            max_bytes,
        } = *self;
        read_rest(&path, file, &md, max_bytes, buf)
    }
}

/// Checks `file`, opened for `path`, through its handle: type and size from one `fstat`
/// (the path may have changed since it was checked). A directory is `IsDirectory`, any
/// other non-regular file `Denied`, a file over `max_bytes` `FileTooLarge`.
fn checked(
    path: &str,
    file: cap_std::fs::File,
    max_bytes: u64,
) -> Result<(cap_std::fs::File, Metadata), StorageError> {
    let md = file.metadata().map_err(|e| io_error(path, e))?;
    if md.is_dir() {
        return Err(StorageError::IsDirectory { path: path.into() });
    }
    if !md.is_file() {
        return Err(not_regular(path));
    }
    if md.len() > max_bytes {
        return Err(StorageError::FileTooLarge {
            path: path.into(),
            size: md.len(),
            limit: max_bytes,
        });
    }
    Ok((file, md))
}

/// Reads the whole of `file` (checked by [`checked`], `md` its `fstat`) into `content`,
/// replacing what it held, at most `max_bytes`.
///
/// Room for the size is reserved fallibly before the read, and the read stops at
/// `max_bytes + 1` bytes, so a file that grows meanwhile is refused too
/// (`FileTooLarge`). A buffer that already has the room (reused across files) is not
/// reallocated.
fn read_rest(
    path: &str,
    mut file: cap_std::fs::File,
    md: &Metadata,
    max_bytes: u64,
    content: &mut Vec<u8>,
) -> Result<(), StorageError> {
    content.clear();
    let reserved = usize::try_from(md.len())
        .ok()
        .and_then(|len| content.try_reserve_exact(len).ok());
    if reserved.is_none() {
        return Err(io_error(
            path,
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!("no memory for the file's {} bytes", md.len()),
            ),
        ));
    }
    // Through `Take`, `read_to_end` fills the buffer sized above and makes one more read
    // to see the end (growing the buffer fallibly if the file grew). On the bare `File`
    // it would first `fstat` and `lseek` again to size the buffer itself.
    let read = Read::take(&mut file, max_bytes.saturating_add(1)).read_to_end(content);
    if let Err(e) = read {
        content.clear();
        return Err(io_error(path, e));
    }
    let read = content.len() as u64;
    if read > max_bytes {
        content.clear();
        let now = file.metadata().map_or(read, |md| md.len().max(read));
        return Err(StorageError::FileTooLarge {
            path: path.into(),
            size: now,
            limit: max_bytes,
        });
    }
    Ok(())
}

/// `openat2` beneath the root, for [`OsStorage::read`] on Linux.
#[cfg(target_os = "linux")]
mod beneath {
    use std::sync::atomic::{AtomicBool, Ordering};

    use cap_std::fs::Dir;
    use rustix::fd::OwnedFd;
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;

    /// Whether `openat2` works in this process. Cleared for good when it does not: a
    /// kernel before 5.6, or a seccomp filter that refuses the call.
    static AVAILABLE: AtomicBool = AtomicBool::new(true);

    /// Resolve only beneath the root (no `..` out, no absolute path) and through no
    /// symbolic link at all, the file itself included: what the portable path checks
    /// with an `lstat` of every component, done by the kernel in the same call.
    const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
        .union(ResolveFlags::NO_SYMLINKS)
        .union(ResolveFlags::NO_MAGICLINKS);

    /// Why [`open`] did not open the file.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) enum Miss {
        /// The path leads outside the root (`EXDEV`).
        Outside,
        /// `openat2` is missing or refused (`ENOSYS`, `EPERM`, `EINVAL`).
        Unsupported,
        /// Anything else: a symbolic link (`ELOOP`), a missing file or parent (`ENOENT`,
        /// `ENOTDIR`), no permission, a socket, no file descriptor left...
        Portable,
    }

    /// What an `openat2` error means for the read.
    pub(super) fn classify(e: Errno) -> Miss {
        match e {
            Errno::XDEV => Miss::Outside,
            Errno::NOSYS | Errno::PERM | Errno::INVAL => Miss::Unsupported,
            _ => Miss::Portable,
        }
    }

    /// Opens `path` under `root` for reading, in one system call.
    ///
    /// `O_NONBLOCK` makes a FIFO open at once instead of waiting for a writer (the read
    /// then refuses it as not a regular file); regular files ignore it. `O_NOCTTY` keeps a
    /// terminal from becoming the process's controlling terminal.
    pub(super) fn open(root: &Dir, path: &str) -> Result<OwnedFd, Miss> {
        if !AVAILABLE.load(Ordering::Relaxed) {
            return Err(Miss::Unsupported);
        }
        let flags =
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY;
        rustix::fs::openat2(root, path, flags, Mode::empty(), RESOLVE).map_err(|e| {
            let miss = classify(e);
            // EPERM and EINVAL may also concern this one file: give up on `openat2`
            // only if opening the root itself fails the same way.
            if miss == Miss::Unsupported && !works(root) {
                AVAILABLE.store(false, Ordering::Relaxed);
            }
            miss
        })
    }

    /// Whether `openat2` can open the root itself.
    fn works(root: &Dir) -> bool {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match rustix::fs::openat2(root, ".", flags, Mode::empty(), RESOLVE) {
            Ok(_) => true,
            Err(e) => classify(e) != Miss::Unsupported,
        }
    }
}

/// Splits `path` into its directory part (with the trailing `/`, or empty) and file name.
fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => path.split_at(i + 1),
        None => ("", path),
    }
}

/// A fresh temporary name for a file called `name`: `.<name>.tmp-<32 hex digits>`, with
/// `name` shortened (at a character boundary) so the result fits in [`MAX_SEGMENT_LEN`].
fn tmp_name(name: &str) -> String {
    let room = MAX_SEGMENT_LEN - 1 - TMP_MARK.len() - TMP_RANDOM_LEN;
    let mut end = name.len().min(room);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        ".{}{TMP_MARK}{}",
        &name[..end],
        uuid::Uuid::new_v4().simple()
    )
}

/// Whether `name` is reserved for the store itself: a temporary file ([`tmp_name`]) or a
/// staging directory ([`stage_name`]).
fn is_reserved_name(name: &str) -> bool {
    is_tmp_name(name) || is_stage_name(name)
}

/// Whether `name` has the form [`tmp_name`] produces.
fn is_tmp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(split) = rest.len().checked_sub(TMP_MARK.len() + TMP_RANDOM_LEN) else {
        return false;
    };
    // strip_prefix, not split_at: the mark's length may fall inside a character of a name
    // such as ".．．xxx…" (split_at panicked there; found by the path_scope fuzz target).
    let Some(random) = rest
        .get(split..)
        .and_then(|tail| tail.strip_prefix(TMP_MARK))
    else {
        return false;
    };
    random.bytes().all(|b| b.is_ascii_hexdigit())
}

fn modified(path: &str, md: &Metadata) -> Result<SystemTime, StorageError> {
    md.modified()
        .map(cap_std::time::SystemTime::into_std)
        .map_err(|e| io_error(path, e))
}

fn symlink_denied(path: &str, link: &str) -> StorageError {
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
fn outside(path: &str) -> StorageError {
    StorageError::Denied {
        path: path.into(),
        reason: "it leads outside the store's root directory; use a path inside it".into(),
    }
}

fn not_regular(path: &str) -> StorageError {
    StorageError::Denied {
        path: path.into(),
        reason:
            "it is not a regular file (a device, socket or pipe); only regular files can be used"
                .into(),
    }
}

/// Maps an I/O error on `path` to the matching [`StorageError`].
fn io_error(path: &str, e: io::Error) -> StorageError {
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

#[cfg(test)]
mod tests;
