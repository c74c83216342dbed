//! [`CallRecord`]: what one call did through the host (its arguments' check, plugin
//! instantiation, the guest call, each file read or written, each outgoing HTTP request), for a
//! [`CallObserver`](super::CallObserver) that asked for it
//! ([`CallWatch::record`](super::CallWatch::record)): a trace exporter makes
//! child spans of it, an audit log lists the paths and hosts.
//!
//! Made only when the observer asks (one allocation per call then); a call without one
//! pays a `None` check per host import. Bounded: at most [`MAX_STEPS`] steps (later ones
//! are counted in [`Touched::steps_dropped`]), at most [`MAX_LISTED`] distinct paths read,
//! paths written and hosts (file calls and requests to others counted in
//! [`Touched::files_truncated`] and [`Touched::hosts_truncated`]), each text cut to
//! [`MAX_TEXT_BYTES`].

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Steps (spans) one call records at most; later ones are counted, not kept.
pub const MAX_STEPS: usize = 128;
/// Distinct paths read, paths written and hosts one call lists at most, each.
pub const MAX_LISTED: usize = 64;
/// The longest path, URL, host or method kept, in bytes (cut at a character boundary).
pub const MAX_TEXT_BYTES: usize = 256;

/// What one call did through the host, shared by the call's handler (which records)
/// and its observer (which reads it when the call ends).
///
/// ```
/// use std::time::Duration;
/// use toolhost::registry::{CallRecord, StepKind};
///
/// let record = CallRecord::new();
/// let start = record.now();
/// record.file_read("notes/a.md", 12, start, true);
/// record.file_read("notes/a.md", 12, start, true);
/// let touched = record.touched();
/// assert_eq!(touched.files_read, ["notes/a.md"]);
/// assert_eq!(touched.steps.len(), 2);
/// assert!(matches!(&touched.steps[0].kind, StepKind::FileRead { path, bytes: 12 } if path == "notes/a.md"));
/// ```
#[derive(Debug)]
pub struct CallRecord {
    started: Instant,
    touched: Mutex<Touched>,
}

/// What a [`CallRecord`] holds.
#[derive(Debug, Default, Clone, PartialEq)]
#[non_exhaustive]
pub struct Touched {
    /// The steps, in the order they ended.
    pub steps: Vec<Step>,
    /// Steps not kept (over [`MAX_STEPS`]).
    pub steps_dropped: u32,
    /// Distinct paths read (successfully), as the tool named them, in first-read order.
    pub files_read: Vec<String>,
    /// Distinct paths written or deleted (successfully), as the tool named them.
    pub files_written: Vec<String>,
    /// Reads and writes whose path was not listed (the list was full: [`MAX_LISTED`]
    /// distinct paths); each such file call counts.
    pub files_truncated: u32,
    /// Distinct `host:port`s an HTTP request went to (answered or not).
    pub hosts: Vec<String>,
    /// Requests whose host was not listed (the list was full); each counts.
    pub hosts_truncated: u32,
}

/// One step of a call, from `start` to `end` (both from the record's creation, at the
/// call's admission).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What it was.
    pub kind: StepKind,
    /// When it started.
    pub start: Duration,
    /// When it ended.
    pub end: Duration,
    /// Whether it failed (a refused or failed file call, a request without answer).
    pub failed: bool,
}

/// What a [`Step`] was.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StepKind {
    /// The call's arguments checked before its handler ran (a JSON object, the tool's
    /// required fields present); [`Step::failed`]: refused.
    ArgumentCheck,
    /// A plugin's instantiation (a fresh instance for the call).
    Instantiate,
    /// The guest's tool function.
    GuestCall,
    /// A file read: the path as the tool named it (cut), the bytes read.
    FileRead {
        /// The path.
        path: String,
        /// Bytes read (0 when it failed).
        bytes: u64,
    },
    /// A file written (or deleted, with 0 bytes): the path as named, the bytes written.
    FileWrite {
        /// The path.
        path: String,
        /// Bytes written.
        bytes: u64,
    },
    /// An outgoing HTTP request.
    Http {
        /// The method.
        method: String,
        /// The host (`server.address`).
        host: String,
        /// The port.
        port: u16,
        /// The URL without its query and fragment (`url.full`).
        url: String,
        /// The answer's status, when one came.
        status: Option<u16>,
        /// Response body bytes the plugin read.
        bytes: u64,
        /// The id of the request's CLIENT span when the request carried a
        /// `traceparent` naming it ([`CallRecord::http_span`]); `None`: the exporter
        /// picks one.
        span_id: Option<[u8; 8]>,
    },
}

impl Default for CallRecord {
    fn default() -> Self {
        Self::new()
    }
}

impl CallRecord {
    /// An empty record, its clock starting now.
    pub fn new() -> Self {
        Self::since(Instant::now())
    }

    /// An empty record, its clock starting at `started` (the call's admission).
    pub fn since(started: Instant) -> Self {
        Self {
            started,
            touched: Mutex::new(Touched::default()),
        }
    }

    /// Now, on the record's clock (a step's start).
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// What was recorded so far.
    pub fn touched(&self) -> MutexGuard<'_, Touched> {
        self.touched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A step of `kind` that started at `start` and ends now; returns its index, `None`
    /// when it was not kept.
    pub fn step(&self, kind: StepKind, start: Duration, failed: bool) -> Option<usize> {
        let end = self.now();
        let mut touched = self.touched();
        touched.push(Step {
            kind,
            start,
            end,
            failed,
        })
    }

    /// A file read of `path` (`bytes` read, `ok`: it succeeded) that started at `start`.
    pub fn file_read(&self, path: &str, bytes: u64, start: Duration, ok: bool) {
        self.file_step(path, bytes, start, ok, false);
    }

    /// A file write (or delete, `bytes` 0) of `path` that started at `start`.
    pub fn file_written(&self, path: &str, bytes: u64, start: Duration, ok: bool) {
        self.file_step(path, bytes, start, ok, true);
    }

    /// A file read or write (`written`) step, its path listed when it succeeded.
    fn file_step(&self, path: &str, bytes: u64, start: Duration, ok: bool, written: bool) {
        let end = self.now();
        let path = cut(path);
        let mut touched = self.touched();
        if ok {
            touched.list_file(path, written);
        }
        let path = path.to_owned();
        let kind = if written {
            StepKind::FileWrite { path, bytes }
        } else {
            StepKind::FileRead { path, bytes }
        };
        touched.push(Step {
            kind,
            start,
            end,
            failed: !ok,
        });
    }

    /// An HTTP request to `host:port` (`url` already without its query) that started at
    /// `start` and got `status` (or none); returns the step's index, for
    /// [`CallRecord::http_body_read`].
    pub fn http(
        &self,
        method: &str,
        host: &str,
        port: u16,
        url: &str,
        status: Option<u16>,
        start: Duration,
    ) -> Option<usize> {
        let end = self.now();
        let host = cut(host);
        let mut touched = self.touched();
        touched.list_host(host, port);
        touched.push(Step {
            kind: StepKind::Http {
                method: cut(method).to_owned(),
                host: host.to_owned(),
                port,
                url: cut(url).to_owned(),
                status,
                bytes: 0,
                span_id: None,
            },
            start,
            end,
            failed: status.is_none(),
        })
    }

    /// HTTP step `index` is the request whose `traceparent` named `span_id` as its
    /// parent: its CLIENT span is exported with that id, so the server behind the
    /// request and the exported span agree.
    pub fn http_span(&self, index: usize, span_id: [u8; 8]) {
        let mut touched = self.touched();
        if let Some(step) = touched.steps.get_mut(index) {
            if let StepKind::Http { span_id: id, .. } = &mut step.kind {
                *id = Some(span_id);
            }
        }
    }

    /// The response body of HTTP step `index` was read to `bytes` (its end or the
    /// plugin dropping it): the step ends now and counts them.
    pub fn http_body_read(&self, index: usize, bytes: u64) {
        let end = self.now();
        let mut touched = self.touched();
        if let Some(step) = touched.steps.get_mut(index) {
            if let StepKind::Http { bytes: seen, .. } = &mut step.kind {
                *seen = bytes;
                step.end = step.end.max(end);
            }
        }
    }
}

impl Touched {
    fn push(&mut self, step: Step) -> Option<usize> {
        if self.steps.len() >= MAX_STEPS {
            self.steps_dropped = self.steps_dropped.saturating_add(1);
            return None;
        }
        self.steps.push(step);
        Some(self.steps.len() - 1)
    }

    fn list_file(&mut self, path: &str, written: bool) {
        let list = if written {
            &mut self.files_written
        } else {
            &mut self.files_read
        };
        if list.iter().any(|seen| seen == path) {
            return;
        }
        if list.len() >= MAX_LISTED {
            self.files_truncated = self.files_truncated.saturating_add(1);
            return;
        }
        list.push(path.to_owned());
    }

    fn list_host(&mut self, host: &str, port: u16) {
        let key = format!("{host}:{port}");
        if self.hosts.contains(&key) {
            return;
        }
        if self.hosts.len() >= MAX_LISTED {
            self.hosts_truncated = self.hosts_truncated.saturating_add(1);
            return;
        }
        self.hosts.push(key);
    }
}

/// `text` cut to [`MAX_TEXT_BYTES`] at a character boundary.
fn cut(text: &str) -> &str {
    if text.len() <= MAX_TEXT_BYTES {
        return text;
    }
    let mut at = MAX_TEXT_BYTES;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_distinct_bounded_and_counted() {
        let record = CallRecord::new();
        let start = record.now();
        for i in 0..(MAX_LISTED + 3) {
            record.file_read(&format!("f{i}"), 1, start, true);
            record.file_read("f0", 1, start, true);
        }
        record.file_read("denied", 0, start, false);
        for i in 0..(MAX_LISTED + 2) {
            let port = 8000 + u16::try_from(i).unwrap();
            record.http(
                "GET",
                "127.0.0.1",
                port,
                "http://127.0.0.1/",
                Some(200),
                start,
            );
            record.http(
                "GET",
                "127.0.0.1",
                port,
                "http://127.0.0.1/",
                Some(200),
                start,
            );
        }
        let touched = record.touched();
        assert_eq!(touched.files_read.len(), MAX_LISTED);
        assert_eq!(touched.files_read[1], "f1");
        assert_eq!(touched.files_truncated, 3);
        assert!(!touched.files_read.iter().any(|p| p == "denied"));
        assert_eq!(touched.hosts.len(), MAX_LISTED);
        assert_eq!(touched.hosts[0], "127.0.0.1:8000");
        // Each request past the cap counts (two per unlisted host here).
        assert_eq!(touched.hosts_truncated, 4);
        assert_eq!(touched.steps.len(), MAX_STEPS);
        let all = 2 * (MAX_LISTED + 3) + 1 + 2 * (MAX_LISTED + 2);
        assert_eq!(touched.steps_dropped as usize, all - MAX_STEPS);
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let record = CallRecord::new();
        let path = "é".repeat(MAX_TEXT_BYTES);
        record.file_written(&path, 3, record.now(), true);
        let touched = record.touched();
        assert_eq!(touched.files_written[0].len(), MAX_TEXT_BYTES);
        assert_eq!(touched.files_written[0], "é".repeat(MAX_TEXT_BYTES / 2));
    }

    #[test]
    fn a_body_read_later_counts_on_its_step() {
        let record = CallRecord::new();
        let index = record
            .http("GET", "h", 80, "http://h/p", Some(204), record.now())
            .unwrap();
        record.http_body_read(index, 42);
        let touched = record.touched();
        assert!(matches!(
            touched.steps[0].kind,
            StepKind::Http {
                bytes: 42,
                status: Some(204),
                ..
            }
        ));
    }
}
