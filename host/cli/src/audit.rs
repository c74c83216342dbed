//! `--audit-log FILE`: one JSON line per tool call and per refusal before a call, for an
//! operator's after-the-fact account (see docs/operations.md for the record's fields).
//!
//! - A call's record is serialized on the call's thread (its time stamped under the
//!   queue's lock, so the times go up with the lines) and handed to a writer thread over
//!   a queue bounded in bytes ([`QUEUE_BYTES`]). The writer gathers records for at most
//!   [`FLUSH_INTERVAL`] after the first one, then appends them with one `write` (two
//!   around a rotation), so a record reaches the OS within that interval of its call's
//!   end (and every queued record is written before the host exits). A call never waits
//!   for the disk: the write, the `lstat` and the thread switch are paid once per batch,
//!   not per call (they were most of a call's observability cost: figure 13).
//! - A full queue (the disk slower than the calls for a while) makes the call that ends
//!   wait for room, up to [`QUEUE_WAIT`]: no record is dropped for lack of room and the
//!   queue's memory stays bounded however fast a client calls. Past that wait the record
//!   counts as lost, as for a write that failed (below).
//! - The file stays open between batches; before each batch the path is looked at (one
//!   `lstat`) and the file opened again when the path no longer names the open file, so
//!   a log rotated or replaced from outside is followed, and a file that became
//!   unwritable is noticed at the next batch.
//! - The path's last component must not be a symbolic link (refused at start and at each
//!   open): whoever can plant a link in the log's directory must not make the host append
//!   to another file.
//! - Rotation by size (`--audit-log-max-bytes`, `--audit-log-keep`): before a record that
//!   would take the file past the size, `FILE` becomes `FILE.1` (`FILE.1` becomes
//!   `FILE.2`, and so on; the oldest past the kept number is removed).
//! - Unwritable (disk full, read-only, removed directory): the records of the batch that
//!   hit it are lost (their calls had run), and every later call is refused before it
//!   runs with a message naming the file, until a record can be written again; the first
//!   record then is an `audit_resumed` one counting the records lost. Calls admitted
//!   before the writer saw the failure (at most [`FLUSH_INTERVAL`] of them) are counted
//!   in it too.
//! - Never written: argument values (only their SHA-256 and size, unless
//!   `--audit-arguments`), error messages (which may echo arguments), configuration
//!   values, bearer tokens.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use toolhost::registry::{CallEnd, ObserverRefusal, ToolError};

use writer::{Queue, Records, Shared, State};

mod writer;

/// `--audit-log-keep`'s default: rotated files kept.
pub(crate) const DEFAULT_KEEP: usize = 5;
/// `--audit-log-keep`'s bound.
pub(crate) const MAX_KEEP: usize = 1000;
/// How long the writer gathers records after the first one before it writes them: a
/// record reaches the OS at most this long (and the time of one write) after its call
/// ended.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(10);
/// The records waiting for the writer (and being written) take at most this many bytes
/// (16 MiB, each record counted with [`RECORD_OVERHEAD`]); a call whose record does not
/// fit waits for room. A single larger record (long arguments with `--audit-arguments`)
/// waits until the queue is empty.
pub(crate) const QUEUE_BYTES: usize = 16 << 20;
/// How long a call waits for room in a full queue before its record counts as lost and
/// calls are refused (the disk stalled).
pub(crate) const QUEUE_WAIT: Duration = Duration::from_secs(5);
/// What a queued record costs beyond its text, counted against [`QUEUE_BYTES`].
const RECORD_OVERHEAD: usize = 64;

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
    /// The writer thread cannot be started.
    #[error("--audit-log {path}: cannot start its writer thread ({source})")]
    Thread {
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
    shared: Arc<Shared>,
    arguments: bool,
    /// Each plugin tool's `plugin` field, as JSON (serialized once, at load).
    plugins: RwLock<HashMap<String, Box<RawValue>>>,
    /// Joined at drop, after it wrote what was queued.
    writer: Option<std::thread::JoinHandle<()>>,
}

/// One line of the log, without its time (put first by the writer). Written by its
/// [`writer::Line`] implementation, by hand; its `Serialize` (serde's derive) is the
/// reference the tests check that line against.
#[derive(Serialize)]
struct Record<'a> {
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
    plugin: Option<&'a RawValue>,
    arguments_sha256: &'a str,
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
    /// Paths the call read, as its tool named them (distinct, at most 64, each cut to
    /// 256 bytes).
    #[serde(skip_serializing_if = "is_empty")]
    files_read: &'a [String],
    /// Paths it wrote or deleted.
    #[serde(skip_serializing_if = "is_empty")]
    files_written: &'a [String],
    /// File calls whose path did not fit the 64 of its list.
    #[serde(skip_serializing_if = "is_zero")]
    files_truncated: u32,
    /// `host:port`s its plugin's HTTP requests went to (distinct, at most 64).
    #[serde(skip_serializing_if = "is_empty")]
    hosts: &'a [String],
    /// Requests whose host did not fit the 64.
    #[serde(skip_serializing_if = "is_zero")]
    hosts_truncated: u32,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    clippy::ref_option_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_empty(list: &&[String]) -> bool {
    list.is_empty()
}

/// The line written when records can be written again.
#[derive(Serialize)]
struct Resumed<'a> {
    event: &'static str,
    lost: u64,
    reason: &'a str,
}

impl AuditLog {
    /// Opens (creates) `path` for appending, to check it can be written, and starts the
    /// writer thread.
    ///
    /// # Errors
    /// [`AuditError`] when it is a symbolic link or cannot be opened, or the thread
    /// cannot be started.
    pub(crate) fn open(
        path: &Path,
        max_bytes: Option<u64>,
        keep: usize,
        arguments: bool,
    ) -> Result<Self, AuditError> {
        Self::open_with(path, max_bytes, keep, arguments, QUEUE_BYTES, QUEUE_WAIT)
    }

    /// [`AuditLog::open`] with the queue's bound and wait given.
    fn open_with(
        path: &Path,
        max_bytes: Option<u64>,
        keep: usize,
        arguments: bool,
        queue_bytes: usize,
        queue_wait: Duration,
    ) -> Result<Self, AuditError> {
        open_append(path)?;
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            max_bytes,
            keep: keep.clamp(1, MAX_KEEP),
            queue_bytes,
            queue_wait,
            failed: AtomicBool::new(false),
            lost: AtomicU64::new(0),
            reason: Mutex::new(String::new()),
            file: Mutex::new(State::default()),
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            room: Condvar::new(),
            #[cfg(test)]
            stall: Mutex::new(()),
        });
        let writer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("audit-writer".to_owned())
                .spawn(move || shared.run())
                .map_err(|source| AuditError::Thread {
                    path: path.to_owned(),
                    source,
                })?
        };
        Ok(Self {
            shared,
            arguments,
            plugins: RwLock::new(HashMap::new()),
            writer: Some(writer),
        })
    }

    /// Records that `tool` comes from `plugin`.
    pub(crate) fn set_plugin(&self, tool: &str, plugin: PluginRef) {
        let Ok(json) = serde_json::value::to_raw_value(&plugin) else {
            return;
        };
        if let Ok(mut plugins) = self.plugins.write() {
            plugins.insert(tool.to_owned(), json);
        }
    }

    /// Before a call: refused while records cannot be written; when they were not, tries
    /// again (writing the `audit_resumed` record).
    ///
    /// # Errors
    /// The refusal, naming the file and what to do.
    pub(crate) fn admit(&self) -> Result<(), ObserverRefusal> {
        let shared = &*self.shared;
        if !shared.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        // The writer busy (a stalled disk): refused at once rather than wait for it.
        let mut state = match shared.file.try_lock() {
            Ok(state) => state,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(self.refusal(&shared.reason()));
            }
        };
        if !shared.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        let lost = shared.lost.load(Ordering::Acquire);
        let mut resumed = Records::default();
        resumed.write(&Resumed {
            event: "audit_resumed",
            lost,
            reason: &shared.reason(),
        });
        resumed.commit(SystemTime::now());
        match shared.write_records(&mut state, &resumed) {
            Ok(()) => {
                shared.lost.fetch_sub(lost, Ordering::AcqRel);
                shared.failed.store(false, Ordering::Release);
                // Records lost meanwhile (a full queue) are told by the next resumed line.
                if shared.lost.load(Ordering::Acquire) > 0 {
                    shared.failed.store(true, Ordering::Release);
                }
                Ok(())
            }
            Err((reason, _)) => {
                let refusal = self.refusal(&reason);
                *shared.lock_reason() = reason;
                Err(refusal)
            }
        }
    }

    fn refusal(&self, reason: &str) -> ObserverRefusal {
        ObserverRefusal {
            message: format!(
                "refused: the audit log {} cannot be written ({reason}), and no call runs unaudited; the operator must make it writable (free disk space, fix its permissions), then calls run again",
                self.shared.path.display()
            ),
        }
    }

    /// After a call: queues its record (naming `principal`, the session's client, when
    /// known) for the writer; waits only when the queue is full.
    pub(crate) fn finished(&self, end: &CallEnd<'_>, principal: Option<&str>) {
        let plugins = self.plugins.read().ok();
        let touched = end.record.map(toolhost::registry::CallRecord::touched);
        let plugin = plugins
            .as_ref()
            .and_then(|plugins| plugins.get(&end.call.name))
            .map(AsRef::as_ref);
        let mut digest = [0u8; 71];
        let record = call_record(
            end,
            principal,
            plugin,
            touched.as_deref(),
            self.arguments,
            &mut digest,
        );
        self.shared.push(&record);
    }

    /// Waits up to `limit` for the records queued so far to be written (or counted
    /// lost); `false` when they were not in time.
    pub(crate) fn flush(&self, limit: Duration) -> bool {
        self.shared.flush(limit)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.shared.lock_queue().closed = true;
        self.shared.work.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The record of the call that ended (`digest`: room for its arguments' SHA-256 text).
/// The SHA-256 is computed here, once, over the arguments' text as the call got it.
fn call_record<'a>(
    end: &'a CallEnd<'a>,
    principal: Option<&'a str>,
    plugin: Option<&'a RawValue>,
    touched: Option<&'a toolhost::registry::Touched>,
    arguments: bool,
    digest: &'a mut [u8; 71],
) -> Record<'a> {
    let bytes = end.call.arguments.as_bytes();
    let arguments_sha256 = sha256_text(&Sha256::digest(bytes), digest);
    let error = end.outcome.err();
    let none: &[String] = &[];
    Record {
        event: "call",
        session: &end.env.session_id,
        principal,
        turn: &end.env.turn_id,
        request: &end.call.id,
        tool: &end.call.name,
        nested_in: end.nested_in,
        plugin,
        arguments_sha256,
        arguments_bytes: bytes.len(),
        arguments: arguments.then_some(end.call.arguments.as_str()),
        outcome: end.outcome_class(),
        ran: end.ran,
        error_kind: error.map(ToolError::kind),
        limit: match error {
            Some(ToolError::LimitExceeded { limit, .. }) => Some(limit.to_string()),
            _ => None,
        },
        duration_ms: end.duration.as_secs_f64() * 1e3,
        bytes_out: end.bytes_out,
        files_read: touched.map_or(none, |t| t.files_read.as_slice()),
        files_written: touched.map_or(none, |t| t.files_written.as_slice()),
        files_truncated: touched.map_or(0, |t| t.files_truncated),
        hosts: touched.map_or(none, |t| t.hosts.as_slice()),
        hosts_truncated: touched.map_or(0, |t| t.hosts_truncated),
    }
}

impl writer::Line for Record<'_> {
    /// The record's JSON object, field by field in the order of its declaration (the
    /// order serde's derive writes, which the tests check it against): the fields of a
    /// fixed form (the event and outcome names, the digest, numbers, the plugin's JSON
    /// made at load) copied as they are, the others (ids, names, paths, hosts, the
    /// arguments) through [`json_str`], which escapes exactly as serde_json does.
    fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"event\":\"");
        out.extend_from_slice(self.event.as_bytes());
        out.extend_from_slice(b"\",\"session\":");
        json_str(out, self.session);
        if let Some(principal) = self.principal {
            out.extend_from_slice(b",\"principal\":");
            json_str(out, principal);
        }
        out.extend_from_slice(b",\"turn\":");
        json_str(out, self.turn);
        out.extend_from_slice(b",\"request\":");
        json_str(out, self.request);
        out.extend_from_slice(b",\"tool\":");
        json_str(out, self.tool);
        if let Some(nested_in) = self.nested_in {
            out.extend_from_slice(b",\"nested_in\":");
            json_str(out, nested_in);
        }
        if let Some(plugin) = self.plugin {
            out.extend_from_slice(b",\"plugin\":");
            out.extend_from_slice(plugin.get().as_bytes());
        }
        out.extend_from_slice(b",\"arguments_sha256\":\"");
        out.extend_from_slice(self.arguments_sha256.as_bytes());
        out.extend_from_slice(b"\",\"arguments_bytes\":");
        json_u64(out, self.arguments_bytes as u64);
        if let Some(arguments) = self.arguments {
            out.extend_from_slice(b",\"arguments\":");
            json_str(out, arguments);
        }
        out.extend_from_slice(b",\"outcome\":\"");
        out.extend_from_slice(self.outcome.as_bytes());
        out.extend_from_slice(if self.ran {
            b"\",\"ran\":true"
        } else {
            b"\",\"ran\":false"
        });
        if let Some(kind) = self.error_kind {
            out.extend_from_slice(b",\"error_kind\":\"");
            out.extend_from_slice(kind.as_bytes());
            out.push(b'"');
        }
        if let Some(limit) = &self.limit {
            out.extend_from_slice(b",\"limit\":");
            json_str(out, limit);
        }
        out.extend_from_slice(b",\"duration_ms\":");
        // serde_json's own number text (ryu; `null` when not finite).
        if serde_json::to_writer(&mut *out, &self.duration_ms).is_err() {
            out.extend_from_slice(b"null");
        }
        out.extend_from_slice(b",\"bytes_out\":");
        json_u64(out, self.bytes_out as u64);
        json_list(out, b",\"files_read\":", self.files_read);
        json_list(out, b",\"files_written\":", self.files_written);
        if self.files_truncated != 0 {
            out.extend_from_slice(b",\"files_truncated\":");
            json_u64(out, u64::from(self.files_truncated));
        }
        json_list(out, b",\"hosts\":", self.hosts);
        if self.hosts_truncated != 0 {
            out.extend_from_slice(b",\"hosts_truncated\":");
            json_u64(out, u64::from(self.hosts_truncated));
        }
        out.push(b'}');
    }
}

impl writer::Line for Resumed<'_> {
    fn write_line(&self, out: &mut Vec<u8>) {
        if serde_json::to_writer(&mut *out, self).is_err() {
            out.extend_from_slice(b"{}");
        }
    }
}

/// `text` as a JSON string, escaped exactly as serde_json escapes it (`"`, `\` and the
/// control characters below U+0020; everything else, U+2028 included, as it is): text
/// with nothing to escape (the common case: ids, names, paths) is copied in one piece,
/// the rest goes through serde_json.
fn json_str(out: &mut Vec<u8>, text: &str) {
    if !needs_escape(text.as_bytes()) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, text).is_err() {
        // Writing to a Vec does not fail; were it to, the field stays valid JSON.
        out.extend_from_slice(b"\"\"");
    }
}

/// Whether `bytes` hold a byte serde_json escapes: one below 0x20, `"` or `\`. Eight
/// bytes at a time (the usual bit tricks: a byte below `n` sets its high bit in
/// `(x - n * 0x01..01) & !x & 0x80..80`, and only such a byte does), the rest one by one.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let found = below(x, 0x20)
            | below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1);
        if found != 0 {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// `key` then `list` as a JSON array of strings, when `list` is not empty.
fn json_list(out: &mut Vec<u8>, key: &[u8], list: &[String]) {
    if list.is_empty() {
        return;
    }
    out.extend_from_slice(key);
    out.push(b'[');
    for (i, item) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, item);
    }
    out.push(b']');
}

/// `n` in decimal.
fn json_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        #[allow(clippy::cast_possible_truncation, reason = "a digit, below 10")]
        {
            digits[at] = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(at..).unwrap_or_default());
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

/// `sha256:` and the hex of `digest`, written into `out`.
fn sha256_text<'a>(digest: &[u8], out: &'a mut [u8; 71]) -> &'a str {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out[..7].copy_from_slice(b"sha256:");
    for (pair, byte) in out[7..].chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 15)];
    }
    std::str::from_utf8(out).unwrap_or_default()
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

#[cfg(test)]
mod tests;
