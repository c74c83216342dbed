//! The `--state` address: a redis:// or rediss:// URL, checked to carry no password.

/// A checked `--state` address: `redis://HOST[:PORT][/DB]` or `rediss://…` (TLS),
/// never carrying a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateUrl(String);

/// Why a `--state` address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateUrlError {
    /// Not a redis:// or rediss:// URL.
    #[error("--state {0:?} is not a redis://HOST:PORT/DB or rediss://HOST:PORT/DB address")]
    NotRedis(String),
    /// The URL carries a password (it would show in `ps` and shell history).
    #[error("--state must not carry a password (it would show in the process list and shell history); give it with --state-password-file FILE or the environment variable TOOLHOST_STATE_PASSWORD")]
    PasswordInUrl,
}

impl StateUrl {
    /// Checks `url`: a redis:// or rediss:// address without a password (a user
    /// name is allowed: a Redis ACL user).
    ///
    /// # Errors
    /// [`StateUrlError`] saying what was wrong.
    pub fn parse(url: &str) -> Result<Self, StateUrlError> {
        let parsed = redis::parse_redis_url(url)
            .filter(|parsed| matches!(parsed.scheme(), "redis" | "rediss"))
            .filter(|parsed| parsed.host_str().is_some_and(|host| !host.is_empty()))
            .ok_or_else(|| StateUrlError::NotRedis(url.to_owned()))?;
        if parsed.password().is_some() {
            return Err(StateUrlError::PasswordInUrl);
        }
        Ok(StateUrl(url.to_owned()))
    }

    /// The address as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
