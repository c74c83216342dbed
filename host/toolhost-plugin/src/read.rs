//! Bounded reads of a plugin's own files (its `.wasm` and its manifest): regular files
//! only, size-capped before and during the read.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::{PluginError, PluginErrorKind};

/// Largest manifest file read (64 KiB): a manifest is a few lines of TOML; the cap
/// stops a huge (or sparse) file from being read into memory at start-up.
pub(crate) const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Largest component file read (256 MiB): the example plugins are 100-300 KiB and
/// large real-world components a few tens of MiB; the whole file is read into memory and
/// compiled, so the cap bounds what one file can cost the host at start-up.
pub(crate) const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// Reads the regular file at `path` (the plugin's `what`: `component` or `manifest`),
/// refusing anything else and anything over `max` bytes before reading it.
///
/// # Sandbox
/// The file is opened with `O_NONBLOCK` (on Linux), so a FIFO does not block the open
/// waiting for a writer, and checked with `fstat` on the open handle, so it cannot be
/// swapped between the check and the read. The read is bounded by `take(max + 1)`, so a
/// file growing meanwhile cannot pass the cap either. (Elsewhere the type is checked
/// with a `stat` before the open.)
///
/// # Errors
/// [`PluginErrorKind::Io`] (a missing file is `NotFound`), [`PluginErrorKind::NotAFile`],
/// [`PluginErrorKind::FileTooLarge`].
pub(crate) fn read_regular_file(
    path: &Path,
    what: &'static str,
    max: u64,
) -> Result<Vec<u8>, PluginError> {
    let io = |source: std::io::Error| PluginErrorKind::Io(source).at(path.to_owned());
    let not_a_file = |file_type: std::fs::FileType| {
        PluginErrorKind::NotAFile {
            found: describe_file_type(file_type),
        }
        .at(path.to_owned())
    };
    let too_large = |size: u64| {
        PluginErrorKind::FileTooLarge {
            what,
            size,
            limit: max,
        }
        .at(path.to_owned())
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    #[cfg(not(target_os = "linux"))]
    {
        let metadata = std::fs::metadata(path).map_err(io)?;
        if !metadata.is_file() {
            return Err(not_a_file(metadata.file_type()));
        }
    }
    let file: File = options.open(path).map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    if !metadata.is_file() {
        return Err(not_a_file(metadata.file_type()));
    }
    if metadata.len() > max {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::new();
    // Within the cap, so at most MAX_COMPONENT_BYTES; still, never abort on it.
    bytes
        .try_reserve_exact(usize::try_from(metadata.len()).unwrap_or(usize::MAX))
        .map_err(|_| io(std::io::ErrorKind::OutOfMemory.into()))?;
    (&file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// `a FIFO`, `a directory`, ...: what a path that is not a regular file is.
fn describe_file_type(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else {
        "something other than a file"
    }
}

/// The bytes of a plugin's manifest; `Ok(None)` when there is none. Read as
/// [`manifest::read`](crate::manifest::read) reads it.
///
/// # Errors
/// As [`manifest::read`](crate::manifest::read), except that the text is not parsed.
pub(crate) fn read_manifest_bytes(path: &Path) -> Result<Option<Vec<u8>>, PluginError> {
    match read_regular_file(path, "manifest", MAX_MANIFEST_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err)
            if matches!(err.kind(), PluginErrorKind::Io(source)
                if source.kind() == std::io::ErrorKind::NotFound) =>
        {
            Ok(None)
        }
        Err(err) => Err(err),
    }
}
