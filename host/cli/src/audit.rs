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
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use tracing::error;

use toolhost::registry::{CallEnd, ObserverRefusal, ToolError};

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

/// What the calls and the writer thread share.
#[derive(Debug)]
struct Shared {
    path: PathBuf,
    /// Rotate before a record would take the file past this size; `None`: never.
    max_bytes: Option<u64>,
    keep: usize,
    /// [`QUEUE_BYTES`] (smaller in tests).
    queue_bytes: usize,
    /// [`QUEUE_WAIT`] (shorter in tests).
    queue_wait: Duration,
    /// Set while records cannot be written: calls are refused.
    failed: AtomicBool,
    /// Records that could not be written since the last one that could.
    lost: AtomicU64,
    /// Why the last write failed.
    reason: Mutex<String>,
    /// Taken to write (by the writer, and by a call writing `audit_resumed`) and rotate.
    file: Mutex<State>,
    queue: Mutex<Queue>,
    /// The writer waits on it for records.
    work: Condvar,
    /// Calls wait on it for room, and flushes for their records to be written.
    room: Condvar,
    /// Tests: the writer takes it (after the file's lock) before each batch, so a test
    /// holding it stalls the disk.
    #[cfg(test)]
    stall: Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    /// The text of the last batch (its buffer reused by the next).
    text: Vec<u8>,
    /// The last second a record's time was formatted in, and its text up to the
    /// milliseconds (`2026-12-04T19:50:26.`): records of the same second reuse it.
    second: Option<(u64, String)>,
    /// The file as last opened, with its device and inode and its size as written since.
    open: Option<OpenLog>,
}

/// The records between the calls and the writer.
#[derive(Debug, Default)]
struct Queue {
    /// The queued records, back to back: serialized straight into it by the calls, taken
    /// whole by the writer (the two buffers swapped: no allocation per record).
    records: Records,
    /// The bytes of the queued records and of the batch being written.
    bytes: usize,
    /// Records queued since start.
    pushed: u64,
    /// Records written or counted lost since start.
    done: u64,
    /// The writer waits for a first record (a call wakes it; otherwise none does).
    idle: bool,
    /// Write now, without gathering (a flush, a queue half full).
    hurry: bool,
    /// The log is dropped: write what is queued and stop.
    closed: bool,
}

/// Records waiting for the writer: each one's JSON object without its time
/// (`{"event":...}` and a newline), back to back, with its time and where it ends.
#[derive(Debug, Default)]
struct Records {
    text: Vec<u8>,
    ends: Vec<(SystemTime, usize)>,
}

impl Records {
    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// Each record's time and text.
    fn iter(&self) -> impl Iterator<Item = (SystemTime, &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(time, end)| {
            let rest = self.text.get(start..end).unwrap_or_default();
            start = end;
            (time, rest)
        })
    }

    /// Serializes `value` as the next record's text (not yet counted: see
    /// [`Records::commit`]); its size in bytes.
    fn write(&mut self, value: &impl Serialize) -> usize {
        let start = self.text.len();
        if serde_json::to_writer(&mut self.text, value).is_err() {
            self.text.truncate(start);
            self.text.extend_from_slice(b"{}");
        }
        self.text.push(b'\n');
        self.text.len() - start
    }

    /// The record written last, stamped `time`.
    fn commit(&mut self, time: SystemTime) {
        self.ends.push((time, self.text.len()));
    }

    /// Forgets the record written last and not committed.
    fn undo(&mut self) {
        let end = self.ends.last().map_or(0, |&(_, end)| end);
        self.text.truncate(end);
    }
}

/// The audit file, open for appending.
#[derive(Debug)]
struct OpenLog {
    file: File,
    dev: u64,
    ino: u64,
    size: u64,
}

/// One line of the log, without its time (put first by the writer).
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
        let arguments = end.call.arguments.as_bytes();
        let mut digest = [0u8; 71];
        let arguments_sha256 = sha256_text(&Sha256::digest(arguments), &mut digest);
        let error = end.outcome.err();
        let plugins = self.plugins.read().ok();
        let touched = end.record.map(toolhost::registry::CallRecord::touched);
        let none: &[String] = &[];
        let record = Record {
            event: "call",
            session: &end.env.session_id,
            principal,
            turn: &end.env.turn_id,
            request: &end.call.id,
            tool: &end.call.name,
            nested_in: end.nested_in,
            plugin: plugins
                .as_ref()
                .and_then(|plugins| plugins.get(&end.call.name))
                .map(AsRef::as_ref),
            arguments_sha256,
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
            files_read: touched.as_ref().map_or(none, |t| t.files_read.as_slice()),
            files_written: touched
                .as_ref()
                .map_or(none, |t| t.files_written.as_slice()),
            files_truncated: touched.as_ref().map_or(0, |t| t.files_truncated),
            hosts: touched.as_ref().map_or(none, |t| t.hosts.as_slice()),
            hosts_truncated: touched.as_ref().map_or(0, |t| t.hosts_truncated),
        };
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

impl Shared {
    fn lock_file(&self) -> MutexGuard<'_, State> {
        self.file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_reason(&self) -> MutexGuard<'_, String> {
        self.reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn reason(&self) -> String {
        self.lock_reason().clone()
    }

    fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `record`, stamped now; waits for room up to [`Shared::queue_wait`], past
    /// which the record counts as lost and calls are refused.
    fn push(&self, record: &impl Serialize) {
        let mut queue = self.lock_queue();
        let mut until = None;
        loop {
            let size = queue.records.write(record) + RECORD_OVERHEAD;
            if queue.bytes == 0 || queue.bytes + size <= self.queue_bytes {
                // Stamped under the lock: the times go up with the lines.
                queue.records.commit(SystemTime::now());
                queue.bytes += size;
                queue.pushed += 1;
                break;
            }
            // No room: wait for the writer (woken now), then write it again.
            queue.records.undo();
            queue.hurry = true;
            self.work.notify_one();
            let until = *until.get_or_insert_with(|| Instant::now() + self.queue_wait);
            let now = Instant::now();
            if now >= until {
                drop(queue);
                self.lose(
                    1,
                    format!(
                        "its writer could not take a record for {} s: the disk is slower than the calls",
                        self.queue_wait.as_secs_f64()
                    ),
                );
                return;
            }
            queue = self
                .room
                .wait_timeout(queue, until - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        let half = queue.bytes > self.queue_bytes / 2;
        if half && !queue.hurry {
            queue.hurry = true;
            queue.idle = false;
            self.work.notify_one();
        } else if queue.idle {
            queue.idle = false;
            self.work.notify_one();
        }
    }

    /// Counts `count` records as lost for `reason`, and refuses calls until a record can
    /// be written.
    fn lose(&self, count: u64, reason: String) {
        self.lost.fetch_add(count, Ordering::AcqRel);
        let first = !self.failed.load(Ordering::Acquire);
        if first {
            error!(path = %self.path.display(), "cannot write the audit log ({reason}): {count} record(s) lost, and calls are refused until it can be written");
        }
        *self.lock_reason() = reason;
        self.failed.store(true, Ordering::Release);
    }

    fn flush(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        let mut queue = self.lock_queue();
        let target = queue.pushed;
        if queue.done >= target {
            return true;
        }
        queue.hurry = true;
        queue.idle = false;
        self.work.notify_one();
        while queue.done < target {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            queue = self
                .room
                .wait_timeout(queue, until - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }

    /// The writer thread: waits for a first record, gathers for [`FLUSH_INTERVAL`]
    /// (unless hurried), writes the batch; at close, writes what is left and returns.
    fn run(&self) {
        let mut batch = Records::default();
        let mut queue = self.lock_queue();
        loop {
            while queue.records.is_empty() && !queue.closed {
                queue.idle = true;
                queue = self
                    .work
                    .wait(queue)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            queue.idle = false;
            if queue.records.is_empty() {
                return;
            }
            let until = Instant::now() + FLUSH_INTERVAL;
            while !queue.hurry && !queue.closed {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                queue = self
                    .work
                    .wait_timeout(queue, until - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            queue.hurry = false;
            std::mem::swap(&mut batch, &mut queue.records);
            let end = queue.pushed;
            drop(queue);
            let bytes = batch.text.len() + batch.len() * RECORD_OVERHEAD;
            self.write_batch(&batch);
            batch.clear();
            queue = self.lock_queue();
            queue.bytes = queue.bytes.saturating_sub(bytes);
            queue.done = end;
            self.room.notify_all();
        }
    }

    /// Writes `batch`; while records cannot be written, counts them lost instead.
    fn write_batch(&self, batch: &Records) {
        let mut state = self.lock_file();
        #[cfg(test)]
        let _stalled = self
            .stall
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.failed.load(Ordering::Acquire) {
            self.lost.fetch_add(batch.len() as u64, Ordering::AcqRel);
            return;
        }
        if let Err((reason, unwritten)) = self.write_records(&mut state, batch) {
            self.lose(unwritten, reason);
        }
    }

    /// Appends `records` (the file's lock held), rotating before one that would pass the
    /// size; `Err` says why, and how many records were not written.
    fn write_records(&self, state: &mut State, records: &Records) -> Result<(), (String, u64)> {
        let result = self.append(state, records);
        if result.is_err() {
            // Opened again (and checked again) at the next batch.
            state.open = None;
        }
        result
    }

    fn append(&self, state: &mut State, records: &Records) -> Result<(), (String, u64)> {
        use std::os::unix::fs::MetadataExt;
        let all = records.len() as u64;
        // The path still names the open file: not rotated, replaced or removed outside.
        let current = std::fs::symlink_metadata(&self.path).ok();
        let same = match (&state.open, &current) {
            (Some(open), Some(meta)) => {
                meta.file_type().is_file() && meta.dev() == open.dev && meta.ino() == open.ino
            }
            _ => false,
        };
        if !same {
            state.open = Some(self.open_log().map_err(|why| (why, all))?);
        }
        let mut text = std::mem::take(&mut state.text);
        text.clear();
        let result = self.append_into(state, records, &mut text, all);
        state.text = text;
        result
    }

    /// [`Shared::append`] with the text to write built in `text`.
    fn append_into(
        &self,
        state: &mut State,
        records: &Records,
        text: &mut Vec<u8>,
        all: u64,
    ) -> Result<(), (String, u64)> {
        // Records in `text`, and records written before it.
        let (mut pending, mut written) = (0u64, 0u64);
        for (time, rest) in records.iter() {
            let start = text.len();
            text.extend_from_slice(b"{\"time\":\"");
            time_text(&mut state.second, time, text);
            text.extend_from_slice(b"\",");
            text.extend_from_slice(rest.get(1..).unwrap_or_default());
            let size = state.open.as_ref().map_or(0, |open| open.size);
            if let Some(max) = self.max_bytes {
                let before = size + start as u64;
                if before > 0 && before + (text.len() - start) as u64 > max {
                    // This record goes into a new file: the ones before it first.
                    let line = text.split_off(start);
                    Self::write_text(state, text).map_err(|why| (why, all - written))?;
                    written += pending;
                    pending = 0;
                    *text = line;
                    state.open = None;
                    self.rotate()
                        .map_err(|err| (format!("cannot rotate: {err}"), all - written))?;
                    state.open = Some(self.open_log().map_err(|why| (why, all - written))?);
                }
            }
            pending += 1;
        }
        Self::write_text(state, text).map_err(|why| (why, all - written))
    }

    /// One `write` of `text` to the open file.
    fn write_text(state: &mut State, text: &[u8]) -> Result<(), String> {
        if text.is_empty() {
            return Ok(());
        }
        let open = state
            .open
            .as_mut()
            .ok_or_else(|| "the audit log is not open".to_owned())?;
        open.file.write_all(text).map_err(|err| err.to_string())?;
        open.size = open.size.saturating_add(text.len() as u64);
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

/// Appends `time` as [`toolhost::registry::format_utc_time`] writes it
/// (`2026-12-04T19:50:26.123Z`) to `out`, formatting the date and second only when they
/// are not the ones in `second`.
fn time_text(second: &mut Option<(u64, String)>, time: SystemTime, out: &mut Vec<u8>) {
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let prefix = match second {
        Some((cached, prefix)) if *cached == secs => prefix,
        _ => {
            let mut text = toolhost::registry::format_utc_time(time);
            // Up to and with the dot before the milliseconds.
            text.truncate(text.rfind('.').map_or(text.len(), |dot| dot + 1));
            &mut second.insert((secs, text)).1
        }
    };
    out.extend_from_slice(prefix.as_bytes());
    let millis = since.subsec_millis();
    #[allow(clippy::cast_possible_truncation, reason = "digits, below 10")]
    out.extend_from_slice(&[
        b'0' + (millis / 100) as u8,
        b'0' + (millis / 10 % 10) as u8,
        b'0' + (millis % 10) as u8,
        b'Z',
    ]);
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
