//! Per-plugin resource limits, and the store limiter that enforces and records them.
//!
//! A plugin runs under a [`PluginLimits`]: the host's defaults, overridden by the
//! plugin's manifest within the host's maxima (see [`super::manifest`]). Time is enforced
//! by epoch interruption plus a timer (a CPU-bound `loop {}` is stopped too), memory,
//! tables and instances by [`Limiter`], fuel by wasmtime's fuel metering, output by the
//! call path after the guest returns.

use std::time::Duration;

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

use super::host::quota::ImportLimits;

/// Default wall time of one plugin call (10 s). The registry's own per-call deadline
/// still applies; the earlier of the two wins.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on a plugin's linear memory (64 MiB): enough for JSON tools over
/// files of a few MiB, small enough that 64 concurrent calls fit in a few GiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 * 1024 * 1024;
/// Default cap on one result's JSON text (1 MiB). The registry's result cap is
/// usually lower; this one stops a plugin before its text is parsed.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Default capture of a call's stdout and of its stderr (64 KiB each). Only the last
/// bytes are kept: a panic message is written last.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 64 * 1024;
/// Default cap on core instances per store. A Rust `wasm32-wasip2` component has 3 to 5
/// (its module plus the canonical-ABI glue); 32 leaves room for bigger toolchains.
pub const DEFAULT_MAX_INSTANCES: u32 = 32;
/// Default cap on tables per store (a Rust component has 2 to 4).
pub const DEFAULT_MAX_TABLES: u32 = 32;

/// What one plugin may use per call.
///
/// `Default` is the host's conservative default; [`PluginLimits::unlimited`] is the
/// loud opposite, for benchmarks and trusted plugins only.
///
/// ```
/// use std::time::Duration;
/// use toolhost_plugin::PluginLimits;
///
/// let limits = PluginLimits::default();
/// assert_eq!(limits.timeout, Duration::from_secs(10));
/// assert_eq!(limits.memory_bytes, 64 * 1024 * 1024);
/// assert_eq!(limits.fuel, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    /// Wall time of one call, measured from when the call starts (instantiation
    /// included). A call also stops at the caller's deadline, if that comes first.
    pub timeout: Duration,
    /// Cap on the plugin's linear memory, in bytes. A refused grow becomes
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `memory (64 MiB)`.
    pub memory_bytes: u64,
    /// Fuel (roughly, wasm instructions) per call; `None` for no fuel limit.
    pub fuel: Option<u64>,
    /// Cap on the result's JSON text, in bytes.
    pub max_output_bytes: usize,
    /// Bytes of stdout and of stderr kept per call (the last ones).
    pub max_stderr_bytes: usize,
    /// Cap on core instances created in one call's store.
    pub max_instances: u32,
    /// Cap on tables created in one call's store (also used for memories).
    pub max_tables: u32,
    /// What the plugin may do through the host's imports: file calls, bytes read and
    /// written per call, lifetime write totals, log rate.
    pub imports: ImportLimits,
}

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            fuel: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_instances: DEFAULT_MAX_INSTANCES,
            max_tables: DEFAULT_MAX_TABLES,
            imports: ImportLimits::default(),
        }
    }
}

impl PluginLimits {
    /// No limit worth the name: a day per call, 4 GiB of memory (all a 32-bit memory can
    /// address), no fuel limit, 1 GiB of output.
    ///
    /// # Sandbox
    /// A plugin under these limits can hold a CPU and gigabytes of memory for as long as
    /// the caller's deadline allows. Never a default; use it for benchmarks and trusted
    /// plugins only.
    pub fn unlimited() -> Self {
        Self {
            timeout: Duration::from_secs(24 * 60 * 60),
            memory_bytes: 4 * 1024 * 1024 * 1024,
            fuel: None,
            max_output_bytes: 1024 * 1024 * 1024,
            max_stderr_bytes: 1024 * 1024,
            max_instances: 10_000,
            max_tables: 10_000,
            imports: ImportLimits::unlimited(),
        }
    }

    /// The ceiling a manifest may raise the limits to when the host sets none
    /// (`PluginHostConfig::max_limits` default): 60 s, 256 MiB, any fuel, 16 MiB of
    /// output, 1 MiB of stderr, 4x the default instance and table counts, the default
    /// import budgets.
    pub fn default_max() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            memory_bytes: 256 * 1024 * 1024,
            fuel: None,
            max_output_bytes: 16 * 1024 * 1024,
            max_stderr_bytes: 1024 * 1024,
            max_instances: 4 * DEFAULT_MAX_INSTANCES,
            max_tables: 4 * DEFAULT_MAX_TABLES,
            // A manifest may only lower the import budgets.
            imports: ImportLimits::default(),
        }
    }

    /// The first limit of `self` above the same limit of `max`, as
    /// `(name, asked, max)`; `None` when every limit fits. A `None` fuel is unlimited, so
    /// it only fits a `None` maximum.
    pub(crate) fn first_above(&self, max: &PluginLimits) -> Option<(&'static str, String, String)> {
        let fuel = |f: Option<u64>| f.map_or_else(|| "unlimited".to_owned(), |f| f.to_string());
        let fuel_above = match (self.fuel, max.fuel) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(asked), Some(cap)) => asked > cap,
        };
        if self.timeout > max.timeout {
            Some((
                "timeout",
                format_duration(self.timeout),
                format_duration(max.timeout),
            ))
        } else if self.memory_bytes > max.memory_bytes {
            Some((
                "memory",
                format_bytes(self.memory_bytes),
                format_bytes(max.memory_bytes),
            ))
        } else if fuel_above {
            Some(("fuel", fuel(self.fuel), fuel(max.fuel)))
        } else if self.max_output_bytes > max.max_output_bytes {
            Some((
                "output",
                format_bytes(self.max_output_bytes as u64),
                format_bytes(max.max_output_bytes as u64),
            ))
        } else if self.max_stderr_bytes > max.max_stderr_bytes {
            Some((
                "stderr",
                format_bytes(self.max_stderr_bytes as u64),
                format_bytes(max.max_stderr_bytes as u64),
            ))
        } else if self.max_instances > max.max_instances {
            Some((
                "instances",
                self.max_instances.to_string(),
                max.max_instances.to_string(),
            ))
        } else if self.max_tables > max.max_tables {
            Some((
                "tables",
                self.max_tables.to_string(),
                max.max_tables.to_string(),
            ))
        } else {
            self.imports.first_above(&max.imports)
        }
    }
}

/// `64 MiB`, `1.5 KiB`, `512 bytes`: sizes as a person writes them.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{:.1} {unit}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// `10s`, `1.5s`, `250ms`.
pub fn format_duration(duration: Duration) -> String {
    toolhost::registry::format_duration(duration)
}

/// The store's [`ResourceLimiter`]: wasmtime's [`StoreLimits`] plus a record of the
/// first memory grow it refused, so a guest that aborts after a refused grow (Rust
/// guests do: the allocation error handler traps) is reported as hitting the memory
/// limit rather than as a crash.
#[derive(Debug)]
pub struct Limiter {
    inner: StoreLimits,
    refused: Option<usize>,
}

impl Limiter {
    /// A limiter for `limits`.
    pub fn new(limits: &PluginLimits) -> Self {
        let memory = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        let count = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
        Self {
            inner: StoreLimitsBuilder::new()
                .memory_size(memory)
                .instances(count(limits.max_instances))
                .tables(count(limits.max_tables))
                .memories(count(limits.max_tables))
                .build(),
            refused: None,
        }
    }

    /// The size in bytes of the first memory grow refused for the limit, if any.
    pub fn refused_grow(&self) -> Option<usize> {
        self.refused
    }

    /// Forgets a refused grow (a reused instance starts a new call).
    pub fn reset(&mut self) {
        self.refused = None;
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        if !allowed && self.refused.is_none() {
            self.refused = Some(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_a_person_writes_them() {
        assert_eq!(format_bytes(64 * 1024 * 1024), "64 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(4 << 30), "4 GiB");
        assert_eq!(format_bytes(512), "512 bytes");
    }

    #[test]
    fn limiter_records_the_first_refused_grow_only() {
        let limits = PluginLimits {
            memory_bytes: 1 << 20,
            ..PluginLimits::default()
        };
        let mut limiter = Limiter::new(&limits);
        assert!(limiter.memory_growing(0, 1 << 20, None).unwrap());
        assert_eq!(limiter.refused_grow(), None);
        assert!(!limiter.memory_growing(1 << 20, 2 << 20, None).unwrap());
        assert!(!limiter.memory_growing(1 << 20, 3 << 20, None).unwrap());
        assert_eq!(limiter.refused_grow(), Some(2 << 20));
        limiter.reset();
        assert_eq!(limiter.refused_grow(), None);
    }

    #[test]
    fn first_above_names_the_limit_and_both_values() {
        let max = PluginLimits::default_max();
        assert_eq!(PluginLimits::default().first_above(&max), None);
        let asked = PluginLimits {
            memory_bytes: 512 << 20,
            ..PluginLimits::default()
        };
        assert_eq!(
            asked.first_above(&max),
            Some(("memory", "512 MiB".into(), "256 MiB".into()))
        );
        let capped = PluginLimits {
            fuel: Some(10),
            ..PluginLimits::default_max()
        };
        assert_eq!(
            PluginLimits::default().first_above(&capped),
            Some(("fuel", "unlimited".into(), "10".into()))
        );
        let asked = PluginLimits {
            fuel: Some(5),
            ..PluginLimits::default()
        };
        assert_eq!(asked.first_above(&capped), None);
    }
}
