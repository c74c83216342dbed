//! The compile cache's directory (the entries are `cache.rs`'s): where it may be (never inside, equal to or above a directory the
//! tools or plugins can write), who may write it (only the user running the host), and
//! its key.
//!
//! # Threat model
//! An entry of the cache is native code the host maps and runs. Whoever can write an
//! entry can therefore run code as the host's user, and whoever can corrupt one can make
//! every later start crash. Three rules keep the entries in the host's own hands:
//!
//! 1. **Placement.** The directory is refused when it is inside, equal to or a parent of
//!    a storage root ([`PluginHostConfig::storage_roots`](crate::PluginHostConfig::storage_roots)):
//!    the model's file tools and a plugin's file grant write there. Paths are compared
//!    canonicalised (symbolic links resolved); a cache directory that does not exist yet
//!    is resolved through its nearest existing ancestor.
//! 2. **Ownership.** The directory is created `0700` (files `0600`), and a directory (or
//!    key file) owned by another user, or a directory writable by its group or by others,
//!    is refused: another user could plant an entry. A key file readable by others is
//!    refused too.
//! 3. **Authentication.** Every entry carries a keyed BLAKE3 tag of its artifact and its
//!    cache key, under a random key kept in the directory ([`KEY_FILE`], `0600`). An entry
//!    is read into memory once, its tag checked over those bytes, and only then
//!    deserialised from the same buffer: an entry that does not verify (tampered,
//!    truncated, another component's, written before entries were authenticated) is
//!    deleted and the component recompiled, never loaded.
//!
//! Each refusal is a set-up error ([`CacheError`]) naming the path and the fix; the host
//! does not quietly run without the cache, so a misconfiguration is seen.
//!
//! Not covered: the user running the host (or root) can always write the cache; on
//! systems other than Unix only rules 1 and 3 apply (the file modes are Unix's), and the
//! owner check needs Linux.

use std::fmt;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The key file's name in the cache directory (named when entries were tagged with
/// HMAC-SHA256; the name stays so an existing cache keeps its key).
pub(crate) const KEY_FILE: &str = "hmac-key";

/// Bytes of the key: the key length of keyed BLAKE3 (exactly 32 bytes, 256 bits).
pub(crate) const KEY_LEN: usize = 32;

/// A temporary file of the cache older than this was left by a host that died while
/// writing it, and is removed when a host opens the cache. Far longer than any write
/// takes (one artifact), so a file another running host is writing is never removed.
pub(crate) const STALE_TEMP_AGE: Duration = Duration::from_secs(60 * 60);

/// The mode of the cache directory (and of every directory created on the way to it).
pub(super) const DIR_MODE: u32 = 0o700;
/// The mode of every file of the cache: entries, the key, temporary files.
pub(super) const FILE_MODE: u32 = 0o600;

/// Where the cache directory is relative to a storage root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Placement {
    /// The cache directory is below the root.
    Inside,
    /// The cache directory is the root.
    Same,
    /// The root is below the cache directory.
    Parent,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Placement::Inside => "inside",
            Placement::Same => "the same directory as",
            Placement::Parent => "a parent of",
        })
    }
}

/// Why the compile cache cannot be used. Every message names the path and says what to
/// do instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The cache directory is inside, equal to or a parent of a storage root.
    #[error("the compile cache directory {} is {placement} the storage root {}: whatever may write files there (the model's file tools, a plugin's file grant) could plant native code the host would run. Choose a cache directory outside every storage root (--cache-dir DIR; PluginHostConfig::cache_dir), or turn the cache off (--no-cache; cache_dir: None)", cache.display(), root.display())]
    InsideRoot {
        /// The cache directory, canonicalised.
        cache: PathBuf,
        /// The storage root, canonicalised.
        root: PathBuf,
        /// Where one is relative to the other.
        placement: Placement,
    },
    /// The cache directory or its key file belongs to another user.
    #[error("{what} {} is owned by uid {owner}, not by this user (uid {user}); that user could plant native code the host would run. Use a cache directory of your own (--cache-dir DIR), or give it to this user (chown)", path.display())]
    NotOwned {
        /// `the compile cache directory` or `the compile cache key`.
        what: &'static str,
        /// The directory or key file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The user running the host (effective uid).
        user: u32,
    },
    /// The cache directory is writable by its group or by others.
    #[error("the compile cache directory {} is writable by its group or by others (mode {mode:o}), so another user could plant native code the host would run. Run `chmod 700 {}`, or choose another --cache-dir", path.display(), path.display())]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file can be read or written by its group or by others.
    #[error("the compile cache key {} can be read or written by its group or by others (mode {mode:o}), so another user could forge cache entries. Run `chmod 600 {}` (or delete it: the cache is then rebuilt under a new key)", path.display(), path.display())]
    KeyNotPrivate {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The cache directory exists and is not a directory, or the key file is not a
    /// regular file (a symbolic link, a FIFO, a directory).
    #[error("{} is not a {expected}; remove it or choose another --cache-dir", path.display())]
    WrongType {
        /// The path.
        path: PathBuf,
        /// `directory` or `regular file`.
        expected: &'static str,
    },
    /// The directory could not be created or read, or the key not read or written.
    #[error("the compile cache {}: cannot {action}: {error}; check its permissions, or choose another --cache-dir (or --no-cache)", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// What failed (`create it`, `read the key`, ...).
        action: &'static str,
        /// The I/O error.
        error: io::Error,
    },
}

impl CacheError {
    /// The path the error is about (the cache directory or its key file).
    pub fn path(&self) -> &Path {
        match self {
            CacheError::InsideRoot { cache: path, .. }
            | CacheError::NotOwned { path, .. }
            | CacheError::Writable { path, .. }
            | CacheError::KeyNotPrivate { path, .. }
            | CacheError::WrongType { path, .. }
            | CacheError::Io { path, .. } => path,
        }
    }
}

fn io_error<'a>(path: &'a Path, action: &'static str) -> impl FnOnce(io::Error) -> CacheError + 'a {
    move |error| CacheError::Io {
        path: path.to_owned(),
        action,
        error,
    }
}

/// Refuses `cache_dir` if it is inside, equal to or a parent of any of `roots` (the
/// directories the tools and plugins can write), comparing canonicalised paths. A
/// path that does not exist (yet) is resolved through its nearest existing ancestor, so a
/// cache directory still to be created is checked where it would be. Creates nothing.
///
/// Returns `cache_dir` canonicalised that way.
///
/// ```
/// use toolhost_plugin::cache::{check_cache_dir, CacheError, Placement};
///
/// let root = tempfile::tempdir()?;
/// let err = check_cache_dir(&root.path().join("cache"), &[root.path().to_owned()]).unwrap_err();
/// assert!(matches!(err, CacheError::InsideRoot { placement: Placement::Inside, .. }));
/// let elsewhere = tempfile::tempdir()?;
/// assert!(check_cache_dir(elsewhere.path(), &[root.path().to_owned()]).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CacheError::InsideRoot`] naming both paths; [`CacheError::Io`] when no ancestor of
/// a path can be resolved.
pub fn check_cache_dir(cache_dir: &Path, roots: &[PathBuf]) -> Result<PathBuf, CacheError> {
    let cache = resolve(cache_dir)?;
    for root in roots {
        let root = resolve(root)?;
        let placement = if cache == root {
            Placement::Same
        } else if cache.starts_with(&root) {
            Placement::Inside
        } else if root.starts_with(&cache) {
            Placement::Parent
        } else {
            continue;
        };
        return Err(CacheError::InsideRoot {
            cache,
            root,
            placement,
        });
    }
    Ok(cache)
}

/// `path` made absolute and canonicalised through its nearest existing ancestor; the
/// components below that ancestor (which do not exist, so are no links) are appended
/// with `.` dropped and `..` applied.
fn resolve(path: &Path) -> Result<PathBuf, CacheError> {
    let absolute = std::path::absolute(path).map_err(io_error(path, "resolve it"))?;
    let mut tail = Vec::new();
    let mut at = absolute.as_path();
    let real = loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            break real;
        }
        match (at.parent(), at.components().next_back()) {
            (Some(parent), Some(last)) => {
                tail.push(last);
                at = parent;
            }
            _ => {
                return Err(CacheError::Io {
                    path: path.to_owned(),
                    action: "resolve it",
                    error: io::Error::new(io::ErrorKind::NotFound, "no ancestor of it exists"),
                })
            }
        }
    };
    Ok(tail.into_iter().rev().fold(real, |mut out, part| {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
        out
    }))
}

/// Opens the cache directory `dir` for use: checks its placement against `roots`,
/// creates it (`0700`, also every directory created on the way), checks its placement
/// again now that it exists (a link may have appeared), then its owner and mode, removes
/// stale temporary files, and loads its key (creating it, `0600`, on first use).
///
/// Returns the canonical directory and the key.
///
/// # Errors
/// Any [`CacheError`].
pub(super) fn open(dir: &Path, roots: &[PathBuf]) -> Result<(PathBuf, [u8; KEY_LEN]), CacheError> {
    check_cache_dir(dir, roots)?;
    if let Err(error) = create_private_dir(dir) {
        if dir.exists() && !dir.is_dir() {
            return Err(CacheError::WrongType {
                path: dir.to_owned(),
                expected: "directory",
            });
        }
        return Err(io_error(dir, "create it")(error));
    }
    let real = check_cache_dir(dir, roots)?;
    let metadata = std::fs::metadata(&real).map_err(io_error(&real, "read its metadata"))?;
    if !metadata.is_dir() {
        return Err(CacheError::WrongType {
            path: real,
            expected: "directory",
        });
    }
    sys::check_owner("the compile cache directory", &real, &metadata)?;
    if let Some(mode) = sys::mode(&metadata).filter(|mode| mode & 0o022 != 0) {
        return Err(CacheError::Writable { path: real, mode });
    }
    remove_stale_temps(&real);
    let key = load_or_create_key(&real)?;
    Ok((real, key))
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir)
}

/// A fresh temporary file name in `dir` for `name`: `.NAME.PID.N.tmp`.
pub(super) fn temp_path(dir: &Path, name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Creates `path` for writing, `0600` from the start; fails if it exists.
pub(super) fn create_private_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
    options.open(path)
}

/// Opens `path` for reading without following a symbolic link (on Linux).
pub(super) fn open_no_follow(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    sys::no_follow(&mut options);
    options.open(path)
}

/// Removes the temporary files ([`temp_path`]) older than [`STALE_TEMP_AGE`]: left by a
/// host that died while writing. Best effort.
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with('.') && name.ends_with(".tmp")) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > STALE_TEMP_AGE);
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The key of the cache in `dir`: read from [`KEY_FILE`], or made (random) and stored
/// there if there is none. A key file of the wrong size (never written by a host) is
/// replaced by a new key, which only makes every entry recompile.
fn load_or_create_key(dir: &Path) -> Result<[u8; KEY_LEN], CacheError> {
    let path = dir.join(KEY_FILE);
    // Twice at most: a key of the wrong size is removed and made again once.
    for _ in 0..2 {
        match read_key(&path)? {
            Some(Ok(key)) => return Ok(key),
            Some(Err(len)) => {
                tracing::warn!(
                    target: "plugin",
                    "the compile cache key {} has {len} bytes instead of {KEY_LEN}; replacing it (every cached plugin compiles again)",
                    path.display()
                );
                std::fs::remove_file(&path).map_err(io_error(&path, "remove the broken key"))?;
            }
            None => {
                if let Some(key) = create_key(dir, &path)? {
                    return Ok(key);
                }
                // Another host made it first: read theirs.
            }
        }
    }
    match read_key(&path)? {
        Some(Ok(key)) => Ok(key),
        _ => Err(CacheError::Io {
            path,
            action: "read the key",
            error: io::Error::new(io::ErrorKind::InvalidData, "it keeps changing"),
        }),
    }
}

/// The key in `path`: `None` if there is none, `Some(Err(len))` if it has the wrong size.
#[allow(
    clippy::type_complexity,
    reason = "three outcomes the caller tells apart, spelled out in the doc line above"
)]
fn read_key(path: &Path) -> Result<Option<Result<[u8; KEY_LEN], u64>>, CacheError> {
    let file = match open_no_follow(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) if sys::is_symlink_refusal(&error) => {
            return Err(CacheError::WrongType {
                path: path.to_owned(),
                expected: "regular file",
            })
        }
        Err(error) => return Err(io_error(path, "open the key")(error)),
    };
    let metadata = file.metadata().map_err(io_error(path, "read the key"))?;
    if !metadata.is_file() {
        return Err(CacheError::WrongType {
            path: path.to_owned(),
            expected: "regular file",
        });
    }
    sys::check_owner("the compile cache key", path, &metadata)?;
    if let Some(mode) = sys::mode(&metadata).filter(|mode| mode & 0o077 != 0) {
        return Err(CacheError::KeyNotPrivate {
            path: path.to_owned(),
            mode,
        });
    }
    if metadata.len() != KEY_LEN as u64 {
        return Ok(Some(Err(metadata.len())));
    }
    let mut key = [0; KEY_LEN];
    let mut rest = Vec::new();
    let mut reader = file.take(KEY_LEN as u64 + 1);
    reader
        .read_exact(&mut key)
        .and_then(|()| reader.read_to_end(&mut rest))
        .map_err(io_error(path, "read the key"))?;
    if !rest.is_empty() {
        return Ok(Some(Err(KEY_LEN as u64 + rest.len() as u64)));
    }
    Ok(Some(Ok(key)))
}

/// Makes a random key and stores it at `path` without replacing one that is there
/// (written to a temporary file, then hard-linked into place). `None` when another host
/// stored its key first.
fn create_key(dir: &Path, path: &Path) -> Result<Option<[u8; KEY_LEN]>, CacheError> {
    let mut key = [0; KEY_LEN];
    getrandom::fill(&mut key).map_err(|err| CacheError::Io {
        path: path.to_owned(),
        action: "make a random key",
        error: io::Error::other(err.to_string()),
    })?;
    let temp = temp_path(dir, KEY_FILE);
    let written = create_private_file(&temp).and_then(|mut file| {
        file.write_all(&key)?;
        // On disk before it is linked: a key lost to a crash would silently turn every
        // entry into a miss, a short one would be replaced, but neither is worth it.
        file.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&temp, path));
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(Some(key)),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(error) => Err(io_error(path, "write the key")(error)),
    }
}

/// What depends on the operating system: permission bits, the owner, `O_NOFOLLOW`.
mod sys {
    use std::fs::{Metadata, OpenOptions};
    use std::io;
    use std::path::Path;

    use super::CacheError;

    /// The permission bits, on Unix.
    #[allow(
        clippy::unnecessary_wraps,
        reason = "always Some on Unix; None elsewhere"
    )]
    pub(super) fn mode(metadata: &Metadata) -> Option<u32> {
        #[cfg(unix)]
        {
            Some(std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777)
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            None
        }
    }

    /// Refuses a file owned by another user than the effective one (Linux).
    pub(super) fn check_owner(
        what: &'static str,
        path: &Path,
        metadata: &Metadata,
    ) -> Result<(), CacheError> {
        #[cfg(target_os = "linux")]
        {
            let owner = std::os::unix::fs::MetadataExt::uid(metadata);
            let user = rustix::process::geteuid().as_raw();
            if owner != user {
                return Err(CacheError::NotOwned {
                    what,
                    path: path.to_owned(),
                    owner,
                    user,
                });
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (what, path, metadata);
        Ok(())
    }

    /// Makes `options` refuse to open a symbolic link (Linux).
    pub(super) fn no_follow(options: &mut OpenOptions) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let flag = rustix::fs::OFlags::NOFOLLOW.bits();
            options.custom_flags(i32::try_from(flag).unwrap_or(0));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = options;
    }

    /// Whether `error` is an open refused because the path is a symbolic link.
    pub(super) fn is_symlink_refusal(error: &io::Error) -> bool {
        #[cfg(target_os = "linux")]
        {
            error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = error;
            false
        }
    }
}
