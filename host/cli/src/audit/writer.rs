//! The audit log's writer side (see the parent module for what it guarantees): the
//! queue between the calls and the writer thread ([`Queue`], [`Records`]), the thread's
//! loop (gathering a batch, the `lstat` of the path, rotation, the one `write`), the
//! state of the open file, and what calls wait on (room in the queue, a flush).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tracing::error;

use super::{open_append, AuditError, FLUSH_INTERVAL, RECORD_OVERHEAD};

/// What the calls and the writer thread share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) path: PathBuf,
    /// Rotate before a record would take the file past this size; `None`: never.
    pub(super) max_bytes: Option<u64>,
    pub(super) keep: usize,
    /// [`QUEUE_BYTES`](super::QUEUE_BYTES) (smaller in tests).
    pub(super) queue_bytes: usize,
    /// [`QUEUE_WAIT`](super::QUEUE_WAIT) (shorter in tests).
    pub(super) queue_wait: Duration,
    /// Set while records cannot be written: calls are refused.
    pub(super) failed: AtomicBool,
    /// Records that could not be written since the last one that could.
    pub(super) lost: AtomicU64,
    /// Why the last write failed.
    pub(super) reason: Mutex<String>,
    /// Taken to write (by the writer, and by a call writing `audit_resumed`) and rotate.
    pub(super) file: Mutex<State>,
    pub(super) queue: Mutex<Queue>,
    /// The writer waits on it for records.
    pub(super) work: Condvar,
    /// Calls wait on it for room, and flushes for their records to be written.
    pub(super) room: Condvar,
    /// Tests: the writer takes it (after the file's lock) before each batch, so a test
    /// holding it stalls the disk.
    #[cfg(test)]
    pub(super) stall: Mutex<()>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The text of the last batch (its buffer reused by the next).
    pub(super) text: Vec<u8>,
    /// The last second a record's time was formatted in, and its text up to the
    /// milliseconds (`2026-12-04T19:50:26.`): records of the same second reuse it.
    pub(super) second: Option<(u64, String)>,
    /// The file as last opened, with its device and inode and its size as written since.
    pub(super) open: Option<OpenLog>,
}

/// The records between the calls and the writer.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// The queued records, back to back: serialized straight into it by the calls, taken
    /// whole by the writer (the two buffers swapped: no allocation per record).
    pub(super) records: Records,
    /// The bytes of the queued records and of the batch being written.
    pub(super) bytes: usize,
    /// Records queued since start.
    pub(super) pushed: u64,
    /// Records written or counted lost since start.
    pub(super) done: u64,
    /// The writer waits for a first record (a call wakes it; otherwise none does).
    pub(super) idle: bool,
    /// Write now, without gathering (a flush, a queue half full).
    pub(super) hurry: bool,
    /// The log is dropped: write what is queued and stop.
    pub(super) closed: bool,
}

/// Records waiting for the writer: each one's JSON object without its time
/// (`{"event":...}` and a newline), back to back, with its time and where it ends.
#[derive(Debug, Default)]
pub(super) struct Records {
    pub(super) text: Vec<u8>,
    pub(super) ends: Vec<(SystemTime, usize)>,
}

impl Records {
    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
    }

    /// Each record's time and text.
    pub(super) fn iter(&self) -> impl Iterator<Item = (SystemTime, &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(time, end)| {
            let rest = self.text.get(start..end).unwrap_or_default();
            start = end;
            (time, rest)
        })
    }

    /// Writes `value` as the next record's text (not yet counted: see
    /// [`Records::commit`]); its size in bytes.
    pub(super) fn write(&mut self, value: &impl Line) -> usize {
        let start = self.text.len();
        value.write_line(&mut self.text);
        self.text.push(b'\n');
        self.text.len() - start
    }

    /// The record written last, stamped `time`.
    pub(super) fn commit(&mut self, time: SystemTime) {
        self.ends.push((time, self.text.len()));
    }

    /// Forgets the record written last and not committed.
    pub(super) fn undo(&mut self) {
        let end = self.ends.last().map_or(0, |&(_, end)| end);
        self.text.truncate(end);
    }
}

/// A record that writes itself as one JSON object (no newline) at the end of a buffer.
pub(super) trait Line {
    /// Appends the record's JSON object to `out`.
    fn write_line(&self, out: &mut Vec<u8>);
}

/// The audit file, open for appending.
#[derive(Debug)]
pub(super) struct OpenLog {
    pub(super) file: File,
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) size: u64,
}

impl Shared {
    pub(super) fn lock_file(&self) -> MutexGuard<'_, State> {
        self.file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn lock_reason(&self) -> MutexGuard<'_, String> {
        self.reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn reason(&self) -> String {
        self.lock_reason().clone()
    }

    pub(super) fn lock_queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `record`, stamped now; waits for room up to [`Shared::queue_wait`], past
    /// which the record counts as lost and calls are refused.
    pub(super) fn push(&self, record: &impl Line) {
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
    pub(super) fn lose(&self, count: u64, reason: String) {
        self.lost.fetch_add(count, Ordering::AcqRel);
        let first = !self.failed.load(Ordering::Acquire);
        if first {
            error!(path = %self.path.display(), "cannot write the audit log ({reason}): {count} record(s) lost, and calls are refused until it can be written");
        }
        *self.lock_reason() = reason;
        self.failed.store(true, Ordering::Release);
    }

    pub(super) fn flush(&self, limit: Duration) -> bool {
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
    pub(super) fn run(&self) {
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
    pub(super) fn write_batch(&self, batch: &Records) {
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
    pub(super) fn write_records(
        &self,
        state: &mut State,
        records: &Records,
    ) -> Result<(), (String, u64)> {
        let result = self.append(state, records);
        if result.is_err() {
            // Opened again (and checked again) at the next batch.
            state.open = None;
        }
        result
    }

    pub(super) fn append(&self, state: &mut State, records: &Records) -> Result<(), (String, u64)> {
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
    pub(super) fn append_into(
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
    pub(super) fn write_text(state: &mut State, text: &[u8]) -> Result<(), String> {
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
    pub(super) fn open_log(&self) -> Result<OpenLog, String> {
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
    pub(super) fn rotate(&self) -> std::io::Result<()> {
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

/// Appends `time` as [`toolhost::registry::format_utc_time`] writes it
/// (`2026-12-04T19:50:26.123Z`) to `out`, formatting the date and second only when they
/// are not the ones in `second`.
pub(super) fn time_text(second: &mut Option<(u64, String)>, time: SystemTime, out: &mut Vec<u8>) {
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
