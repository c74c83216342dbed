//! The policy in force, swapped whole on reload, and every principal's quotas.

use std::sync::{Arc, PoisonError, RwLock};

use super::quota::{PrincipalQuota, Quotas};
use super::{Policy, Principal, Profile, QuotaLimits};

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
    quotas: Quotas,
}

impl LivePolicy {
    /// `policy` in force.
    pub fn new(policy: Policy) -> Self {
        Self {
            current: RwLock::new(Arc::new(policy)),
            quotas: Quotas::default(),
        }
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
        self.quotas.update(|key, scopes| {
            let client = (key != "-").then_some(key);
            policy
                .profile_for(&Principal::new(client, scopes))
                .map(|profile| *profile.quota())
                .unwrap_or_default()
        });
    }

    /// The profile `principal` gets and its quota state.
    ///
    /// # Errors
    /// [`PolicyRefusal::NoProfile`] when the policy gives it none.
    pub fn admit(
        &self,
        principal: &Principal<'_>,
    ) -> Result<(Profile, Arc<PrincipalQuota>), PolicyRefusal> {
        let policy = self.current();
        let profile = policy
            .profile_for(principal)
            .ok_or_else(|| PolicyRefusal::NoProfile {
                principal: principal.key().to_owned(),
            })?;
        let quota = self
            .quotas
            .principal(principal.key(), principal.scopes, profile.quota());
        Ok((profile.clone(), quota))
    }

    /// The quota state of `principal` when the policy gives it a profile (no profile
    /// cloned: the HTTP layer's per-request check).
    ///
    /// # Errors
    /// [`PolicyRefusal::NoProfile`] when the policy gives it none.
    pub fn quota_of(
        &self,
        principal: &Principal<'_>,
    ) -> Result<Arc<PrincipalQuota>, PolicyRefusal> {
        let policy = self.current();
        let limits: QuotaLimits = *policy
            .profile_for(principal)
            .ok_or_else(|| PolicyRefusal::NoProfile {
                principal: principal.key().to_owned(),
            })?
            .quota();
        Ok(self
            .quotas
            .principal(principal.key(), principal.scopes, &limits))
    }
}
