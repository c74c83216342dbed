//! Every principal's quota state ([`Quotas`]): a map in 16 shards, each behind its own
//! lock, bounded by sweeping idle states (see the [module docs](super)).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::principal::PrincipalQuota;
use super::shared::SharedQuotas;
use super::{QuotaLimits, QuotasFull, MAX_PRINCIPALS};
use crate::policy::Principal;

/// How many shards the principals' map has.
const SHARDS: usize = 16;
/// A shard is not swept below this many states.
const MIN_SWEEP: usize = 64;
/// A full shard is swept again at most this often (a new principal refused meanwhile).
const FULL_SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Days since the epoch, UTC.
fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        / 86_400
}

#[derive(Debug)]
struct Shard {
    map: HashMap<String, Arc<PrincipalQuota>>,
    /// Swept when it holds this many.
    next_sweep: usize,
    /// When it was last swept while full.
    full_sweep: Option<Instant>,
}

/// Every principal's quota state, in a sharded map: finding one takes a read lock on
/// one shard of 16, never a lock shared by all principals. Bounded (see the module
/// doc): at most [`MAX_PRINCIPALS`] states by default.
#[derive(Debug)]
pub struct Quotas {
    shards: Vec<RwLock<Shard>>,
    hasher: std::collections::hash_map::RandomState,
    max: usize,
    per_shard: usize,
    /// The counter the rate quotas are also counted in ([`Quotas::share`]).
    shared: std::sync::OnceLock<SharedQuotas>,
}

impl Default for Quotas {
    fn default() -> Self {
        Self::with_max(MAX_PRINCIPALS)
    }
}

impl Quotas {
    /// A map keeping at most `max` principals' states (rounded down to a multiple of
    /// its 16 shards, at least one per shard).
    pub fn with_max(max: usize) -> Self {
        let per_shard = (max / SHARDS).max(1);
        Self {
            shards: (0..SHARDS)
                .map(|_| {
                    RwLock::new(Shard {
                        map: HashMap::new(),
                        next_sweep: MIN_SWEEP.min(per_shard),
                        full_sweep: None,
                    })
                })
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
            max: per_shard * SHARDS,
            per_shard,
            shared: std::sync::OnceLock::new(),
        }
    }

    /// Counts the principals' calls per minute, bytes written per day and outgoing
    /// HTTP requests per minute in `shared` too, so their limits hold across every process given the same counter
    /// (`--state`); set it before serving: only the states made after it count there.
    /// `false` (and nothing changes) when a counter was set already.
    pub fn share(&self, shared: SharedQuotas) -> bool {
        self.shared.set(shared).is_ok()
    }

    /// The shared counter, if any ([`Quotas::share`]).
    pub fn shared(&self) -> Option<&SharedQuotas> {
        self.shared.get()
    }

    fn shard(&self, key: &str) -> &RwLock<Shard> {
        let index = usize::try_from(self.hasher.hash_one(key) % SHARDS as u64).unwrap_or(0);
        &self.shards[index]
    }

    /// The state of `principal` (kept under [`Principal::key`]), made with `limits`
    /// if it has none yet.
    ///
    /// # Errors
    /// [`QuotasFull`] when it is new and the map is full of states within their
    /// windows.
    pub fn principal(
        &self,
        principal: &Principal<'_>,
        limits: &QuotaLimits,
    ) -> Result<Arc<PrincipalQuota>, QuotasFull> {
        self.principal_at(principal, limits, Instant::now())
    }

    /// [`Quotas::principal`], idleness judged at `now`.
    pub(crate) fn principal_at(
        &self,
        principal: &Principal<'_>,
        limits: &QuotaLimits,
        now: Instant,
    ) -> Result<Arc<PrincipalQuota>, QuotasFull> {
        let key = principal.key();
        let shard = self.shard(&key);
        if let Some(found) = shard
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key.as_ref())
        {
            return Ok(Arc::clone(found));
        }
        let mut shard = shard.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = shard.map.get(key.as_ref()) {
            return Ok(Arc::clone(found));
        }
        if shard.map.len() >= shard.next_sweep {
            let full = shard.map.len() >= self.per_shard;
            let swept_lately = full
                && shard
                    .full_sweep
                    .is_some_and(|at| now.saturating_duration_since(at) < FULL_SWEEP_EVERY);
            if !swept_lately {
                let today = today();
                // Only the map holds it (no session, no call): dropping it is safe
                // when it is idle. Others cannot clone it meanwhile: the shard is
                // write-locked.
                shard
                    .map
                    .retain(|_, quota| Arc::strong_count(quota) > 1 || !quota.idle(now, today));
                shard.next_sweep = (shard.map.len() * 2).max(MIN_SWEEP).min(self.per_shard);
                shard.full_sweep = (shard.map.len() >= self.per_shard).then_some(now);
            }
            if shard.map.len() >= self.per_shard {
                return Err(QuotasFull { max: self.max });
            }
        }
        let quota = Arc::new(PrincipalQuota::new(
            limits,
            principal,
            self.shared.get().cloned(),
        ));
        shard.map.insert(key.into_owned(), Arc::clone(&quota));
        Ok(quota)
    }

    /// The state of `principal`, if it has one.
    pub fn get(&self, principal: &Principal<'_>) -> Option<Arc<PrincipalQuota>> {
        let key = principal.key();
        self.shard(&key)
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .get(key.as_ref())
            .map(Arc::clone)
    }

    /// How many principals' states it keeps now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .map
                    .len()
            })
            .sum()
    }

    /// Whether it keeps none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets every known principal's limits to what `limits_of` gives for it
    /// (`None`: no profile), stamped with policy `generation` (a reload).
    pub fn update(
        &self,
        generation: u64,
        limits_of: impl Fn(&Principal<'_>) -> Option<QuotaLimits>,
    ) {
        for shard in &self.shards {
            for quota in shard
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .map
                .values()
            {
                let limits = limits_of(&quota.principal());
                quota.set_limits(&limits.unwrap_or_default());
                quota.stamp(generation, limits.is_some());
            }
        }
    }
}
