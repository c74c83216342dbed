//! Walking the tree for listings: the files under a directory with their size and
//! modification time, or their paths alone from the directory entries; links skipped.

use std::io::{self};

use cap_std::fs::Dir;

use super::errors::{io_error, modified};
use super::names::is_reserved_name;
use super::OsStorage;
use crate::vfs::{validate_path, FileEntry, StorageError};

impl OsStorage {
    /// The paths of the files under `dir`, as [`walk`](Self::walk) finds them, from the
    /// directory entries alone: no `stat` per file where the file system reports each
    /// entry's type (`d_type`; one `lstat` for an entry whose type it leaves unknown).
    pub(super) fn walk_paths(
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
    pub(super) fn walk(
        &self,
        dir: &Dir,
        prefix: &str,
        out: &mut Vec<FileEntry>,
    ) -> Result<(), StorageError> {
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
