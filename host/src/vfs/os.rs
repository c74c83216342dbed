//! [`OsStorage`]: a directory on disk, reached only through a `cap_std::fs::Dir`.
//!
//! Every access goes through the root's `Dir` handle, which resolves paths itself and
//! refuses any `..`, absolute path or symlink target that would lead outside the root, also
//! when the tree changes during the call. On top of that this store refuses symbolic links
//! altogether (see [`OsStorage`]), validates every path with
//! [`validate_path`](super::validate_path), and writes atomically.
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
/// - **Regular files only**: FIFOs, sockets and devices are refused with
///   [`StorageError::Denied`]. On Linux `read` learns the type from the open handle, so a
///   FIFO or device it is asked for is opened (non-blocking, never read) before it is
///   refused.
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
    /// Makes `read` take the portable path, as where `openat2` is missing.
    #[cfg(test)]
    force_portable_read: std::sync::atomic::AtomicBool,
    /// Reads answered by the `openat2` path.
    #[cfg(test)]
    fast_reads: std::sync::atomic::AtomicUsize,
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
            #[cfg(test)]
            force_portable_read: std::sync::atomic::AtomicBool::new(false),
            #[cfg(test)]
            fast_reads: std::sync::atomic::AtomicUsize::new(0),
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

    /// The Linux fast path of `read`: the file opened by one `openat2` beneath the root
    /// with no symbolic link on the way, then read through its handle. `None` when the
    /// portable path must answer: whatever stopped `openat2` (a link, a missing file or
    /// parent, no permission, no `openat2` at all), the portable path meets it too and
    /// reports it as it always has.
    #[cfg(target_os = "linux")]
    fn read_beneath(&self, path: &str) -> Option<Result<FileContent, StorageError>> {
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
        Some(read_open(
            path,
            cap_std::fs::File::from_std(std::fs::File::from(fd)),
        ))
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
        #[cfg(target_os = "linux")]
        if let Some(read) = self.read_beneath(path) {
            return read;
        }
        self.file_metadata(path)?;
        let file = self.root.open(path).map_err(|e| io_error(path, e))?;
        read_open(path, file)
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

/// Reads `file`, opened for `path`, through its handle: type, size and time from one
/// `fstat` (the path may have changed since it was checked), then the content.
fn read_open(path: &str, mut file: cap_std::fs::File) -> Result<FileContent, StorageError> {
    let md = file.metadata().map_err(|e| io_error(path, e))?;
    if md.is_dir() {
        return Err(StorageError::IsDirectory { path: path.into() });
    }
    if !md.is_file() {
        return Err(not_regular(path));
    }
    let mut content = Vec::with_capacity(usize::try_from(md.len()).unwrap_or(0));
    // Through `Take`, `read_to_end` fills the buffer sized above and makes one more read
    // to see the end. On the bare `File` it would first `fstat` and `lseek` again to size
    // the buffer itself.
    Read::take(&mut file, u64::MAX)
        .read_to_end(&mut content)
        .map_err(|e| io_error(path, e))?;
    Ok(FileContent {
        size: content.len() as u64,
        content,
        content_type: content_type_for(path).to_owned(),
        updated_at: modified(path, &md)?,
    })
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

    /// What a read returned: content (a checksum of it when long), content type and
    /// size, or the error as debugged.
    fn outcome(r: Result<FileContent, StorageError>) -> Result<(String, String, u64), String> {
        r.map(|c| (summary(&c.content), c.content_type, c.size))
            .map_err(|e| format!("{e:?}"))
    }

    fn summary(content: &[u8]) -> String {
        if content.len() <= 64 {
            return format!("{:?}", String::from_utf8_lossy(content));
        }
        let sum = content
            .iter()
            .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        format!("{} bytes, checksum {sum:x}", content.len())
    }

    /// A tree with one of each thing `read` must tell apart, and the exact outcome of
    /// reading each, with whether the `openat2` path answers it (on Linux).
    #[allow(clippy::type_complexity)]
    fn read_cases(root: &Path) -> Vec<(&'static str, Result<(String, String, u64), String>, bool)> {
        std::fs::create_dir_all(root.join("d/sub")).unwrap();
        std::fs::write(root.join("d/a.md"), b"alpha\n").unwrap();
        let big: Vec<u8> = (0..300_001u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(root.join("d/sub/big.bin"), &big).unwrap();
        std::fs::write(root.join("empty.txt"), b"").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("d/a.md", root.join("link.md")).unwrap();
            std::os::unix::fs::symlink("d", root.join("ld")).unwrap();
            std::os::unix::fs::symlink("sub", root.join("d/deep")).unwrap();
            std::os::unix::fs::symlink("/etc/hostname", root.join("d/out.txt")).unwrap();
            std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
        }
        #[cfg(target_os = "linux")]
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let denied = |e: StorageError| Err(format!("{e:?}"));
        let not_found = |p: &str| Err(format!("{:?}", StorageError::NotFound { path: p.into() }));
        let mut cases = vec![
            (
                "d/a.md",
                Ok((summary(b"alpha\n"), "text/markdown".into(), 6)),
                true,
            ),
            (
                "d/sub/big.bin",
                Ok((summary(&big), "text/markdown".into(), 300_001)),
                true,
            ),
            (
                "empty.txt",
                Ok((summary(b""), "text/plain".into(), 0)),
                true,
            ),
            ("nope.md", not_found("nope.md"), false),
            ("d/nope/a.md", not_found("d/nope/a.md"), false),
            ("d/a.md/x", not_found("d/a.md/x"), false),
            (
                "d/sub",
                denied(StorageError::IsDirectory {
                    path: "d/sub".into(),
                }),
                true,
            ),
            (
                "d/.a.tmp-0123456789abcdef0123456789abcdef",
                Err(format!(
                    "{:?}",
                    OsStorage::check("d/.a.tmp-0123456789abcdef0123456789abcdef").unwrap_err()
                )),
                false,
            ),
        ];
        #[cfg(unix)]
        cases.extend([
            (
                "link.md",
                denied(symlink_denied("link.md", "link.md")),
                false,
            ),
            ("ld/a.md", denied(symlink_denied("ld/a.md", "ld")), false),
            (
                "d/deep/big.bin",
                denied(symlink_denied("d/deep/big.bin", "d/deep")),
                false,
            ),
            (
                "d/out.txt",
                denied(symlink_denied("d/out.txt", "d/out.txt")),
                false,
            ),
            // Opening a socket fails (ENXIO), so the portable path answers.
            ("sock", denied(not_regular("sock")), false),
        ]);
        #[cfg(target_os = "linux")]
        cases.push(("fifo", denied(not_regular("fifo")), true));
        cases
    }

    #[test]
    fn read_gives_the_same_answers_on_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let cases = read_cases(dir.path());
        let s = OsStorage::open(dir.path()).unwrap();
        for forced in [false, true] {
            s.force_portable_read.store(forced, Ordering::SeqCst);
            for (path, want, fast) in &cases {
                let before = s.fast_reads.load(Ordering::SeqCst);
                let got = outcome(s.read(path));
                assert_eq!(&got, want, "{path}, portable path forced: {forced}");
                let served = s.fast_reads.load(Ordering::SeqCst) - before;
                let want_served = usize::from(cfg!(target_os = "linux") && *fast && !forced);
                assert_eq!(
                    served, want_served,
                    "{path}, portable path forced: {forced}"
                );
            }
        }
        // Both paths take the time from the open handle.
        let want = std::fs::metadata(dir.path().join("d/a.md"))
            .unwrap()
            .modified()
            .unwrap();
        for forced in [false, true] {
            s.force_portable_read.store(forced, Ordering::SeqCst);
            assert_eq!(s.read("d/a.md").unwrap().updated_at, want, "{forced}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn openat2_errors_are_classified() {
        use beneath::{classify, Miss};
        use rustix::io::Errno;
        assert_eq!(classify(Errno::XDEV), Miss::Outside);
        for e in [Errno::NOSYS, Errno::PERM, Errno::INVAL] {
            assert_eq!(classify(e), Miss::Unsupported, "{e:?}");
        }
        for e in [
            Errno::LOOP,
            Errno::NOENT,
            Errno::NOTDIR,
            Errno::ACCESS,
            Errno::NXIO,
            Errno::AGAIN,
            Errno::MFILE,
        ] {
            assert_eq!(classify(e), Miss::Portable, "{e:?}");
        }
        assert_eq!(
            format!("{:?}", outside("a.md")),
            format!(
                "{:?}",
                StorageError::Denied {
                    path: "a.md".into(),
                    reason: "it leads outside the store's root directory; use a path inside it"
                        .into()
                }
            )
        );
    }

    #[test]
    fn open_refuses_a_missing_root() {
        let dir = tempfile::tempdir().unwrap();
        let err = OsStorage::open(dir.path().join("nope")).unwrap_err();
        assert!(matches!(err, StorageError::Io { .. }), "{err:?}");
    }
}
