//! Walking the tree for listings: the files under a directory with their size and
//! modification time, or their paths alone from the directory entries; links skipped.
//!
//! The walk streams: it hands each file to its visitor as it comes and stops when the
//! visitor says so, and it comes in path order without sorting the whole listing. Each
//! directory's entries are sorted by name, a directory's name counted with the `/` that
//! follows it in its files' paths, and a directory's files are visited where its name
//! sorts: so the depth-first order is exactly the byte order of the full paths (`a-b`,
//! `a.md`, `a/x`, `a0`).
//!
//! What the walk holds at once is bounded whatever the tree: the names of the
//! directories on the way down to the current one, in [windows](super::window) of at
//! most [`WALK_BUDGET`] bytes together. A directory whose names do not fit its share is
//! read again for the next window past the last name of the one before, so a directory
//! of a million entries costs passes over it, not memory; and a file created or removed
//! during the walk is seen or missed, never seen twice or out of order.

use std::io;
use std::ops::ControlFlow;

use cap_std::fs::Dir;

use super::errors::{io_error, modified};
use super::names::is_reserved_name;
use super::window::{after, Finished, Window};
use super::OsStorage;
use crate::vfs::{validate_path, FileEntry, StorageError};

/// The most bytes of names (and ~8 bytes per name) the walk holds at once, over the
/// directories on the way down: each directory's window takes at most half of what
/// those above it left, so ~230,000 names of 10 bytes side by side fit one window. Past
/// it, a directory is read in several passes: time for memory. The size is that trade:
/// a directory of 10^6 names of 100 bytes takes ~27 passes (~0.8 s each on the bench
/// machine, within the default 30 s call limit; with 2 MiB it took ~110 and timed out),
/// where holding it whole took ~300 MB; a walk holds at most ~2x this while a window
/// fills, so 64 calls in flight stay under 1 GiB even over such a directory. Trees of
/// ordinary width never reach it (the windows grow with what the directories hold).
pub(super) const WALK_BUDGET: usize = 8 * 1024 * 1024;

/// What a file visitor of the walk returns: go on, or stop the walk.
type Flow = Result<ControlFlow<()>, StorageError>;

/// A file the walk found: its directory, its name there and its path from the root.
struct Found<'a> {
    dir: &'a Dir,
    name: &'a str,
    path: String,
}

impl OsStorage {
    /// Calls `visit` with the path of each file in the store, in path order, from the
    /// directory entries alone: no `stat` per file where the file system reports each
    /// entry's type (`d_type`; one `lstat` for an entry whose type it leaves unknown).
    pub(super) fn walk_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        walk_files(&self.root, "", WALK_BUDGET, &mut |found| {
            Ok(visit(found.path))
        })
        .map(|_| ())
    }

    /// Calls `visit` with each file in the store with its size and modification time, in
    /// path order.
    pub(super) fn walk(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        walk_files(&self.root, "", WALK_BUDGET, &mut |found| {
            let md = match found.dir.symlink_metadata(found.name) {
                Ok(md) if md.is_file() => md,
                // Gone, or no longer a file, since the listing.
                Ok(_) => return Ok(ControlFlow::Continue(())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Ok(ControlFlow::Continue(()))
                }
                Err(e) => return Err(io_error(&found.path, e)),
            };
            Ok(visit(FileEntry {
                updated_at: modified(&found.path, &md)?,
                size: md.len(),
                path: found.path,
            }))
        })
        .map(|_| ())
    }
}

/// Calls `on_file` with each regular file under `dir` (its path with `prefix` first), in
/// path order, depth first, until it returns `Break` (which this returns too), holding
/// at most `budget` bytes of names at once (and one name more per directory on the
/// way). Skips what no method could reach (links, temporary files, bad names) and
/// entries gone since the listing.
fn walk_files(
    dir: &Dir,
    prefix: &str,
    budget: usize,
    on_file: &mut dyn FnMut(Found<'_>) -> Flow,
) -> Flow {
    let mut cursor: Option<String> = None;
    loop {
        let window = read_window(dir, prefix, cursor.as_deref(), budget / 2)?;
        let below = budget.saturating_sub(window.bytes());
        for key in window.keys() {
            let path = format!("{prefix}{key}");
            let Some(name) = key.strip_suffix('/') else {
                let found = Found {
                    dir,
                    name: key,
                    path,
                };
                if on_file(found)?.is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                continue;
            };
            match dir.open_dir(name) {
                Ok(sub) => {
                    if walk_files(&sub, &path, below, on_file)?.is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(&path[..path.len() - 1], e)),
            }
        }
        if !window.more {
            return Ok(ControlFlow::Continue(()));
        }
        cursor = window.keys().last().map(str::to_owned);
    }
}

/// The next window of `dir`'s sort keys past `cursor` (all of them without one), at
/// most `budget` bytes: its regular files and directories, without what no method could
/// reach (links, special files, temporary files, bad names).
fn read_window(
    dir: &Dir,
    prefix: &str,
    cursor: Option<&str>,
    budget: usize,
) -> Result<Finished, StorageError> {
    let shown = if prefix.is_empty() { "." } else { prefix };
    let mut window = Window::new(budget);
    // The entry's path, for its checks and errors: `prefix` and the name.
    let mut path = String::from(prefix);
    for entry in dir.entries().map_err(|e| io_error(shown, e))? {
        let entry = entry.map_err(|e| io_error(shown, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        path.truncate(prefix.len());
        path.push_str(name);
        let mut file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&path, e)),
        };
        // Behind the cursor (the windows before this one): skipped before any other
        // check, so the passes over a wide directory cost little per entry.
        if cursor.is_some_and(|cursor| !after(name, file_type.is_dir(), cursor)) {
            continue;
        }
        if is_reserved_name(name) || validate_path("path", &path).is_err() {
            continue;
        }
        if !(file_type.is_dir() || file_type.is_file() || file_type.is_symlink()) {
            // Unknown to the directory entry (or a special file): ask the file.
            file_type = match entry.metadata() {
                Ok(md) => md.file_type(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&path, e)),
            };
        }
        let is_dir = file_type.is_dir();
        if !(is_dir || file_type.is_file()) {
            continue;
        }
        // An entry whose type the directory did not give is compared here, once known.
        if cursor.is_none_or(|cursor| after(name, is_dir, cursor)) {
            window.push(name, is_dir);
        }
    }
    Ok(window.finish())
}

#[cfg(test)]
mod tests;
