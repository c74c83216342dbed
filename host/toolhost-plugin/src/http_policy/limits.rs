//! [`HttpLimits`]: how much HTTP one plugin call may do (requests, body sizes, connect
//! time), with the defaults and the check of a manifest's values against the host's maximum.

use std::time::Duration;

use crate::limit_value::LimitValue;

/// Default of [`HttpLimits::max_requests`]: 16 requests per call, enough for a few
/// redirects and a paginated API; more is a crawler, not a tool call.
pub const DEFAULT_MAX_HTTP_REQUESTS: u32 = 16;
/// Default of [`HttpLimits::max_request_bytes`]: 1 MiB of request body.
pub const DEFAULT_MAX_HTTP_REQUEST_BYTES: u64 = 1024 * 1024;
/// Default of [`HttpLimits::max_response_bytes`]: 8 MiB of response body, an eighth of
/// the default plugin memory (the body is copied into it).
pub const DEFAULT_MAX_HTTP_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Default of [`HttpLimits::connect_timeout`]: 5 s to resolve, connect and finish the
/// TLS handshake (the call's own deadline applies too, and usually first).
pub const DEFAULT_HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one plugin may do over HTTP per call. Part of
/// [`PluginLimits`](crate::PluginLimits); a manifest may lower each in `[limits]`
/// (`max_http_requests`, `max_http_request_bytes`, `max_http_response_bytes`,
/// `http_connect_timeout_ms`), not raise it above the host's maximum.
///
/// ```
/// use toolhost_plugin::HttpLimits;
///
/// let limits = HttpLimits::default();
/// assert_eq!(limits.max_requests, 16);
/// assert_eq!(limits.max_response_bytes, 8 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Requests per call; one more gets `connection-limit-reached`.
    pub max_requests: u32,
    /// Bytes of one request's body; more gets `HTTP-request-body-size`.
    pub max_request_bytes: u64,
    /// Bytes of one response's body; a larger `content-length` gets
    /// `HTTP-response-body-size`, and reading past the cap fails.
    pub max_response_bytes: u64,
    /// Time to resolve, connect and handshake (also bounded by the call's deadline).
    pub connect_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_requests: DEFAULT_MAX_HTTP_REQUESTS,
            max_request_bytes: DEFAULT_MAX_HTTP_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_HTTP_RESPONSE_BYTES,
            connect_timeout: DEFAULT_HTTP_CONNECT_TIMEOUT,
        }
    }
}

impl HttpLimits {
    /// No limit worth the name.
    ///
    /// # Sandbox
    /// Benchmarks and trusted plugins only: a plugin may then send requests without end
    /// within its call's deadline.
    pub fn unlimited() -> Self {
        Self {
            max_requests: u32::MAX,
            max_request_bytes: u64::MAX,
            max_response_bytes: u64::MAX,
            connect_timeout: Duration::from_secs(24 * 60 * 60),
        }
    }

    /// The first limit of `self` above the same limit of `max`, as
    /// `(manifest key, asked, max)`.
    pub(crate) fn first_above(
        &self,
        max: &HttpLimits,
    ) -> Option<(&'static str, LimitValue, LimitValue)> {
        if self.max_requests > max.max_requests {
            Some((
                "max_http_requests",
                LimitValue::Count(u64::from(self.max_requests)),
                LimitValue::Count(u64::from(max.max_requests)),
            ))
        } else if self.max_request_bytes > max.max_request_bytes {
            Some((
                "max_http_request_bytes",
                LimitValue::Bytes(self.max_request_bytes),
                LimitValue::Bytes(max.max_request_bytes),
            ))
        } else if self.max_response_bytes > max.max_response_bytes {
            Some((
                "max_http_response_bytes",
                LimitValue::Bytes(self.max_response_bytes),
                LimitValue::Bytes(max.max_response_bytes),
            ))
        } else if self.connect_timeout > max.connect_timeout {
            Some((
                "http_connect_timeout_ms",
                LimitValue::Duration(self.connect_timeout),
                LimitValue::Duration(max.connect_timeout),
            ))
        } else {
            None
        }
    }
}
