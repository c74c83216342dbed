//! [`OsStorage`]: a directory on disk, reached only through a `cap_std::fs::Dir`.
//!
//! Every access goes through the root's `Dir` handle, which resolves paths itself and
//! refuses any `..`, absolute path or symlink target that would lead outside the root, also
//! when the tree changes during the call. On top of that this store refuses symbolic links
//! altogether (see [`OsStorage`]), validates every path with
//! [`validate_path`](super::validate_path), and writes atomically.
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
use std::path::Path;
use std::time::SystemTime;

use cap_std::fs::{Dir, Metadata, OpenOptions};

use super::{
    content_type_for, validate_path, FileContent, FileEntry, Storage, StorageError, MAX_SEGMENT_LEN,
};

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
/// - **Atomic writes**: content goes to a hidden temporary file in the target's directory
///   (`.<name>.tmp-<random>`), is synced to disk, then renamed over the target. A failed
///   write removes the temporary file and leaves the old content intact. Names of that
///   form are reserved: listings skip them and every method refuses them.
/// - **Mode**: written files are `0644`, so replacing a `0600` file makes it `0644`.
///   Parent directories are created as needed, with the default mode.
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
    #[cfg(test)]
    fail_before_rename: std::sync::atomic::AtomicBool,
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
    /// # Errors
    /// [`StorageError::Io`] if `root` does not exist, is not a directory or cannot be opened.
    pub fn open(root: impl AsRef<Path>) -> Result<OsStorage, StorageError> {
        let path = root.as_ref();
        let root = Dir::open_ambient_dir(path, cap_std::ambient_authority())
            .map_err(|e| StorageError::io(path.display().to_string(), e))?;
        Ok(OsStorage {
            root,
            #[cfg(test)]
            fail_before_rename: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Validates `path` and refuses reserved temporary-file names.
    fn check(path: &str) -> Result<(), StorageError> {
        validate_path("path", path)?;
        if path.split('/').any(is_tmp_name) {
            return Err(StorageError::Denied {
                path: path.into(),
                reason: format!(
                    "names of the form \".<name>{TMP_MARK}<{TMP_RANDOM_LEN} hex digits>\" are reserved for the store's temporary files; choose another name"
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
    /// the temporary file's path; on error nothing is left behind.
    fn write_temp(&self, path: &str, content: &[u8]) -> Result<String, StorageError> {
        let (dir, name) = split(path);
        let tmp = format!("{dir}{}", tmp_name(name));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
        let mut file = self
            .root
            .open_with(&tmp, &options)
            .map_err(|e| io_error(path, e))?;
        let filled = (|| {
            file.write_all(content)?;
            #[cfg(unix)]
            file.set_permissions(cap_std::fs::PermissionsExt::from_mode(FILE_MODE))?;
            file.sync_all()
        })();
        drop(file);
        match filled {
            Ok(()) => Ok(tmp),
            Err(e) => {
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

    fn walk(&self, dir: &Dir, prefix: &str, out: &mut Vec<FileEntry>) -> Result<(), StorageError> {
        let shown = if prefix.is_empty() { "." } else { prefix };
        let entries = dir.entries().map_err(|e| io_error(shown, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io_error(shown, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let rel = format!("{prefix}{name}");
            // Skip what no method could reach: links, temporary files, bad names.
            if is_tmp_name(name) || validate_path("path", &rel).is_err() {
                continue;
            }
            let file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&rel, e)),
            };
            if file_type.is_dir() {
                match entry.open_dir() {
                    Ok(sub) => self.walk(&sub, &format!("{rel}/"), out)?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io_error(&rel, e)),
                }
            } else if file_type.is_file() {
                let md = match entry.metadata() {
                    Ok(md) => md,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(io_error(&rel, e)),
                };
                out.push(FileEntry {
                    updated_at: modified(&rel, &md)?,
                    size: md.len(),
                    path: rel,
                });
            }
        }
        Ok(())
    }
}

impl Storage for OsStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        Self::check(path)?;
        self.file_metadata(path)?;
        let mut file = self.root.open(path).map_err(|e| io_error(path, e))?;
        // Look again through the open handle: the path may have changed since.
        let md = file.metadata().map_err(|e| io_error(path, e))?;
        if !md.is_file() {
            return Err(not_regular(path));
        }
        let mut content = Vec::with_capacity(usize::try_from(md.len()).unwrap_or(0));
        file.read_to_end(&mut content)
            .map_err(|e| io_error(path, e))?;
        Ok(FileContent {
            size: content.len() as u64,
            content,
            content_type: content_type_for(path).to_owned(),
            updated_at: modified(path, &md)?,
        })
    }

    fn write(&self, path: &str, content: &[u8], _content_type: &str) -> Result<(), StorageError> {
        Self::check(path)?;
        // A concurrent delete may prune a directory we just created; try again then.
        let mut attempts = 0;
        let tmp = loop {
            attempts += 1;
            self.create_parents(path)?;
            match self.lstat(path, path)? {
                None => {}
                Some(md) if md.is_symlink() => return Err(symlink_denied(path, path)),
                Some(md) if md.is_dir() => {
                    return Err(StorageError::IsDirectory { path: path.into() })
                }
                Some(md) if !md.is_file() => return Err(not_regular(path)),
                Some(_) => {}
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
            let _ = self.root.remove_file(&tmp);
            return Err(io_error(path, io::Error::other("injected failure")));
        }
        if let Err(e) = self.root.rename(&tmp, &self.root, path) {
            let _ = self.root.remove_file(&tmp);
            return Err(io_error(path, e));
        }
        self.sync_dir(path);
        Ok(())
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

/// Whether `name` has the form [`tmp_name`] produces.
fn is_tmp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(split) = rest.len().checked_sub(TMP_MARK.len() + TMP_RANDOM_LEN) else {
        return false;
    };
    let Some((mark, random)) = rest.get(split..).map(|tail| tail.split_at(TMP_MARK.len())) else {
        return false;
    };
    mark == TMP_MARK && random.bytes().all(|b| b.is_ascii_hexdigit())
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
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn tmp_names_fit_and_are_recognised() {
        let t = tmp_name("a.md");
        assert!(t.starts_with(".a.md.tmp-"), "{t}");
        assert_eq!(t.len(), 1 + 4 + 5 + 32);
        assert!(is_tmp_name(&t));
        let long = "é".repeat(127) + "x"; // 255 bytes
        let t = tmp_name(&long);
        assert!(t.len() <= MAX_SEGMENT_LEN, "{}", t.len());
        assert!(is_tmp_name(&t));
        for not in [
            "a.md",
            ".a.md",
            ".a.tmp-",
            "a.tmp-0123456789abcdef0123456789abcdef",
            ".a.tmp-0123456789abcdef0123456789abcdeg",
            ".a.tmp-0123456789abcdef0123456789abcde",
            ".é",
        ] {
            assert!(!is_tmp_name(not), "{not}");
        }
    }

    #[test]
    fn failed_rename_keeps_old_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let s = OsStorage::open(dir.path()).unwrap();
        s.write("d/a.md", b"old bytes", "").unwrap();
        s.fail_before_rename.store(true, Ordering::SeqCst);
        let err = s.write("d/a.md", b"new", "").unwrap_err();
        assert!(
            matches!(&err, StorageError::Io { path, .. } if path == "d/a.md"),
            "{err:?}"
        );
        assert_eq!(
            std::fs::read(dir.path().join("d/a.md")).unwrap(),
            b"old bytes"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path().join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.md"]);
    }

    #[test]
    fn reserved_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = OsStorage::open(dir.path()).unwrap();
        let name = "a/.x.tmp-0123456789abcdef0123456789abcdef";
        let err = s.write(name, b"x", "").unwrap_err();
        assert!(
            matches!(&err, StorageError::Denied { path, .. } if path == name),
            "{err:?}"
        );
        assert!(!dir.path().join("a").exists());
    }

    #[cfg(unix)]
    #[test]
    fn mode_is_0644_whatever_the_old_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret.md");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = OsStorage::open(dir.path()).unwrap();
        s.write("secret.md", b"y", "").unwrap();
        s.write("new.md", b"y", "").unwrap();
        for name in ["secret.md", "new.md"] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, 0o644, "{name}");
        }
    }

    #[test]
    fn delete_prunes_empty_directories_only() {
        let dir = tempfile::tempdir().unwrap();
        let s = OsStorage::open(dir.path()).unwrap();
        s.write("a/b/c.md", b"", "").unwrap();
        s.write("a/d.md", b"", "").unwrap();
        s.delete("a/b/c.md").unwrap();
        assert!(!dir.path().join("a/b").exists());
        assert!(dir.path().join("a/d.md").exists());
        // Now "a/b" can be a file, as in the memory store.
        s.write("a/b", b"file", "").unwrap();
        assert_eq!(s.read("a/b").unwrap().content, b"file");
    }

    #[test]
    fn open_refuses_a_missing_root() {
        let dir = tempfile::tempdir().unwrap();
        let err = OsStorage::open(dir.path().join("nope")).unwrap_err();
        assert!(matches!(err, StorageError::Io { .. }), "{err:?}");
    }
}
