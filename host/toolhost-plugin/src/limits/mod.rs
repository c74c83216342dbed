//! Per-plugin resource limits, and the store limiter that enforces and records them.
//!
//! A plugin runs under a [`PluginLimits`]: the host's defaults, overridden by the
//! plugin's manifest within the host's maxima (see [`super::manifest`]). Time is enforced
//! by epoch interruption plus a timer (a CPU-bound `loop {}` is stopped too), memory,
//! tables and instances by the store's `Limiter`, fuel by wasmtime's fuel metering, output by the
//! call path after the guest returns.
//!
//! Every limit type is here: [`PluginLimits`] holds the per-call [`ImportLimits`] (the
//! `files` and `log` imports) and [`HttpLimits`]; [`DefinitionLimits`] caps what a plugin
//! declares at load. Each is a value built from its `Default` with `with_*` setters (each
//! stating its default) and read back through getters.

use std::time::Duration;

use wasmtime::component::ResourceTable;

pub use super::http_policy::HttpLimits;
pub use super::limit_value::LimitValue;
pub use definitions::{DefinitionCap, DefinitionLimits};
pub use imports::ImportLimits;
pub(crate) use limiter::Limiter;

mod definitions;
pub(crate) mod imports;
mod limiter;

/// Default wall time of one plugin call (10 s). The registry's own per-call deadline
/// still applies; the earlier of the two wins.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on a plugin's linear memory (64 MiB): enough for JSON tools over
/// files of a few MiB, small enough that 64 concurrent calls fit in a few GiB.
pub(crate) const DEFAULT_MEMORY_BYTES: u64 = 64 * 1024 * 1024;
/// Default cap on one result's JSON text (1 MiB). The registry's result cap is
/// usually lower; this one stops a plugin before its text is parsed.
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Default capture of a call's stdout and of its stderr (64 KiB each). Only the last
/// bytes are kept: a panic message is written last.
pub(crate) const DEFAULT_MAX_STDERR_BYTES: usize = 64 * 1024;
/// Default cap on core instances per store. A Rust `wasm32-wasip2` component has 3 to 5
/// (its module plus the canonical-ABI glue); 32 leaves room for bigger toolchains.
pub(crate) const DEFAULT_MAX_INSTANCES: u32 = 32;
/// Default cap on tables per store (a Rust component has 2 to 4).
pub(crate) const DEFAULT_MAX_TABLES: u32 = 32;
/// Default cap on host handles a call's store holds at once (1024): the entries of its
/// wasmtime [`ResourceTable`] (pollables, streams, clock deadlines the host keeps for the
/// guest). They live in host memory, outside the plugin's memory cap; wasmtime's own
/// default is a million (hundreds of MiB per store). A Rust guest holds fewer than ten
/// (stdio streams, one pollable while it sleeps); each costs the host about 100-200 bytes,
/// so 1024 is at most a few hundred KiB per call.
pub(crate) const DEFAULT_MAX_HANDLES: u32 = 1024;

/// What one plugin may use per call: built from [`PluginLimits::default`] with the
/// `with_*` setters, read back through the getters.
///
/// `Default` is the host's conservative default; [`PluginLimits::unlimited`] is the
/// loud opposite, for benchmarks and trusted plugins only. Each setter states its
/// default; a setting added later gets a setter and a default, so code written against
/// these setters keeps compiling.
///
/// # Bounds
/// The setters check nothing and clamp nothing; the limits are checked against each
/// other where they meet. As the host's default limits
/// ([`PluginHostConfigBuilder::default_limits`](crate::PluginHostConfigBuilder::default_limits)),
/// every limit must be at most the same limit of the maximum
/// ([`PluginHostConfigBuilder::max_limits`](crate::PluginHostConfigBuilder::max_limits)),
/// else [`PluginHost::new`](crate::PluginHost::new) fails with
/// [`PluginErrorKind::Host`](crate::PluginErrorKind::Host) naming the limit. A manifest
/// asking for more than the maximum is refused at load with
/// [`PluginErrorKind::LimitTooHigh`](crate::PluginErrorKind::LimitTooHigh).
///
/// ```
/// use std::time::Duration;
/// use toolhost_plugin::limits::PluginLimits;
///
/// let limits = PluginLimits::default();
/// assert_eq!(limits.timeout(), Duration::from_secs(10));
/// assert_eq!(limits.memory_bytes(), 64 * 1024 * 1024);
/// assert_eq!(limits.fuel(), None);
///
/// let limits = limits.with_timeout(Duration::from_secs(2)).with_fuel(Some(1_000_000));
/// assert_eq!(limits.timeout(), Duration::from_secs(2));
/// assert_eq!(limits.fuel(), Some(1_000_000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimits {
    /// Wall time of one call, measured from when the call starts (instantiation
    /// included). A call also stops at the caller's deadline, if that comes first.
    pub(crate) timeout: Duration,
    /// Cap on the plugin's linear memory, in bytes. A refused grow becomes
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `memory (64 MiB)`.
    pub(crate) memory_bytes: u64,
    /// Fuel (roughly, wasm instructions) per call; `None` for no fuel limit.
    pub(crate) fuel: Option<u64>,
    /// Cap on the result's JSON text, in bytes.
    pub(crate) max_output_bytes: usize,
    /// Bytes of stdout and of stderr kept per call (the last ones).
    pub(crate) max_stderr_bytes: usize,
    /// Cap on core instances created in one call's store.
    pub(crate) max_instances: u32,
    /// Cap on tables created in one call's store (also used for memories).
    pub(crate) max_tables: u32,
    /// What the plugin may do through the host's imports: file calls, bytes read and
    /// written per call, lifetime write totals, log rate.
    pub(crate) imports: ImportLimits,
    /// Cap on host handles (entries of the store's resource table: pollables, streams)
    /// held at once. One more becomes
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `host handles (1024)`.
    pub(crate) max_handles: u32,
    /// What the plugin may send over HTTP per call (requests, body sizes, connect time).
    pub(crate) http: HttpLimits,
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
            max_handles: DEFAULT_MAX_HANDLES,
            http: HttpLimits::default(),
        }
    }
}

impl PluginLimits {
    /// Wall time of one call ([`with_timeout`](Self::with_timeout)).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Wall time of one call, measured from when the call starts (instantiation
    /// included). Default: 10 s. Over it the call fails with
    /// [`ToolError::TimedOut`](toolhost::registry::ToolError::TimedOut), within one epoch tick
    /// (10 ms); a call also stops at the caller's deadline, if that comes first. Bound: see
    /// [Bounds](Self#bounds).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Cap on the plugin's linear memory, in bytes ([`with_memory_bytes`](Self::with_memory_bytes)).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Cap on the plugin's linear memory, in bytes. Default: 64 MiB, enough for JSON
    /// tools over files of a few MiB, small enough that 64 concurrent calls fit in a few GiB.
    /// A refused grow becomes
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `memory (64 MiB)`.
    /// Bound: 4 GiB is all a 32-bit memory can address (pool slots are never sized above it);
    /// see also [Bounds](Self#bounds).
    #[must_use]
    pub fn with_memory_bytes(mut self, memory_bytes: u64) -> Self {
        self.memory_bytes = memory_bytes;
        self
    }

    /// Fuel per call, `None` for no fuel limit ([`with_fuel`](Self::with_fuel)).
    pub fn fuel(&self) -> Option<u64> {
        self.fuel
    }

    /// Fuel (roughly, wasm instructions) per call; `None` (the default) for no fuel
    /// limit. Out of fuel, the call fails with
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `fuel (N)`. A
    /// plugin with a fuel limit runs on engines that count fuel
    /// ([`Metering::Fuel`](crate::engine::Metering::Fuel)), built the first time one is needed.
    /// As a maximum, a `Some` refuses every manifest without a fuel limit.
    #[must_use]
    pub fn with_fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// Cap on the result's JSON text, in bytes ([`with_max_output_bytes`](Self::with_max_output_bytes)).
    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// Cap on the result's JSON text, in bytes. Default: 1 MiB (the registry's result cap
    /// is usually lower; this one stops a plugin before its text is parsed). A longer result
    /// fails the call with
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `output (1 MiB)`.
    #[must_use]
    pub fn with_max_output_bytes(mut self, max_output_bytes: usize) -> Self {
        self.max_output_bytes = max_output_bytes;
        self
    }

    /// Bytes of stdout and of stderr kept per call ([`with_max_stderr_bytes`](Self::with_max_stderr_bytes)).
    pub fn max_stderr_bytes(&self) -> usize {
        self.max_stderr_bytes
    }

    /// Bytes of stdout and of stderr kept per call. Default: 64 KiB each. Only the last
    /// bytes are kept (a panic message is written last); more is dropped, never an error.
    #[must_use]
    pub fn with_max_stderr_bytes(mut self, max_stderr_bytes: usize) -> Self {
        self.max_stderr_bytes = max_stderr_bytes;
        self
    }

    /// Cap on core instances in one call's store ([`with_max_instances`](Self::with_max_instances)).
    pub fn max_instances(&self) -> u32 {
        self.max_instances
    }

    /// Cap on core instances created in one call's store. Default: 32 (a Rust
    /// `wasm32-wasip2` component has 3 to 5). One more fails the instantiation, and the call.
    #[must_use]
    pub fn with_max_instances(mut self, max_instances: u32) -> Self {
        self.max_instances = max_instances;
        self
    }

    /// Cap on tables (and memories) in one call's store ([`with_max_tables`](Self::with_max_tables)).
    pub fn max_tables(&self) -> u32 {
        self.max_tables
    }

    /// Cap on tables created in one call's store, also used for memories. Default: 32 (a
    /// Rust component has 2 to 4). One more fails the instantiation, and the call.
    #[must_use]
    pub fn with_max_tables(mut self, max_tables: u32) -> Self {
        self.max_tables = max_tables;
        self
    }

    /// What the plugin may do through the host's imports ([`with_imports`](Self::with_imports)).
    pub fn imports(&self) -> &ImportLimits {
        &self.imports
    }

    /// What the plugin may do through the host's imports: file calls, bytes read and
    /// written per call, lifetime write totals, log rate. Default: [`ImportLimits::default`]
    /// (its setters give each default and what happens beyond it).
    #[must_use]
    pub fn with_imports(mut self, imports: ImportLimits) -> Self {
        self.imports = imports;
        self
    }

    /// Cap on host handles held at once ([`with_max_handles`](Self::with_max_handles)).
    pub fn max_handles(&self) -> u32 {
        self.max_handles
    }

    /// Cap on host handles (entries of the store's wasmtime `ResourceTable`: pollables,
    /// streams, clock deadlines) held at once. Default: 1024. They live in host memory,
    /// outside the plugin's memory cap (wasmtime's own default is a million, hundreds of MiB
    /// per store); a Rust guest holds fewer than ten, each costs the host 100-200 bytes. One
    /// more becomes
    /// [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded) `host handles (1024)`.
    #[must_use]
    pub fn with_max_handles(mut self, max_handles: u32) -> Self {
        self.max_handles = max_handles;
        self
    }

    /// What the plugin may send over HTTP per call ([`with_http`](Self::with_http)).
    pub fn http(&self) -> &HttpLimits {
        &self.http
    }

    /// What the plugin may send over HTTP per call (requests, body sizes, connect time).
    /// Default: [`HttpLimits::default`] (its setters give each default).
    #[must_use]
    pub fn with_http(mut self, http: HttpLimits) -> Self {
        self.http = http;
        self
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
            max_handles: 1_000_000,
            http: HttpLimits::unlimited(),
        }
    }

    /// The first limit of `self` above the same limit of `max`, as
    /// `(name, asked, max)`; `None` when every limit fits. A `None` fuel is unlimited, so
    /// it only fits a `None` maximum.
    pub(crate) fn first_above(
        &self,
        max: &PluginLimits,
    ) -> Option<(&'static str, LimitValue, LimitValue)> {
        let fuel = |f: Option<u64>| f.map_or(LimitValue::Unlimited, LimitValue::Count);
        let fuel_above = match (self.fuel, max.fuel) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(asked), Some(cap)) => asked > cap,
        };
        if self.timeout > max.timeout {
            Some((
                "timeout",
                LimitValue::Duration(self.timeout),
                LimitValue::Duration(max.timeout),
            ))
        } else if self.memory_bytes > max.memory_bytes {
            Some((
                "memory",
                LimitValue::Bytes(self.memory_bytes),
                LimitValue::Bytes(max.memory_bytes),
            ))
        } else if fuel_above {
            Some(("fuel", fuel(self.fuel), fuel(max.fuel)))
        } else if self.max_output_bytes > max.max_output_bytes {
            Some((
                "output",
                LimitValue::Bytes(self.max_output_bytes as u64),
                LimitValue::Bytes(max.max_output_bytes as u64),
            ))
        } else if self.max_stderr_bytes > max.max_stderr_bytes {
            Some((
                "stderr",
                LimitValue::Bytes(self.max_stderr_bytes as u64),
                LimitValue::Bytes(max.max_stderr_bytes as u64),
            ))
        } else if self.max_instances > max.max_instances {
            Some((
                "instances",
                LimitValue::Count(self.max_instances.into()),
                LimitValue::Count(max.max_instances.into()),
            ))
        } else if self.max_tables > max.max_tables {
            Some((
                "tables",
                LimitValue::Count(self.max_tables.into()),
                LimitValue::Count(max.max_tables.into()),
            ))
        } else if self.max_handles > max.max_handles {
            Some((
                "handles",
                LimitValue::Count(self.max_handles.into()),
                LimitValue::Count(max.max_handles.into()),
            ))
        } else {
            self.imports
                .first_above(&max.imports)
                .or_else(|| self.http.first_above(&max.http))
        }
    }
}

/// A call's wasmtime [`ResourceTable`], capped at `limits.max_handles` entries: a guest
/// that keeps creating pollables or streams without dropping them gets an error (a trap,
/// reported as [`ToolError::LimitExceeded`](toolhost::registry::ToolError::LimitExceeded))
/// instead of growing host memory outside its memory cap.
pub(crate) fn resource_table(limits: &PluginLimits) -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(usize::try_from(limits.max_handles).unwrap_or(usize::MAX));
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost::registry::format_bytes;
    use wasmtime::ResourceLimiter;

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
        let max = PluginLimits {
            memory_bytes: 256 << 20,
            ..PluginLimits::default()
        };
        assert_eq!(PluginLimits::default().first_above(&max), None);
        let asked = PluginLimits {
            memory_bytes: 512 << 20,
            ..PluginLimits::default()
        };
        assert_eq!(
            asked.first_above(&max),
            Some((
                "memory",
                LimitValue::Bytes(512 << 20),
                LimitValue::Bytes(256 << 20)
            ))
        );
        let capped = PluginLimits {
            fuel: Some(10),
            ..max
        };
        assert_eq!(
            PluginLimits::default().first_above(&capped),
            Some(("fuel", LimitValue::Unlimited, LimitValue::Count(10)))
        );
        let asked = PluginLimits {
            fuel: Some(5),
            ..PluginLimits::default()
        };
        assert_eq!(asked.first_above(&capped), None);
        let asked = PluginLimits {
            max_handles: DEFAULT_MAX_HANDLES + 1,
            ..PluginLimits::default()
        };
        assert_eq!(
            asked.first_above(&PluginLimits::default()),
            Some(("handles", LimitValue::Count(1025), LimitValue::Count(1024)))
        );
    }

    #[test]
    fn the_resource_table_is_capped_at_max_handles() {
        let limits = PluginLimits {
            max_handles: 2,
            ..PluginLimits::default()
        };
        let mut table = resource_table(&limits);
        table.push(1_u8).unwrap();
        table.push(2_u8).unwrap();
        assert!(matches!(
            table.push(3_u8),
            Err(wasmtime::component::ResourceTableError::Full)
        ));
    }
}
