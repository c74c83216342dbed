//! Budgets of the host imports: what one call, and one plugin over the host's lifetime,
//! may do through `files` and `log`.
//!
//! The why and how of these budgets is on [`ImportLimits`] (`limits/imports.rs`), the
//! settings this module enforces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::limits::imports::{ImportLimits, HOST_READ_CAP};
use crate::v0_2::toolhost::plugin::files::FileError;
use toolhost::registry::format_bytes;

/// What one tool call has used of its budget. Reset at the start of every call.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct CallBudget {
    /// `files` calls made.
    pub file_calls: u32,
    /// Bytes read (file contents and listings).
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Files written.
    pub files_written: u32,
}

/// Why one read is capped where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadCap {
    /// The plugin's memory limit: the file is copied into its memory whole.
    Memory(u64),
    /// [`HOST_READ_CAP`].
    Host(u64),
    /// What is left of the call's read budget: `(left, max_read_bytes)`.
    Budget(u64, u64),
}

impl ReadCap {
    /// The cap in bytes.
    pub(crate) fn bytes(self) -> u64 {
        match self {
            ReadCap::Memory(cap) | ReadCap::Host(cap) | ReadCap::Budget(cap, _) => cap,
        }
    }

    /// The plugin's error for a file of `size` bytes at `path` over this cap.
    pub(crate) fn refuse(self, path: &str, size: u64) -> FileError {
        self.refuse_what(&format!("\"{}\"", path.escape_debug()), size)
    }

    /// The plugin's error for `what` (a quoted path, or "the listing of N files") of
    /// `size` bytes over this cap.
    pub(crate) fn refuse_what(self, what: &str, size: u64) -> FileError {
        let size = if size < 1024 {
            format_bytes(size)
        } else {
            format!("{} ({size} bytes)", format_bytes(size))
        };
        FileError::TooLarge(match self {
            ReadCap::Memory(cap) => format!(
                "{what} is {size}, over this plugin's cap of {} on one read (its memory limit: a file is read into its memory whole); read a smaller file",
                format_bytes(cap)
            ),
            ReadCap::Host(cap) => format!(
                "{what} is {size}, over the host's cap of {} on one read; read a smaller file",
                format_bytes(cap)
            ),
            ReadCap::Budget(left, max) => format!(
                "{what} is {size}, over what is left ({}) of this tool call's read budget of {} (limits.max_read_bytes); read less per call",
                format_bytes(left),
                format_bytes(max)
            ),
        })
    }
}

impl CallBudget {
    /// Counts one `files` call, refused past [`ImportLimits::max_file_calls`].
    ///
    /// # Errors
    /// `denied`, naming the limit.
    pub(crate) fn file_call(
        &mut self,
        plugin: &str,
        limits: &ImportLimits,
    ) -> Result<(), FileError> {
        if self.file_calls >= limits.max_file_calls {
            return Err(FileError::Denied(format!(
                "plugin \"{plugin}\" made {} file calls in this tool call, its limit per call (limits.max_file_calls); touch fewer files per call",
                self.file_calls
            )));
        }
        self.file_calls += 1;
        Ok(())
    }

    /// The cap on the next read: the smallest of the plugin's memory, the host's read
    /// cap and what is left of the call's read budget.
    pub(crate) fn read_cap(&self, memory_bytes: u64, limits: &ImportLimits) -> ReadCap {
        let left = limits.max_read_bytes.saturating_sub(self.read_bytes);
        let mut cap = ReadCap::Memory(memory_bytes);
        if HOST_READ_CAP < cap.bytes() {
            cap = ReadCap::Host(HOST_READ_CAP);
        }
        if left < cap.bytes() {
            cap = ReadCap::Budget(left, limits.max_read_bytes);
        }
        cap
    }

    /// Counts `bytes` read.
    pub(crate) fn read(&mut self, bytes: u64) {
        self.read_bytes = self.read_bytes.saturating_add(bytes);
    }

    /// Reserves a write of `bytes` at `path`: this call's files and bytes, then the
    /// plugin's lifetime totals. Nothing is reserved when anything is refused; once
    /// reserved, nothing is given back (the write may still run after the call ended).
    ///
    /// # Errors
    /// `denied` for a count, `too-large` for bytes, naming the limit and its key.
    pub(crate) fn reserve_write(
        &mut self,
        path: &str,
        bytes: u64,
        meter: &PluginMeter,
    ) -> Result<(), FileError> {
        let limits = &meter.limits;
        let path = path.escape_debug();
        if self.files_written >= limits.max_files_written_per_call {
            return Err(FileError::Denied(format!(
                "writing \"{path}\" would be file {} written in this tool call, over the plugin's limit of {} files per call (limits.max_files_written_per_call); write fewer files per call",
                u64::from(self.files_written) + 1,
                limits.max_files_written_per_call
            )));
        }
        let total = self.write_bytes.saturating_add(bytes);
        if total > limits.max_write_bytes_per_call {
            return Err(FileError::TooLarge(format!(
                "writing \"{path}\" ({}) would bring this tool call's writes to {}, over the plugin's limit of {} per call (limits.max_write_bytes_per_call); write less per call",
                format_bytes(bytes),
                format_bytes(total),
                format_bytes(limits.max_write_bytes_per_call)
            )));
        }
        meter.reserve_total(&path.to_string(), bytes)?;
        self.files_written += 1;
        self.write_bytes = total;
        Ok(())
    }
}

/// A token bucket: `burst` tokens, refilled at `rate` a second.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(rate: u32, burst: u32, now: Instant) -> Self {
        Self {
            rate: f64::from(rate),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Takes a token at `now`, if there is one.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now.max(self.last);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One plugin's shared meters: its lifetime write totals and its log rate limit, used by
/// every call of the plugin (concurrent ones included).
#[derive(Debug)]
pub(crate) struct PluginMeter {
    plugin: Arc<str>,
    /// The plugin's import limits.
    pub limits: ImportLimits,
    written_bytes: AtomicU64,
    written_files: AtomicU64,
    log: Mutex<TokenBucket>,
    dropped: AtomicU64,
}

impl PluginMeter {
    /// Fresh meters for `plugin` under `limits`.
    pub(crate) fn new(plugin: Arc<str>, limits: ImportLimits) -> Self {
        Self {
            log: Mutex::new(TokenBucket::new(
                limits.log_lines_per_second,
                limits.log_burst,
                Instant::now(),
            )),
            plugin,
            limits,
            written_bytes: AtomicU64::new(0),
            written_files: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Bytes and files the plugin has written so far (reserved, to be exact).
    #[cfg(test)]
    pub(crate) fn written(&self) -> (u64, u64) {
        (
            self.written_bytes.load(Ordering::Relaxed),
            self.written_files.load(Ordering::Relaxed),
        )
    }

    /// Reserves one file of `bytes` against the lifetime totals, atomically.
    fn reserve_total(&self, path: &str, bytes: u64) -> Result<(), FileError> {
        let limits = &self.limits;
        let plugin = &self.plugin;
        let add = |counter: &AtomicU64, amount: u64, max: u64| {
            counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(amount).filter(|&total| total <= max)
            })
        };
        if let Err(used) = add(&self.written_files, 1, limits.max_files_written_total) {
            return Err(FileError::Denied(format!(
                "writing \"{path}\" would be file {} plugin \"{plugin}\" has written since the host started, over its limit of {} (limits.max_files_written_total); the operator can raise it, or restart the host",
                used.saturating_add(1),
                limits.max_files_written_total
            )));
        }
        if let Err(used) = add(&self.written_bytes, bytes, limits.max_write_bytes_total) {
            self.written_files.fetch_sub(1, Ordering::Relaxed);
            return Err(FileError::TooLarge(format!(
                "writing \"{path}\" ({}) would bring what plugin \"{plugin}\" has written since the host started to {}, over its limit of {} (limits.max_write_bytes_total); the operator can raise it, or restart the host",
                format_bytes(bytes),
                format_bytes(used.saturating_add(bytes)),
                format_bytes(limits.max_write_bytes_total)
            )));
        }
        Ok(())
    }

    /// Whether one more log line of the plugin may go to the host log now. A line over
    /// the rate is counted as dropped; the first line let through after drops is preceded
    /// by one line saying how many were dropped.
    pub(crate) fn admit_log(&self, tool: &str) -> bool {
        let admitted = self
            .log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take(Instant::now());
        if admitted {
            self.flush_dropped(tool);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// Logs how many lines were dropped since the last such line, if any (at the end of
    /// a call, and when logging resumes).
    pub(crate) fn flush_dropped(&self, tool: &str) {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(
                target: "plugin",
                plugin = %self.plugin,
                tool,
                "dropped {dropped} log lines of plugin \"{}\": over its log rate limit of {} lines/s (burst {})",
                self.plugin,
                self.limits.log_lines_per_second,
                self.limits.log_burst
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::limit_value::LimitValue;

    fn message(err: FileError) -> String {
        match err {
            FileError::Denied(m) | FileError::TooLarge(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(100, 1000, start);
        assert_eq!((0..1500).filter(|_| bucket.take(start)).count(), 1000);
        // 100 lines a second: 10 after 100 ms, never above the burst.
        let later = start + Duration::from_millis(100);
        assert_eq!((0..50).filter(|_| bucket.take(later)).count(), 10);
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..5000).filter(|_| bucket.take(much_later)).count(), 1000);
        // A clock that goes backwards gives nothing.
        assert!(!bucket.take(start));
    }

    #[test]
    fn file_calls_are_counted_per_call() {
        let limits = ImportLimits {
            max_file_calls: 3,
            ..ImportLimits::default()
        };
        let mut budget = CallBudget::default();
        for _ in 0..3 {
            budget.file_call("p", &limits).unwrap();
        }
        assert_eq!(
            message(budget.file_call("p", &limits).unwrap_err()),
            "plugin \"p\" made 3 file calls in this tool call, its limit per call (limits.max_file_calls); touch fewer files per call"
        );
    }

    #[test]
    fn the_read_cap_is_the_smallest_of_memory_host_and_budget() {
        let limits = ImportLimits {
            max_read_bytes: 100 << 20,
            ..ImportLimits::default()
        };
        let mut budget = CallBudget::default();
        assert_eq!(
            budget.read_cap(16 << 20, &limits),
            ReadCap::Memory(16 << 20)
        );
        assert_eq!(
            budget.read_cap(1 << 30, &limits),
            ReadCap::Host(HOST_READ_CAP)
        );
        budget.read(90 << 20);
        assert_eq!(
            budget.read_cap(1 << 30, &limits),
            ReadCap::Budget(10 << 20, 100 << 20)
        );
        budget.read(u64::MAX);
        assert_eq!(
            budget.read_cap(1 << 30, &limits),
            ReadCap::Budget(0, 100 << 20)
        );
        assert_eq!(
            message(ReadCap::Budget(0, 100 << 20).refuse("a.md", 1536)),
            "\"a.md\" is 1.5 KiB (1536 bytes), over what is left (0 bytes) of this tool call's read budget of 100 MiB (limits.max_read_bytes); read less per call"
        );
        assert_eq!(
            message(ReadCap::Host(HOST_READ_CAP).refuse("big", 65 << 20)),
            "\"big\" is 65 MiB (68157440 bytes), over the host's cap of 64 MiB on one read; read a smaller file"
        );
    }

    #[test]
    fn lifetime_totals_are_shared_by_every_call_of_the_plugin() {
        let meter = PluginMeter::new(
            Arc::from("p"),
            ImportLimits {
                max_write_bytes_total: 25,
                max_files_written_total: 4,
                ..ImportLimits::default()
            },
        );
        // Two calls (two budgets), one meter.
        let (mut first, mut second) = (CallBudget::default(), CallBudget::default());
        first.reserve_write("a", 10, &meter).unwrap();
        second.reserve_write("b", 10, &meter).unwrap();
        assert_eq!(
            message(first.reserve_write("c", 10, &meter).unwrap_err()),
            "writing \"c\" (10 bytes) would bring what plugin \"p\" has written since the host started to 30 bytes, over its limit of 25 bytes (limits.max_write_bytes_total); the operator can raise it, or restart the host"
        );
        // A refused write reserves nothing.
        assert_eq!(meter.written(), (20, 2));
        assert_eq!(first.write_bytes, 10);
        second.reserve_write("d", 0, &meter).unwrap();
        second.reserve_write("e", 0, &meter).unwrap();
        assert!(matches!(
            first.reserve_write("f", 0, &meter),
            Err(FileError::Denied(m)) if m == "writing \"f\" would be file 5 plugin \"p\" has written since the host started, over its limit of 4 (limits.max_files_written_total); the operator can raise it, or restart the host"
        ));
        assert_eq!(meter.written(), (20, 4));
    }

    #[test]
    fn per_call_writes_are_checked_before_the_totals() {
        let meter = PluginMeter::new(
            Arc::from("p"),
            ImportLimits {
                max_write_bytes_per_call: 10,
                max_files_written_per_call: 2,
                ..ImportLimits::default()
            },
        );
        let mut budget = CallBudget::default();
        assert_eq!(
            message(budget.reserve_write("a", 11, &meter).unwrap_err()),
            "writing \"a\" (11 bytes) would bring this tool call's writes to 11 bytes, over the plugin's limit of 10 bytes per call (limits.max_write_bytes_per_call); write less per call"
        );
        budget.reserve_write("a", 5, &meter).unwrap();
        budget.reserve_write("b", 5, &meter).unwrap();
        assert!(matches!(
            budget.reserve_write("c", 0, &meter),
            Err(FileError::Denied(_))
        ));
        assert_eq!(meter.written(), (10, 2));
    }

    #[test]
    fn a_manifest_above_the_max_names_the_key() {
        let max = ImportLimits::default();
        assert_eq!(ImportLimits::default().first_above(&max), None);
        let asked = ImportLimits {
            max_write_bytes_per_call: 32 << 20,
            ..ImportLimits::default()
        };
        assert_eq!(
            asked.first_above(&max),
            Some((
                "max_write_bytes_per_call",
                LimitValue::Bytes(32 << 20),
                LimitValue::Bytes(16 << 20)
            ))
        );
        let asked = ImportLimits {
            log_burst: 1001,
            ..ImportLimits::default()
        };
        assert_eq!(
            asked.first_above(&max),
            Some((
                "log_burst",
                LimitValue::Count(1001),
                LimitValue::Count(1000)
            ))
        );
    }
}
