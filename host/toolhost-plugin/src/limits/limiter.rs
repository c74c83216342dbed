//! [`Limiter`]: the store's resource limiter (memory, tables, instances), which also
//! remembers the first memory grow it refused.

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

use super::PluginLimits;

/// The store's [`ResourceLimiter`]: wasmtime's [`StoreLimits`] plus a record of the
/// first memory grow it refused, so a guest that aborts after a refused grow (Rust
/// guests do: the allocation error handler traps) is reported as hitting the memory
/// limit rather than as a crash.
#[derive(Debug)]
pub(crate) struct Limiter {
    inner: StoreLimits,
    refused: Option<usize>,
}

impl Limiter {
    /// A limiter for `limits`.
    pub(crate) fn new(limits: &PluginLimits) -> Self {
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
    pub(crate) fn refused_grow(&self) -> Option<usize> {
        self.refused
    }

    /// Forgets a refused grow (a reused instance starts a new call).
    pub(crate) fn reset(&mut self) {
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
