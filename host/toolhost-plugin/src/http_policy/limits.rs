//! [`HttpLimits`]: how much HTTP one plugin call may do (requests, body sizes, connect
//! time), with the defaults and the check of a manifest's values against the host's maximum.

use std::time::Duration;

use crate::limit_value::LimitValue;

/// Default of [`HttpLimits::max_requests`]: 16 requests per call, enough for a few
/// redirects and a paginated API; more is a crawler, not a tool call.
pub(crate) const DEFAULT_MAX_HTTP_REQUESTS: u32 = 16;
/// Default of [`HttpLimits::max_request_bytes`]: 1 MiB of request body.
pub(crate) const DEFAULT_MAX_HTTP_REQUEST_BYTES: u64 = 1024 * 1024;
/// Default of [`HttpLimits::max_response_bytes`]: 8 MiB of response body, an eighth of
/// the default plugin memory (the body is copied into it).
pub(crate) const DEFAULT_MAX_HTTP_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Default of [`HttpLimits::connect_timeout`]: 5 s to resolve, connect and finish the
/// TLS handshake (the call's own deadline applies too, and usually first).
pub(crate) const DEFAULT_HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What one plugin may do over HTTP per call. Part of
/// [`PluginLimits`](crate::limits::PluginLimits); a manifest may lower each in `[limits]`
/// (`max_http_requests`, `max_http_request_bytes`, `max_http_response_bytes`,
/// `http_connect_timeout_ms`), not raise it above the host's maximum.
///
/// ```
/// use toolhost_plugin::limits::HttpLimits;
///
/// let limits = HttpLimits::default();
/// assert_eq!(limits.max_requests(), 16);
/// assert_eq!(limits.max_response_bytes(), 8 * 1024 * 1024);
/// assert_eq!(limits.with_max_requests(4).max_requests(), 4);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// Requests per call; one more gets `connection-limit-reached`.
    pub(crate) max_requests: u32,
    /// Bytes of one request's body; more gets `HTTP-request-body-size`.
    pub(crate) max_request_bytes: u64,
    /// Bytes of one response's body; a larger `content-length` gets
    /// `HTTP-response-body-size`, and reading past the cap fails.
    pub(crate) max_response_bytes: u64,
    /// Time to resolve, connect and handshake (also bounded by the call's deadline).
    pub(crate) connect_timeout: Duration,
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
    /// Requests per call ([`with_max_requests`](Self::with_max_requests)).
    pub fn max_requests(&self) -> u32 {
        self.max_requests
    }

    /// Requests per call (manifest `max_http_requests`). Default: 16, enough for a few
    /// redirects and a paginated API. One more gets `connection-limit-reached`.
    #[must_use]
    pub fn with_max_requests(mut self, max_requests: u32) -> Self {
        self.max_requests = max_requests;
        self
    }

    /// Bytes of one request's body ([`with_max_request_bytes`](Self::with_max_request_bytes)).
    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    /// Bytes of one request's body (manifest `max_http_request_bytes`). Default: 1 MiB.
    /// More gets `HTTP-request-body-size`.
    #[must_use]
    pub fn with_max_request_bytes(mut self, max_request_bytes: u64) -> Self {
        self.max_request_bytes = max_request_bytes;
        self
    }

    /// Bytes of one response's body ([`with_max_response_bytes`](Self::with_max_response_bytes)).
    pub fn max_response_bytes(&self) -> u64 {
        self.max_response_bytes
    }

    /// Bytes of one response's body (manifest `max_http_response_bytes`). Default: 8 MiB, an
    /// eighth of the default plugin memory (the body is copied into it). A larger
    /// `content-length` gets `HTTP-response-body-size`, and reading past the cap fails.
    #[must_use]
    pub fn with_max_response_bytes(mut self, max_response_bytes: u64) -> Self {
        self.max_response_bytes = max_response_bytes;
        self
    }

    /// Time to resolve, connect and handshake ([`with_connect_timeout`](Self::with_connect_timeout)).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// Time to resolve, connect and finish the TLS handshake (manifest
    /// `http_connect_timeout_ms`). Default: 5 s; the call's own deadline applies too, and
    /// usually first. Over it the request fails with `connection-timeout`.
    #[must_use]
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
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
