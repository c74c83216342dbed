//! Budgets of the host imports: what one call, and one plugin over the host's lifetime,
//! may do through `files` and `log`.
//!
//! The why and how of these budgets is on [`ImportLimits`], the public face of this
//! module.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::limit_value::LimitValue;
use crate::v0_2::toolhost::plugin::files::FileError;
use toolhost::registry::format_bytes;

/// Default of [`ImportLimits::max_file_calls`]: 1000 `files` calls per tool call. Each
/// is a hop to the blocking pool plus at least one system call; a tool call that
/// touches more than a thousand files is a batch job, not a tool call, and 1000 keeps
/// the host work one call can ask for well under a second on a local disk.
pub(crate) const DEFAULT_MAX_FILE_CALLS: u32 = 1000;
/// Default of [`ImportLimits::max_read_bytes_per_call`]: 256 MiB read per tool call, four times
/// the default memory cap: a plugin can stream through a few memories' worth of files
/// in one call, not through the whole store.
pub(crate) const DEFAULT_MAX_READ_BYTES_PER_CALL: u64 = 256 * 1024 * 1024;
/// Default of [`ImportLimits::max_write_bytes_per_call`]: 16 MiB, sixteen files at the
/// default 1 MiB file size cap.
pub(crate) const DEFAULT_MAX_WRITE_BYTES_PER_CALL: u64 = 16 * 1024 * 1024;
/// Default of [`ImportLimits::max_files_written_per_call`]: 100 files per tool call.
pub(crate) const DEFAULT_MAX_FILES_WRITTEN_PER_CALL: u32 = 100;
/// Default of [`ImportLimits::max_write_bytes_total`]: 1 GiB per plugin for the host's
/// lifetime, so a plugin called in a loop cannot fill the disk (deletes do not give it
/// back: the quota bounds disk churn, which is what a flood costs).
pub(crate) const DEFAULT_MAX_WRITE_BYTES_TOTAL: u64 = 1024 * 1024 * 1024;
/// Default of [`ImportLimits::max_files_written_total`]: 10 000 files per plugin for the
/// host's lifetime.
pub(crate) const DEFAULT_MAX_FILES_WRITTEN_TOTAL: u64 = 10_000;
/// Default of [`ImportLimits::log_lines_per_second`]: 100 lines a second per plugin
/// (at most 4 KiB each, so ~400 KiB/s), far above what a tool needs to report progress.
pub(crate) const DEFAULT_LOG_LINES_PER_SECOND: u32 = 100;
/// Default of [`ImportLimits::log_burst`]: 1000 lines at once per plugin, what one call
/// could log before the rate limit existed.
pub(crate) const DEFAULT_LOG_BURST: u32 = 1000;
/// The host's cap on one plugin read, whatever the plugin's memory: the default read cap
/// of the built-in read_file and grep (64 MiB).
pub(crate) const HOST_READ_CAP: u64 = toolhost::tools::DEFAULT_MAX_READ_BYTES_PER_FILE;

/// What a plugin may do through its imports: per tool call, and in total over the
/// host's lifetime. Part of [`PluginLimits`](crate::limits::PluginLimits).
///
/// The guest's own limits (time, memory, fuel) do not bound the work it makes the host
/// do: a loop of `files.write` costs the guest nothing but fills the disk, and a loop of
/// `log` fills the host log. So each call has a budget (`CallBudget`) of file calls,
/// bytes read, bytes and files written; each plugin has lifetime totals of bytes and
/// files written and a log rate limit (`PluginMeter`, shared by all its calls). Every
/// number is a setting of this struct (each `with_*` setter states its default): the
/// host's default, lowered per plugin in its manifest's `[limits]`, within the host's
/// maximum (see [`PluginLimits`](crate::limits::PluginLimits#bounds)).
///
/// A refusal is a file error the plugin can report (`denied` for a count, `too-large`
/// for bytes) naming the limit and its manifest key; excess log lines are dropped and
/// counted, and one line says how many when logging resumes or at the end of the call.
///
/// ```
/// use toolhost_plugin::limits::ImportLimits;
///
/// let limits = ImportLimits::default();
/// assert_eq!(limits.max_file_calls(), 1000);
/// assert_eq!(limits.max_write_bytes_per_call(), 16 * 1024 * 1024);
/// assert_eq!(limits.log_lines_per_second(), 100);
/// assert_eq!(limits.with_max_read_bytes_per_call(1 << 20).max_read_bytes_per_call(), 1 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportLimits {
    /// `files` calls per tool call (manifest `max_file_calls`).
    pub(crate) max_file_calls: u32,
    /// Bytes read (files and listings) per tool call (manifest `max_read_bytes`). One
    /// read is also capped at the plugin's memory and [`HOST_READ_CAP`].
    pub(crate) max_read_bytes: u64,
    /// Bytes written per tool call (manifest `max_write_bytes_per_call`).
    pub(crate) max_write_bytes_per_call: u64,
    /// Files written per tool call (manifest `max_files_written_per_call`).
    pub(crate) max_files_written_per_call: u32,
    /// Bytes written by the plugin over the host's lifetime (manifest
    /// `max_write_bytes_total`).
    pub(crate) max_write_bytes_total: u64,
    /// Files written by the plugin over the host's lifetime (manifest
    /// `max_files_written_total`).
    pub(crate) max_files_written_total: u64,
    /// Log lines per second, shared by all calls of the plugin; its stdout and stderr
    /// lines count too (manifest `log_lines_per_second`).
    pub(crate) log_lines_per_second: u32,
    /// Log lines the plugin may write at once before the rate applies (manifest
    /// `log_burst`).
    pub(crate) log_burst: u32,
}

impl Default for ImportLimits {
    fn default() -> Self {
        Self {
            max_file_calls: DEFAULT_MAX_FILE_CALLS,
            max_read_bytes: DEFAULT_MAX_READ_BYTES_PER_CALL,
            max_write_bytes_per_call: DEFAULT_MAX_WRITE_BYTES_PER_CALL,
            max_files_written_per_call: DEFAULT_MAX_FILES_WRITTEN_PER_CALL,
            max_write_bytes_total: DEFAULT_MAX_WRITE_BYTES_TOTAL,
            max_files_written_total: DEFAULT_MAX_FILES_WRITTEN_TOTAL,
            log_lines_per_second: DEFAULT_LOG_LINES_PER_SECOND,
            log_burst: DEFAULT_LOG_BURST,
        }
    }
}

impl ImportLimits {
    /// `files` calls per tool call ([`with_max_file_calls`](Self::with_max_file_calls)).
    pub fn max_file_calls(&self) -> u32 {
        self.max_file_calls
    }

    /// `files` calls per tool call (manifest `max_file_calls`). Default: 1000 (each is a hop
    /// to the blocking pool plus at least one system call). One more is refused with the
    /// file error `denied`, naming the limit.
    #[must_use]
    pub fn with_max_file_calls(mut self, max_file_calls: u32) -> Self {
        self.max_file_calls = max_file_calls;
        self
    }

    /// Bytes read per tool call ([`with_max_read_bytes_per_call`](Self::with_max_read_bytes_per_call)).
    pub fn max_read_bytes_per_call(&self) -> u64 {
        self.max_read_bytes
    }

    /// Bytes read (files and listings) per tool call (manifest `max_read_bytes`). Default:
    /// 256 MiB, four times the default memory cap. A read past what is left is refused with
    /// `too-large`. One read is also capped at the plugin's memory and at the host's cap on
    /// one read, the built-in read_file's default of 64 MiB
    /// ([`DEFAULT_MAX_READ_BYTES_PER_CALL_PER_FILE`](toolhost::tools::DEFAULT_MAX_READ_BYTES_PER_FILE)).
    #[must_use]
    pub fn with_max_read_bytes_per_call(mut self, max_read_bytes_per_call: u64) -> Self {
        self.max_read_bytes = max_read_bytes_per_call;
        self
    }

    /// Bytes written per tool call ([`with_max_write_bytes_per_call`](Self::with_max_write_bytes_per_call)).
    pub fn max_write_bytes_per_call(&self) -> u64 {
        self.max_write_bytes_per_call
    }

    /// Bytes written per tool call (manifest `max_write_bytes_per_call`). Default: 16 MiB,
    /// sixteen files at the default 1 MiB file size cap. A write past it is refused with
    /// `too-large`, and nothing of it is written.
    #[must_use]
    pub fn with_max_write_bytes_per_call(mut self, max_write_bytes_per_call: u64) -> Self {
        self.max_write_bytes_per_call = max_write_bytes_per_call;
        self
    }

    /// Files written per tool call ([`with_max_files_written_per_call`](Self::with_max_files_written_per_call)).
    pub fn max_files_written_per_call(&self) -> u32 {
        self.max_files_written_per_call
    }

    /// Files written per tool call (manifest `max_files_written_per_call`). Default: 100. One
    /// more is refused with `denied`.
    #[must_use]
    pub fn with_max_files_written_per_call(mut self, max_files_written_per_call: u32) -> Self {
        self.max_files_written_per_call = max_files_written_per_call;
        self
    }

    /// Bytes the plugin may write over the host's lifetime ([`with_max_write_bytes_total`](Self::with_max_write_bytes_total)).
    pub fn max_write_bytes_total(&self) -> u64 {
        self.max_write_bytes_total
    }

    /// Bytes written by the plugin over the host's lifetime (manifest
    /// `max_write_bytes_total`). Default: 1 GiB, so a plugin called in a loop cannot fill the
    /// disk (deletes do not give it back). A write past it is refused with `too-large`.
    #[must_use]
    pub fn with_max_write_bytes_total(mut self, max_write_bytes_total: u64) -> Self {
        self.max_write_bytes_total = max_write_bytes_total;
        self
    }

    /// Files the plugin may write over the host's lifetime ([`with_max_files_written_total`](Self::with_max_files_written_total)).
    pub fn max_files_written_total(&self) -> u64 {
        self.max_files_written_total
    }

    /// Files written by the plugin over the host's lifetime (manifest
    /// `max_files_written_total`). Default: 10 000. One more is refused with `denied`.
    #[must_use]
    pub fn with_max_files_written_total(mut self, max_files_written_total: u64) -> Self {
        self.max_files_written_total = max_files_written_total;
        self
    }

    /// Log lines per second of the plugin ([`with_log_lines_per_second`](Self::with_log_lines_per_second)).
    pub fn log_lines_per_second(&self) -> u32 {
        self.log_lines_per_second
    }

    /// Log lines per second, shared by all calls of the plugin; its stdout and stderr lines
    /// count too (manifest `log_lines_per_second`). Default: 100 (at most 4 KiB each). Lines
    /// over the rate are dropped and counted, and one line says how many.
    #[must_use]
    pub fn with_log_lines_per_second(mut self, log_lines_per_second: u32) -> Self {
        self.log_lines_per_second = log_lines_per_second;
        self
    }

    /// Log lines the plugin may write at once ([`with_log_burst`](Self::with_log_burst)).
    pub fn log_burst(&self) -> u32 {
        self.log_burst
    }

    /// Log lines the plugin may write at once before the rate applies (manifest
    /// `log_burst`). Default: 1000.
    #[must_use]
    pub fn with_log_burst(mut self, log_burst: u32) -> Self {
        self.log_burst = log_burst;
        self
    }
}

impl ImportLimits {
    /// No budget worth the name (every count at its type's maximum).
    ///
    /// # Sandbox
    /// A plugin under these can fill the disk and the host log. Benchmarks and trusted
    /// plugins only.
    pub fn unlimited() -> Self {
        Self {
            max_file_calls: u32::MAX,
            max_read_bytes: u64::MAX,
            max_write_bytes_per_call: u64::MAX,
            max_files_written_per_call: u32::MAX,
            max_write_bytes_total: u64::MAX,
            max_files_written_total: u64::MAX,
            log_lines_per_second: u32::MAX,
            log_burst: u32::MAX,
        }
    }

    /// The first limit of `self` above the same limit of `max`, as
    /// `(manifest key, asked, max)`.
    pub(crate) fn first_above(
        &self,
        max: &ImportLimits,
    ) -> Option<(&'static str, LimitValue, LimitValue)> {
        /// (manifest key, asked, max, what kind of value)
        type Check = (&'static str, u64, u64, fn(u64) -> LimitValue);
        let bytes: fn(u64) -> LimitValue = LimitValue::Bytes;
        let count: fn(u64) -> LimitValue = LimitValue::Count;
        let checks: [Check; 8] = [
            (
                "max_file_calls",
                self.max_file_calls.into(),
                max.max_file_calls.into(),
                count,
            ),
            (
                "max_read_bytes",
                self.max_read_bytes,
                max.max_read_bytes,
                bytes,
            ),
            (
                "max_write_bytes_per_call",
                self.max_write_bytes_per_call,
                max.max_write_bytes_per_call,
                bytes,
            ),
            (
                "max_files_written_per_call",
                self.max_files_written_per_call.into(),
                max.max_files_written_per_call.into(),
                count,
            ),
            (
                "max_write_bytes_total",
                self.max_write_bytes_total,
                max.max_write_bytes_total,
                bytes,
            ),
            (
                "max_files_written_total",
                self.max_files_written_total,
                max.max_files_written_total,
                count,
            ),
            (
                "log_lines_per_second",
                self.log_lines_per_second.into(),
                max.log_lines_per_second.into(),
                count,
            ),
            (
                "log_burst",
                self.log_burst.into(),
                max.log_burst.into(),
                count,
            ),
        ];
        checks
            .into_iter()
            .find(|(_, asked, max, _)| asked > max)
            .map(|(key, asked, max, show)| (key, show(asked), show(max)))
    }
}

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
