//! A plugin's code and its compile tiers: the code it was loaded with (quick or
//! optimized), pre-instantiated in each engine shard once a call needs it there, and the
//! optimized code swapped in later for quick code
//! ([`CompileTiers::QuickFirst`](crate::CompileTiers::QuickFirst)).

use std::sync::{Arc, OnceLock};

use wasmtime::component::Component;
use wasmtime::Engine;

use crate::cache;
use crate::engine::Shard;
use crate::world::{Version, WorldPre};

/// Pre-instantiates a plugin in engine shard `n`: called the first time a call of the
/// plugin lands on a shard other than the first, so a start loads each plugin into one
/// engine only.
pub(crate) type PrepareShard = Box<dyn Fn(usize) -> wasmtime::Result<WorldPre> + Send + Sync>;

/// A component pre-instantiated as `first` in the first of `engines` (one per shard, at
/// least one), and how to pre-instantiate it in the others.
pub(crate) struct ShardPres {
    pub first: WorldPre,
    pub engines: Vec<Engine>,
    pub prepare: PrepareShard,
}

impl ShardPres {
    /// `component` (compiled for the first engine of `shards`) pre-instantiated there for
    /// `version`'s world, and how to pre-instantiate it in the other shards: from its
    /// artifact, the first time a call lands there.
    pub(crate) fn new(
        shards: Arc<[Shard]>,
        component: Component,
        version: Version,
    ) -> wasmtime::Result<Self> {
        let first = WorldPre::new(&shards[0].linker, &component, version)?;
        let engines = shards.iter().map(|shard| shard.engine.clone()).collect();
        let prepare: PrepareShard = Box::new(move |n| {
            let shard = &shards[n];
            let artifact = component.serialize()?;
            let component = cache::deserialize(&shard.engine, &artifact)?;
            WorldPre::new(&shard.linker, &component, version)
        });
        Ok(Self {
            first,
            engines,
            prepare,
        })
    }
}

/// One build of a plugin's code, pre-instantiated in each engine shard once a call has
/// needed it there (the first shard's when it is made).
struct Code {
    pres: Box<[OnceLock<WorldPre>]>,
    prepare: PrepareShard,
}

impl Code {
    /// The code of `first` (pre-instantiated in shard 0) for `shards` shards.
    fn new(first: WorldPre, prepare: PrepareShard, shards: usize) -> Self {
        let pres: Box<[OnceLock<WorldPre>]> = (0..shards.max(1)).map(|_| OnceLock::new()).collect();
        let _ = pres[0].set(first);
        Self { pres, prepare }
    }

    /// The component pre-instantiated in `shard`, prepared on first use.
    fn pre(&self, shard: usize) -> wasmtime::Result<&WorldPre> {
        if let Some(pre) = self.pres[shard].get() {
            return Ok(pre);
        }
        let pre = (self.prepare)(shard)?;
        // Two calls may prepare it at once; the first set wins.
        Ok(self.pres[shard].get_or_init(|| pre))
    }
}

/// The code a plugin was loaded with, and the optimized code once swapped in for it.
pub(crate) struct Tiers {
    /// The code it was loaded with.
    loaded: Code,
    /// The optimized code, once swapped in for quick code: every instance made after
    /// that uses it.
    optimized: OnceLock<Code>,
    /// Engine shards.
    shards: usize,
}

impl Tiers {
    /// The code of `pres`, for `shards` shards.
    pub(crate) fn new(pres: ShardPres, shards: usize) -> Self {
        let ShardPres { first, prepare, .. } = pres;
        Self {
            loaded: Code::new(first, prepare, shards),
            optimized: OnceLock::new(),
            shards,
        }
    }

    /// Swaps in `optimized` for the code the plugin was loaded with; `false`, changing
    /// nothing, when code was already swapped in.
    pub(crate) fn swap_in(&self, optimized: ShardPres) -> bool {
        let ShardPres { first, prepare, .. } = optimized;
        self.optimized
            .set(Code::new(first, prepare, self.shards))
            .is_ok()
    }

    /// Whether optimized code has been swapped in.
    pub(crate) fn runs_optimized(&self) -> bool {
        self.optimized.get().is_some()
    }

    /// The component pre-instantiated in `shard`: of the optimized code (when
    /// `optimized` and it was swapped in) or of the code the plugin was loaded with.
    pub(crate) fn pre(&self, shard: usize, optimized: bool) -> wasmtime::Result<&WorldPre> {
        match self.optimized.get() {
            Some(code) if optimized => code.pre(shard),
            _ => self.loaded.pre(shard),
        }
    }
}
