//! The policy in force, swapped whole on reload, and every principal's quotas.
//!
//! A request's check ([`LivePolicy::quota_of`]) takes no lock shared by all principals:
//! it finds the principal's quota state in one shard of the quota map, and that state
//! carries whether the policy in force (its generation, an atomic) gives it a profile.
//! Only a principal seen for the first time, or first since a reload raced with it,
//! reads the policy itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::quota::{PrincipalQuota, Quotas};
use super::{Policy, Principal, Profile};

/// Why a principal is refused by the policy in force (HTTP 403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyRefusal {
    /// No `[[principal]]` rule matches it and the policy has no `default` profile.
    #[error("Forbidden: the server's policy gives the client {principal:?} no profile; ask the operator to map it to one (a [[principal]] rule or a [profile.default])")]
    NoProfile {
        /// The client's name (`-` for none).
        principal: String,
    },
    /// A new principal while the quota map is full of states within their windows
    /// (HTTP 503, `Retry-After`: [`super::quota::RETRY_FULL_SECS`]).
    #[error(transparent)]
    Full(#[from] super::quota::QuotasFull),
}

/// The policy in force and every principal's quota state: share it (`Arc`) between the
/// HTTP layer (403 and 429 answers) and what builds each session's tools.
///
/// ```
/// use toolhost_mcp::policy::{LivePolicy, Policy, Principal};
///
/// let live = LivePolicy::new(Policy::parse("[profile.default]\nquota = { calls_per_minute = 1 }").unwrap());
/// let (profile, quota) = live.admit(&Principal::new(Some("alice"), &[])).unwrap();
/// assert_eq!(profile.name(), "default");
/// let _call = quota.begin_call().unwrap();
/// assert!(quota.begin_call().is_err(), "one call a minute");
/// ```
#[derive(Debug)]
pub struct LivePolicy {
    current: RwLock<Arc<Policy>>,
    /// Raised after each replacement: quota states stamped with an older one are
    /// checked against the policy again.
    generation: AtomicU64,
    quotas: Quotas,
}

impl LivePolicy {
    /// `policy` in force.
    pub fn new(policy: Policy) -> Self {
        Self::with_quotas(policy, Quotas::default())
    }

    /// `policy` in force, its principals' states kept in `quotas` (e.g.
    /// [`Quotas::with_max`]).
    pub fn with_quotas(policy: Policy, quotas: Quotas) -> Self {
        Self {
            current: RwLock::new(Arc::new(policy)),
            generation: AtomicU64::new(1),
            quotas,
        }
    }

    /// The principals' quota states.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<Policy> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `policy` in force: new sessions and the quotas of every principal follow
    /// it from now on (what a session was offered is for its owner to update).
    pub fn replace(&self, policy: Policy) {
        let policy = Arc::new(policy);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&policy);
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.quotas.update(generation, |principal| {
            policy
                .profile_for(principal)
                .map(|profile| *profile.quota())
        });
    }

    /// The profile `principal` gets and its quota state.
    ///
    /// # Errors
    /// [`PolicyRefusal::NoProfile`] when the policy gives it none,
    /// [`PolicyRefusal::Full`] when it is new and the quota map is full.
    pub fn admit(
        &self,
        principal: &Principal<'_>,
    ) -> Result<(Profile, Arc<PrincipalQuota>), PolicyRefusal> {
        let generation = self.generation.load(Ordering::Acquire);
        let policy = self.current();
        let found = policy.profile_for(principal);
        let quota = self.stamped(principal, generation, found)?;
        let profile = found.cloned().ok_or_else(|| refusal(principal))?;
        Ok((profile, quota))
    }

    /// The quota state of `principal` when the policy gives it a profile: the HTTP
    /// layer's per-request check, on the principal's own state (no policy read, no
    /// lock shared by all principals, once the principal is known).
    ///
    /// # Errors
    /// [`PolicyRefusal::NoProfile`] when the policy gives it none,
    /// [`PolicyRefusal::Full`] when it is new and the quota map is full.
    pub fn quota_of(
        &self,
        principal: &Principal<'_>,
    ) -> Result<Arc<PrincipalQuota>, PolicyRefusal> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(known) = self.quotas.get(principal) {
            match known.allowed_at(generation) {
                Some(true) => return Ok(known),
                Some(false) => return Err(refusal(principal)),
                None => {}
            }
        }
        let policy = self.current();
        self.stamped(principal, generation, policy.profile_for(principal))
    }

    /// The quota state of `principal`, its limits set from `profile` and stamped with
    /// `generation` (read before the policy was); refused without a profile.
    fn stamped(
        &self,
        principal: &Principal<'_>,
        generation: u64,
        profile: Option<&Profile>,
    ) -> Result<Arc<PrincipalQuota>, PolicyRefusal> {
        let Some(profile) = profile else {
            if let Some(known) = self.quotas.get(principal) {
                known.stamp(generation, false);
            }
            return Err(refusal(principal));
        };
        let quota = self.quotas.principal(principal, profile.quota())?;
        if quota.allowed_at(generation) != Some(true) {
            quota.set_limits(profile.quota());
            quota.stamp(generation, true);
        }
        Ok(quota)
    }
}

fn refusal(principal: &Principal<'_>) -> PolicyRefusal {
    PolicyRefusal::NoProfile {
        principal: principal.client().unwrap_or("-").to_owned(),
    }
}
