//! What [`OsStorage::open`](super::OsStorage::open) cleans up: the temporary files and
//! staging directories of a process that was killed while it wrote or renamed.
//!
//! - A temporary file (`.<name>.tmp-<32 hex digits>`) holds a write that never reached
//!   its rename: the target still has its old content (or never existed), so the
//!   temporary file is removed.
//! - A staging directory (`.stage-<32 hex digits>`) holds a file in the middle of a
//!   case-only rename, under its old name. If no file of that name exists next to the
//!   directory, the file goes back there; otherwise the name was taken again since (by a
//!   later write), the staged copy is outdated, and it is removed (logged as a warning).
//!   Then the empty directory is removed.
//!
//! A writer holds an advisory lock (`flock`) on its temporary file or staging directory
//! until it is done, and the kernel drops it when the process dies: whatever is still
//! locked belongs to a live process (another host on the same root) and is left alone.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;

use super::names::{is_stage_name, is_tmp_name};

/// What [`recover`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Report {
    /// Staged files moved back to their old names (paths from the root).
    pub(super) restored: Vec<String>,
    /// Staged files removed because their name exists again.
    pub(super) superseded: Vec<String>,
    /// Temporary files removed.
    pub(super) temporary: usize,
    /// Temporary files and staging directories left alone because a live process holds
    /// them.
    pub(super) in_use: usize,
    /// Steps that failed, with why.
    pub(super) failed: Vec<String>,
}

impl Report {
    /// Logs what was done, once; nothing when there was nothing to do.
    pub(super) fn log(&self, root: &Path) {
        let root = root.display();
        for path in &self.restored {
            tracing::info!("{root}: \"{path}\" was left in a staging directory by an interrupted rename; moved back to its name");
        }
        for path in &self.superseded {
            tracing::warn!("{root}: an interrupted rename left an older copy of \"{path}\" in a staging directory, but \"{path}\" exists again; removed the older copy");
        }
        if self.temporary > 0 {
            tracing::info!(
                "{root}: removed {} temporary file(s) of interrupted writes",
                self.temporary
            );
        }
        if self.in_use > 0 {
            tracing::info!(
                "{root}: left {} temporary file(s) or staging director(y/ies) alone: another process is using them",
                self.in_use
            );
        }
        for failure in &self.failed {
            tracing::warn!("{root}: recovery step failed: {failure}");
        }
    }
}

/// Walks the tree under `root` and cleans up every temporary file and staging directory
/// not in use. Symbolic links are not followed; unreadable directories are skipped.
pub(super) fn recover(root: &Dir) -> Report {
    let mut report = Report::default();
    walk(root, "", &mut report);
    report
}

pub(super) fn walk(dir: &Dir, prefix: &str, report: &mut Report) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            if is_stage_name(name) {
                restore_stage(dir, prefix, name, report);
            } else if let Ok(sub) = entry.open_dir() {
                walk(&sub, &format!("{prefix}{name}/"), report);
            }
        } else if file_type.is_file() && is_tmp_name(name) {
            remove_temporary(dir, prefix, name, report);
        }
    }
}

/// Whether someone holds the advisory lock on `file`. Where locks are not supported at
/// all, nobody does.
fn in_use(file: &std::fs::File) -> bool {
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

fn remove_temporary(dir: &Dir, prefix: &str, name: &str, report: &mut Report) {
    let file = match dir.open(name) {
        Ok(file) => file.into_std(),
        // Renamed or removed by its writer meanwhile.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => {
            report
                .failed
                .push(format!("cannot open \"{prefix}{name}\": {e}"));
            return;
        }
    };
    if in_use(&file) {
        report.in_use += 1;
        return;
    }
    match dir.remove_file(name) {
        Ok(()) => report.temporary += 1,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => report
            .failed
            .push(format!("cannot remove \"{prefix}{name}\": {e}")),
    }
}

fn restore_stage(dir: &Dir, prefix: &str, name: &str, report: &mut Report) {
    let stage = match dir.open_dir(name) {
        Ok(stage) => stage,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => {
            report
                .failed
                .push(format!("cannot open \"{prefix}{name}\": {e}"));
            return;
        }
    };
    // `Dir` handles are `O_PATH` on Linux, which cannot be locked: lock a plain handle.
    let lock = match dir.open(name) {
        Ok(handle) => handle.into_std(),
        Err(e) => {
            report
                .failed
                .push(format!("cannot open \"{prefix}{name}\": {e}"));
            return;
        }
    };
    if in_use(&lock) {
        report.in_use += 1;
        return;
    }
    let Ok(entries) = stage.entries() else {
        report
            .failed
            .push(format!("cannot read \"{prefix}{name}\""));
        return;
    };
    for entry in entries.flatten() {
        let staged = entry.file_name();
        let Some(staged) = staged.to_str() else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let path = format!("{prefix}{staged}");
        match dir.symlink_metadata(staged) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match stage.rename(staged, dir, staged) {
                    Ok(()) => report.restored.push(path),
                    Err(e) => report.failed.push(format!(
                        "cannot move \"{path}\" back from \"{prefix}{name}\": {e}"
                    )),
                }
            }
            Ok(_) => match stage.remove_file(staged) {
                Ok(()) => report.superseded.push(path),
                Err(e) => report.failed.push(format!(
                    "cannot remove the older copy of \"{path}\" in \"{prefix}{name}\": {e}"
                )),
            },
            Err(e) => report
                .failed
                .push(format!("cannot look up \"{path}\": {e}")),
        }
    }
    drop(lock);
    if let Err(e) = dir.remove_dir(name) {
        report
            .failed
            .push(format!("cannot remove \"{prefix}{name}\": {e}"));
    }
}
