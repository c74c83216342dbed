//! [`ImportLimits`]: the budgets of the host imports, what one call and one plugin over
//! the host's lifetime may do through `files` and `log` (enforced by the host's
//! `quota` module).

use crate::limit_value::LimitValue;

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
