//! `--audit-log FILE`: one JSON line per tool call and per refusal before a call, for an
//! operator's after-the-fact account (see docs/operations.md for the record's fields).
//!
//! - Written in the order calls end, under one lock; each record is one `write` of one
//!   line to a file opened for appending (flushed to the OS per record; not fsynced).
//! - The file stays open between records; before each one the path is looked at (one
//!   `lstat`) and the file opened again when the path no longer names the open file, so
//!   a log rotated or replaced from outside is followed, and a file that became
//!   unwritable is noticed at the next record. (Opening it for every record cost more
//!   than the rest of the record: figure 13.)
//! - The path's last component must not be a symbolic link (refused at start and at each
//!   open): whoever can plant a link in the log's directory must not make the host append
//!   to another file.
//! - Rotation by size (`--audit-log-max-bytes`, `--audit-log-keep`): before a record that
//!   would take the file past the size, `FILE` becomes `FILE.1` (`FILE.1` becomes
//!   `FILE.2`, and so on; the oldest past the kept number is removed).
//! - Unwritable (disk full, read-only, removed directory): the record of the call that
//!   hit it is lost (the call had run), and every later call is refused before it runs
//!   with a message naming the file, until a record can be written again; the first
//!   record then is an `audit_resumed` one counting the records lost.
//! - Never written: argument values (only their SHA-256 and size, unless
//!   `--audit-arguments`), error messages (which may echo arguments), configuration
//!   values, bearer tokens.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::SystemTime;

use serde::Serialize;
use sha2::{Digest, Sha256};
use tracing::error;

use toolhost::registry::{CallEnd, ObserverRefusal, ToolError};

/// `--audit-log-keep`'s default: rotated files kept.
pub(crate) const DEFAULT_KEEP: usize = 5;
/// `--audit-log-keep`'s bound.
pub(crate) const MAX_KEEP: usize = 1000;

/// Why the audit log cannot be opened at start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuditError {
    /// The path's last component is a symbolic link.
    #[error("--audit-log {path}: is a symbolic link; give the path of the file itself (a link could make the host append its records to another file)")]
    Symlink {
        /// The path.
        path: PathBuf,
    },
    /// The file is where the tools reach (a model could read, truncate or forge it).
    #[error("--audit-log {path} is inside {root}, where the file tools (and plugins granted files) reach: a model could read or rewrite the audit log; put it outside, e.g. under /var/log")]
    InsideRoot {
        /// The audit file, resolved.
        path: PathBuf,
        /// The root it is inside.
        root: PathBuf,
    },
    /// The file cannot be opened for appending.

    #[error("--audit-log {path}: cannot open it for appending ({source}); give a writable file path whose directory exists")]
    Open {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The plugin a tool comes from, as recorded: its file and the file's SHA-256 at load.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct PluginRef {
    /// The `.wasm` file.
    pub(crate) file: String,
    /// `sha256:` and 64 hex digits.
    pub(crate) sha256: String,
}

/// The `--audit-log` file sink.
#[derive(Debug)]
pub(crate) struct AuditLog {
    path: PathBuf,
    /// Rotate before a record would take the file past this size; `None`: never.
    max_bytes: Option<u64>,
    keep: usize,
    arguments: bool,
    /// Set while records cannot be written: calls are refused.
    failed: AtomicBool,
    /// Taken to write (the order of records) and to rotate.
    state: Mutex<State>,
    plugins: RwLock<HashMap<String, PluginRef>>,
}

#[derive(Debug, Default)]
struct State {
    /// Records that could not be written since the last one that could.
    lost: u64,
    /// Why the last write failed.
    reason: String,
    /// The file as last opened, with its device and inode and its size as written since.
    open: Option<OpenLog>,
}

/// The audit file, open for appending.
#[derive(Debug)]
struct OpenLog {
    file: File,
    dev: u64,
    ino: u64,
    size: u64,
}

/// One line of the log.
#[derive(Serialize)]
struct Record<'a> {
    time: String,
    event: &'static str,
    session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    principal: Option<&'a str>,
    turn: &'a str,
    request: &'a str,
    tool: &'a str,
    /// The composing tool (a code tool) that made this call, for a nested call.
    #[serde(skip_serializing_if = "Option::is_none")]
    nested_in: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<PluginRef>,
    arguments_sha256: String,
    arguments_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
    outcome: &'static str,
    ran: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<String>,
    duration_ms: f64,
    bytes_out: usize,
}

/// The line written when records can be written again.
#[derive(Serialize)]
struct Resumed {
    time: String,
    event: &'static str,
    lost: u64,
    reason: String,
}

impl AuditLog {
    /// Opens (creates) `path` for appending, to check it can be written.
    ///
    /// # Errors
    /// [`AuditError`] when it is a symbolic link or cannot be opened.
    pub(crate) fn open(
        path: &Path,
        max_bytes: Option<u64>,
        keep: usize,
        arguments: bool,
    ) -> Result<Self, AuditError> {
        open_append(path)?;
        Ok(Self {
            path: path.to_owned(),
            max_bytes,
            keep: keep.clamp(1, MAX_KEEP),
            arguments,
            failed: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            plugins: RwLock::new(HashMap::new()),
        })
    }

    /// Records that `tool` comes from `plugin`.
    pub(crate) fn set_plugin(&self, tool: &str, plugin: PluginRef) {
        if let Ok(mut plugins) = self.plugins.write() {
            plugins.insert(tool.to_owned(), plugin);
        }
    }

    /// Before a call: refused while records cannot be written; when they were not, tries
    /// again (writing the `audit_resumed` record).
    ///
    /// # Errors
    /// The refusal, naming the file and what to do.
    pub(crate) fn admit(&self) -> Result<(), ObserverRefusal> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.lock();
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let line = line_of(&Resumed {
            time: now_rfc3339(),
            event: "audit_resumed",
            lost: state.lost,
            reason: state.reason.clone(),
        });
        match self.write_line(&mut state, &line) {
            Ok(()) => {
                state.lost = 0;
                state.reason.clear();
                self.failed.store(false, Ordering::Release);
                Ok(())
            }
            Err(err) => {
                state.reason = err;
                Err(self.refusal(&state.reason))
            }
        }
    }

    fn refusal(&self, reason: &str) -> ObserverRefusal {
        ObserverRefusal {
            message: format!(
                "refused: the audit log {} cannot be written ({reason}), and no call runs unaudited; the operator must make it writable (free disk space, fix its permissions), then calls run again",
                self.path.display()
            ),
        }
    }

    /// After a call: writes its record (naming `principal`, the session's client, when
    /// known).
    pub(crate) fn finished(&self, end: &CallEnd<'_>, principal: Option<&str>) {
        let arguments = end.call.arguments.as_bytes();
        let plugin = self
            .plugins
            .read()
            .ok()
            .and_then(|plugins| plugins.get(&end.call.name).cloned());
        let error = end.outcome.err();
        let mut record = Record {
            time: String::new(),
            event: "call",
            session: &end.env.session_id,
            principal,
            turn: &end.env.turn_id,
            request: &end.call.id,
            tool: &end.call.name,
            nested_in: end.nested_in,
            plugin,
            arguments_sha256: format!("sha256:{}", hex(&Sha256::digest(arguments))),
            arguments_bytes: arguments.len(),
            arguments: self.arguments.then_some(end.call.arguments.as_str()),
            outcome: end.outcome_class(),
            ran: end.ran,
            error_kind: error.map(ToolError::kind),
            limit: match error {
                Some(ToolError::LimitExceeded { limit, .. }) => Some(limit.to_string()),
                _ => None,
            },
            duration_ms: end.duration.as_secs_f64() * 1e3,
            bytes_out: end.bytes_out,
        };
        let mut state = self.lock();
        if self.failed.load(Ordering::Acquire) {
            state.lost += 1;
            return;
        }
        // Stamped under the lock: the times go up with the lines.
        record.time = now_rfc3339();
        let line = line_of(&record);
        if let Err(reason) = self.write_line(&mut state, &line) {
            error!(path = %self.path.display(), tool = %end.call.name, session = %end.env.session_id, "cannot write the audit log ({reason}): this call's record is lost, and calls are refused until it can be written");
            state.lost += 1;
            state.reason = reason;
            self.failed.store(true, Ordering::Release);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `line` (the lock held), rotating first when it would pass the size.
    fn write_line(&self, state: &mut State, line: &[u8]) -> Result<(), String> {
        let result = self.append(state, line);
        if result.is_err() {
            // Opened again (and checked again) at the next record.
            state.open = None;
        }
        result
    }

    fn append(&self, state: &mut State, line: &[u8]) -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        // The path still names the open file: not rotated, replaced or removed outside.
        let current = std::fs::symlink_metadata(&self.path).ok();
        let same = match (&state.open, &current) {
            (Some(open), Some(meta)) => {
                meta.file_type().is_file() && meta.dev() == open.dev && meta.ino() == open.ino
            }
            _ => false,
        };
        if !same {
            state.open = Some(self.open_log()?);
        }
        if let (Some(max), Some(open)) = (self.max_bytes, &state.open) {
            if open.size > 0 && open.size.saturating_add(line.len() as u64) > max {
                state.open = None;
                self.rotate()
                    .map_err(|err| format!("cannot rotate: {err}"))?;
                state.open = Some(self.open_log()?);
            }
        }
        let open = state
            .open
            .as_mut()
            .ok_or_else(|| "the audit log is not open".to_owned())?;
        open.file.write_all(line).map_err(|err| err.to_string())?;
        open.size = open.size.saturating_add(line.len() as u64);
        Ok(())
    }

    /// Opens the file (never through a symbolic link) and notes what it is.
    fn open_log(&self) -> Result<OpenLog, String> {
        use std::os::unix::fs::MetadataExt;
        let file = open_append(&self.path).map_err(|err| match err {
            AuditError::Symlink { .. } => "it is a symbolic link".to_owned(),
            AuditError::Open { source, .. } => source.to_string(),
            other => other.to_string(),
        })?;
        let meta = file.metadata().map_err(|err| err.to_string())?;
        if !meta.file_type().is_file() {
            return Err("it is not a regular file".to_owned());
        }
        Ok(OpenLog {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            file,
        })
    }

    /// `FILE.(keep-1)` to `FILE.keep`, ..., `FILE` to `FILE.1`.
    fn rotate(&self) -> std::io::Result<()> {
        let numbered = |n: usize| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        };
        for n in (1..self.keep).rev() {
            match std::fs::rename(numbered(n), numbered(n + 1)) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(1))
    }
}

/// Refuses an audit file inside one of `roots` (the directories the file tools reach),
/// before it is created: its directory resolved (links followed), then its name; a path
/// that does not exist yet is compared as given, made absolute.
///
/// # Errors
/// [`AuditError::InsideRoot`].
pub(crate) fn check_outside(path: &Path, roots: &[PathBuf]) -> Result<(), AuditError> {
    let resolve = |path: &Path| {
        std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_owned())
    };
    let file = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => resolve(parent).join(name),
        (_, Some(name)) => resolve(Path::new(".")).join(name),
        _ => resolve(path),
    };
    for root in roots {
        let root = resolve(root);
        if file.starts_with(&root) {
            return Err(AuditError::InsideRoot { path: file, root });
        }
    }
    Ok(())
}

/// Opens `path` for appending, creating it (mode 0600), never through a symbolic link.
fn open_append(path: &Path) -> Result<File, AuditError> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|source| {
            // O_NOFOLLOW on a link: ELOOP.
            if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                AuditError::Symlink {
                    path: path.to_owned(),
                }
            } else {
                AuditError::Open {
                    path: path.to_owned(),
                    source,
                }
            }
        })
}

/// `value` as one JSON line (serde_json escapes control characters, so a name or
/// argument holding a newline stays on its line).
fn line_of(value: &impl Serialize) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_default();
    line.push(b'\n');
    line
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut text, b| {
        let _ = write!(text, "{b:02x}");
        text
    })
}

/// The SHA-256 of a file, `sha256:` and hex.
pub(crate) fn file_sha256(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(format!("sha256:{}", hex(&Sha256::digest(&bytes))))
}

/// Now in UTC, RFC 3339 with milliseconds (`2026-12-04T19:50:26.123Z`).
pub(crate) fn now_rfc3339() -> String {
    toolhost::registry::format_utc_time(SystemTime::now())
}

#[cfg(test)]
mod tests;
