//! Bounded reads: opening a file (on Linux by one `openat2` beneath the root, else the
//! portable way), checking the handle's type and size, and reading at most the cap.

use std::io::{self, Read};

use cap_std::fs::Metadata;

use super::errors::{io_error, not_regular, outside};
use super::OsStorage;
use crate::vfs::{OpenedFile, StorageError};

impl OsStorage {
    /// Opens the file at `path` (already checked) for reading: on Linux by one `openat2`
    /// beneath the root with no symbolic link on the way; otherwise, or when that call
    /// did not open it, the portable way (each ancestor `lstat`ed, then opened through
    /// the root's `Dir`). Whatever stopped `openat2` (a link, a missing file or parent, no
    /// permission, no `openat2` at all), the portable path meets it too and reports it as
    /// it always has. The handle's type and size are not checked yet ([`checked`]).
    pub(super) fn open_file(&self, path: &str) -> Result<cap_std::fs::File, StorageError> {
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
}

/// A file [`OsStorage::open_read`](crate::vfs::Storage::open_read) opened: the handle and its `fstat`.
pub(super) struct OsOpened {
    pub(super) path: String,
    pub(super) file: cap_std::fs::File,
    pub(super) md: Metadata,
    pub(super) max_bytes: u64,
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
pub(super) fn checked(
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

/// Files up to this size are read with one `read` asking for a byte more than their
/// size: a read that stops at the size `fstat` gave has reached the end, so no second
/// read is made to see it (one system call of five per file fewer, which is what a grep
/// over many small files pays for most). Their buffer is zeroed first (safe code
/// cannot read into uninitialized memory): a few hundred nanoseconds at this size,
/// about what the saved call costs, so larger files take the plain loop.
const ONE_READ_MAX: u64 = 8 * 1024;

/// Reads the whole of `file` (checked by [`checked`], `md` its `fstat`) into `content`,
/// replacing what it held, at most `max_bytes`.
///
/// Room for the size is reserved fallibly before the read, and the read stops at
/// `max_bytes + 1` bytes, so a file that grows meanwhile is refused too
/// (`FileTooLarge`). A buffer that already has the room (reused across files) is not
/// reallocated. A small file ([`ONE_READ_MAX`]) that still holds its `fstat` size is
/// read in one system call; one that does not (it grew or shrank, or is a `/proc`
/// file whose size says 0) is read on to its end as any other.
pub(super) fn read_rest(
    path: &str,
    mut file: cap_std::fs::File,
    md: &Metadata,
    max_bytes: u64,
    content: &mut Vec<u8>,
) -> Result<(), StorageError> {
    content.clear();
    let one_read = md.len() <= ONE_READ_MAX;
    let reserved = usize::try_from(md.len())
        .ok()
        .map(|len| len + usize::from(one_read))
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
    let limit = max_bytes.saturating_add(1);
    if one_read {
        // Within the room reserved above; `md.len() <= max_bytes`, so the read asks for
        // at most `limit` bytes.
        let want = md.len() + 1;
        content.resize(want as usize, 0);
        match file.read(content) {
            Ok(read) => {
                content.truncate(read);
                if read as u64 == md.len() {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => content.clear(),
            Err(e) => {
                content.clear();
                return Err(io_error(path, e));
            }
        }
    }
    // Through `Take`, `read_to_end` fills the buffer sized above and makes one more read
    // to see the end (growing the buffer fallibly if the file grew). On the bare `File`
    // it would first `fstat` and `lseek` again to size the buffer itself.
    let left = limit.saturating_sub(content.len() as u64);
    let read = Read::take(&mut file, left).read_to_end(content);
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

/// `openat2` beneath the root, for [`OsStorage::read`](crate::vfs::Storage::read) on Linux.
#[cfg(target_os = "linux")]
pub(super) mod beneath {
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
    pub(in crate::vfs::os) enum Miss {
        /// The path leads outside the root (`EXDEV`).
        Outside,
        /// `openat2` is missing or refused (`ENOSYS`, `EPERM`, `EINVAL`).
        Unsupported,
        /// Anything else: a symbolic link (`ELOOP`), a missing file or parent (`ENOENT`,
        /// `ENOTDIR`), no permission, a socket, no file descriptor left...
        Portable,
    }

    /// What an `openat2` error means for the read.
    pub(in crate::vfs::os) fn classify(e: Errno) -> Miss {
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

#[cfg(test)]
mod tests;
