//! Walking the tree for listings: the files under a directory with their size and
//! modification time, or their paths alone from the directory entries; links skipped.
//!
//! The walk streams: it hands each file to its visitor as it comes and stops when the
//! visitor says so, and it comes in path order without sorting the whole listing. Each
//! directory's entries are sorted by name, a directory's name counted with the `/` that
//! follows it in its files' paths, and a directory's files are visited where its name
//! sorts: so the depth-first order is exactly the byte order of the full paths (`a-b`,
//! `a.md`, `a/x`, `a0`), and what the walk holds at once is the entries of the
//! directories on the way down to the current one, never the whole tree.

use std::io;
use std::ops::ControlFlow;

use cap_std::fs::{Dir, DirEntry};

use super::errors::{io_error, modified};
use super::names::is_reserved_name;
use super::OsStorage;
use crate::vfs::{validate_path, FileEntry, StorageError};

/// What a file visitor of the walk returns: go on, or stop the walk.
type Flow = Result<ControlFlow<()>, StorageError>;

impl OsStorage {
    /// Calls `visit` with the path of each file under `dir`, in path order, from the
    /// directory entries alone: no `stat` per file where the file system reports each
    /// entry's type (`d_type`; one `lstat` for an entry whose type it leaves unknown).
    pub(super) fn walk_paths(
        &self,
        dir: &Dir,
        prefix: &str,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.walk_files(dir, prefix, &mut |_, rel| Ok(visit(rel)))
            .map(|_| ())
    }

    /// Calls `visit` with each file under `dir` with its size and modification time, in
    /// path order.
    pub(super) fn walk(
        &self,
        dir: &Dir,
        prefix: &str,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.walk_files(dir, prefix, &mut |entry, rel| {
            let md = match entry.metadata() {
                Ok(md) => md,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Ok(ControlFlow::Continue(()))
                }
                Err(e) => return Err(io_error(&rel, e)),
            };
            Ok(visit(FileEntry {
                updated_at: modified(&rel, &md)?,
                size: md.len(),
                path: rel,
            }))
        })
        .map(|_| ())
    }

    /// Calls `on_file` with each regular file under `dir` (its entry and its path, `prefix`
    /// first), in path order, depth first, until it returns `Break` (which this returns
    /// too). Skips what no method could reach (links, temporary files, bad names) and
    /// entries gone since the listing.
    fn walk_files(
        &self,
        dir: &Dir,
        prefix: &str,
        on_file: &mut dyn FnMut(&DirEntry, String) -> Flow,
    ) -> Flow {
        let shown = if prefix.is_empty() { "." } else { prefix };
        // This directory's files and sub-directories, each with its sort key: the name,
        // with a `/` after a directory's.
        let mut listed: Vec<(String, DirEntry, bool)> = Vec::new();
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
                listed.push((format!("{name}/"), entry, true));
            } else if file_type.is_file() {
                listed.push((name.to_owned(), entry, false));
            }
        }
        listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (key, entry, is_dir) in listed {
            let rel = format!("{prefix}{key}");
            if !is_dir {
                if on_file(&entry, rel)?.is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                continue;
            }
            match entry.open_dir() {
                Ok(sub) => {
                    if self.walk_files(&sub, &rel, on_file)?.is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(rel.trim_end_matches('/'), e)),
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}
