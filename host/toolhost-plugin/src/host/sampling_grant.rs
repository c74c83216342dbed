//! [`SamplingGrant`]: how much one plugin may ask the client's model (`[grants] sampling`
//! of its manifest), below both the manifest reader and the call state that enforce it.

/// How much a plugin may sample (`[grants] sampling`): sampling spends the user's
/// tokens and money, so every call is bounded.
///
/// ```
/// use toolhost_plugin::manifest::SamplingGrant;
///
/// assert_eq!(SamplingGrant::default(), SamplingGrant { max_requests: 4, max_tokens: 1024 });
/// assert!(SamplingGrant::new(16, 32_768).is_ok());
/// assert_eq!(
///     SamplingGrant::new(17, 100).unwrap_err(),
///     "sampling.max_requests is 17; it must be 1 to 16 (requests per call)"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplingGrant {
    /// `sampling/createMessage` requests per tool call: default
    /// [`SamplingGrant::DEFAULT_MAX_REQUESTS`], at most [`SamplingGrant::MAX_REQUESTS`].
    pub max_requests: u32,
    /// `maxTokens` one request may ask for: default [`SamplingGrant::DEFAULT_MAX_TOKENS`],
    /// at most [`SamplingGrant::MAX_TOKENS`].
    pub max_tokens: u32,
}

impl SamplingGrant {
    /// Requests per call when the manifest does not say: 4.
    pub const DEFAULT_MAX_REQUESTS: u32 = 4;
    /// Tokens per request when the manifest does not say: 1,024.
    pub const DEFAULT_MAX_TOKENS: u32 = 1024;
    /// The most requests per call any manifest may ask for: 16.
    pub const MAX_REQUESTS: u32 = 16;
    /// The most tokens per request any manifest may ask for: 32,768.
    pub const MAX_TOKENS: u32 = 32_768;

    /// A grant of `max_requests` per call and `max_tokens` per request.
    ///
    /// # Errors
    /// A message naming the bound, for 0 or a value over its ceiling.
    pub fn new(max_requests: u32, max_tokens: u32) -> Result<Self, String> {
        if !(1..=Self::MAX_REQUESTS).contains(&max_requests) {
            return Err(format!(
                "sampling.max_requests is {max_requests}; it must be 1 to {} (requests per call)",
                Self::MAX_REQUESTS
            ));
        }
        if !(1..=Self::MAX_TOKENS).contains(&max_tokens) {
            return Err(format!(
                "sampling.max_tokens is {max_tokens}; it must be 1 to {} (tokens per request)",
                Self::MAX_TOKENS
            ));
        }
        Ok(Self {
            max_requests,
            max_tokens,
        })
    }
}

impl Default for SamplingGrant {
    fn default() -> Self {
        Self {
            max_requests: Self::DEFAULT_MAX_REQUESTS,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
        }
    }
}
