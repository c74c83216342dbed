//! Outbound HTTP from a plugin, through the standard `wasi:http/outgoing-handler` (the
//! `wasip2` crate's bindings): a small blocking client that follows redirects.
//!
//! The host sends a request only to the hosts the plugin's manifest asks for and the
//! operator allows:
//!
//! ```toml
//! # weather.toml, next to weather.wasm
//! [grants]
//! http = ["api.weather.example"]   # https unless "http://" is written; see plugins/README.md
//! ```
//!
//! ```no_run
//! use toolhost_sdk::{http, ToolError};
//!
//! fn forecast(city: &str) -> Result<serde_json::Value, ToolError> {
//!     let response = http::Request::get(format!("https://api.weather.example/v1/forecast?city={city}"))
//!         .header("accept", "application/json")
//!         .send()?;                       // an HttpError becomes a ToolError for the model
//!     if response.status != 200 {
//!         return Err(ToolError::failed(format!("the weather service answered {}", response.status)));
//!     }
//!     Ok(response.json()?)
//! }
//! ```
//!
//! Every refusal is an [`HttpError`] whose message is written for the model: a host
//! outside the grant ([`HttpError::Denied`]), an address the host never connects to
//! ([`HttpError::AddressForbidden`]), a limit of the host ([`HttpError::TooManyRequests`],
//! [`HttpError::RequestTooLarge`], [`HttpError::ResponseTooLarge`]), a timeout. Redirects
//! (301, 302, 303, 307, 308) are followed up to [`MAX_REDIRECTS`] times; each one is a
//! new request the host checks again, and a redirect to another host drops the
//! `authorization` and `cookie` headers.
//!
//! Any other WASI HTTP client works as well (the host implements the standard
//! interface); this one exists so a plugin needs no extra crate.

use std::fmt;
use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method,
    OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

use crate::ToolError;

/// Redirects followed per [`Request::send`].
pub const MAX_REDIRECTS: usize = 5;
/// Bytes written to the request body per stream call (the WASI limit).
const WRITE_CHUNK: usize = 4096;
/// Bytes asked for per read of the response body.
const READ_CHUNK: u64 = 64 * 1024;

/// Why a request failed. `Display` is written for the model; the conversion into
/// [`ToolError`] lets a handler use `?`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL is not an `http://` or `https://` URL this client can send.
    #[error("\"{url}\" is not a usable URL: {reason}")]
    InvalidUrl {
        /// The URL (cut to 200 characters).
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The host refused the request: the URL's host is not in the plugin's HTTP grant.
    #[error("the request to {target} was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts")]
    Denied {
        /// `scheme://host:port` of the refused request.
        target: String,
    },
    /// The host refused to connect: the name resolves to a private, loopback or
    /// link-local address (or another the host never connects to).
    #[error("the request to {target} was refused: its address is on a private or local network, which this tool may not reach")]
    AddressForbidden {
        /// `scheme://host:port` of the refused request.
        target: String,
    },
    /// The call already sent as many requests as the host allows per call.
    #[error("this tool call reached the host's limit of HTTP requests per call; ask for less at once (one page, one item)")]
    TooManyRequests,
    /// The request body is over the host's limit.
    #[error("the request body is larger than the host allows ({})", limit_text(*limit))]
    RequestTooLarge {
        /// The limit in bytes, when the host said.
        limit: Option<u64>,
    },
    /// The response body is over the host's limit.
    #[error("the response is larger than the host allows ({}); ask for less (a smaller page, a narrower query)", limit_text(*limit))]
    ResponseTooLarge {
        /// The limit in bytes, when the host said.
        limit: Option<u64>,
    },
    /// Connecting, or waiting for the answer, took too long.
    #[error("the request to {target} timed out; the service may be slow or down, try again later or ask for less")]
    Timeout {
        /// `scheme://host:port`.
        target: String,
    },
    /// The host name does not resolve.
    #[error("the host name of {target} does not resolve; check the spelling of the host")]
    Dns {
        /// `scheme://host:port`.
        target: String,
    },
    /// More than [`MAX_REDIRECTS`] redirects.
    #[error("{target} redirected more than {MAX_REDIRECTS} times; the address is probably wrong")]
    TooManyRedirects {
        /// The first URL's `scheme://host:port`.
        target: String,
    },
    /// Any other failure (connection refused, TLS, protocol), with the WASI error.
    #[error("the request to {target} failed: {message}")]
    Failed {
        /// `scheme://host:port`.
        target: String,
        /// What went wrong.
        message: String,
    },
}

fn limit_text(limit: Option<u64>) -> String {
    match limit {
        Some(bytes) => format!("at most {bytes} bytes"),
        None => "a limit the host did not state".into(),
    }
}

/// A URL the model gave is its argument; everything else is the tool failing.
impl From<HttpError> for ToolError {
    fn from(error: HttpError) -> Self {
        match error {
            HttpError::InvalidUrl { .. } => ToolError::InvalidArguments(error.to_string()),
            _ => ToolError::Failed(error.to_string()),
        }
    }
}

/// A parsed `http(s)://authority/path?query` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    https: bool,
    /// `host[:port]` as written (lower-cased host).
    authority: String,
    /// `/path?query` (at least `/`), fragment dropped.
    path: String,
}

impl Url {
    fn parse(text: &str) -> Result<Url, HttpError> {
        let invalid = |reason: &str| HttpError::InvalidUrl {
            url: text.chars().take(200).collect(),
            reason: reason.to_owned(),
        };
        let text = text.trim();
        let (https, rest) = if let Some(rest) = strip_prefix_ignore_case(text, "https://") {
            (true, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(text, "http://") {
            (false, rest)
        } else {
            return Err(invalid("it must start with https:// or http://"));
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.is_empty() {
            return Err(invalid("it has no host"));
        }
        if authority.contains('@') {
            return Err(invalid(
                "it carries a user name or password; send credentials in a header instead",
            ));
        }
        if authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid("its host holds spaces or control characters"));
        }
        let tail = tail.split('#').next().unwrap_or_default();
        if tail.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                "its path holds spaces or control characters; percent-encode them (%20)",
            ));
        }
        let path = if tail.is_empty() {
            "/".to_owned()
        } else if tail.starts_with('?') {
            format!("/{tail}")
        } else {
            tail.to_owned()
        };
        Ok(Url {
            https,
            authority: authority.to_ascii_lowercase(),
            path,
        })
    }

    /// `scheme://authority`, for messages (never the path: it may carry secrets).
    fn origin(&self) -> String {
        format!(
            "{}://{}",
            if self.https { "https" } else { "http" },
            self.authority
        )
    }

    /// The URL a `Location` header points to, relative to `self`.
    fn join(&self, location: &str) -> Result<Url, HttpError> {
        let location = location.trim();
        if location.contains("://") {
            return Url::parse(location);
        }
        let scheme = if self.https { "https:" } else { "http:" };
        if let Some(rest) = location.strip_prefix("//") {
            return Url::parse(&format!("{scheme}//{rest}"));
        }
        let path = if location.starts_with('/') {
            location.to_owned()
        } else if location.starts_with('?') {
            let base = self.path.split('?').next().unwrap_or("/");
            format!("{base}{location}")
        } else {
            let base = self.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{location}")
        };
        Url::parse(&format!("{scheme}//{}{path}", self.authority))
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// An HTTP response, its body read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The URL that answered (after redirects).
    pub url: String,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    ///
    /// # Errors
    /// [`ToolError::Failed`] saying the service did not answer JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        serde_json::from_slice(&self.body).map_err(|err| {
            ToolError::failed(format!(
                "the service at {} did not answer the expected JSON ({err})",
                Url::parse(&self.url).map_or_else(|_| String::new(), |u| u.origin())
            ))
        })
    }
}

/// An HTTP request to build and [`send`](Request::send).
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
}

impl Request {
    /// A request with `method` (`GET`, `POST`, ...) to `url`.
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        Self {
            method: method.to_ascii_uppercase(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request with `body`.
    pub fn post(url: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        Self::new("POST", url).body(body)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and `content-type: application/json`.
    pub fn json<T: serde::Serialize>(self, value: &T) -> Self {
        let body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json").body(body)
    }

    /// Gives up connecting, and waiting for the first byte of the answer, after
    /// `timeout` (the host's limits and the call's deadline apply anyway).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sends the request, following redirects, and reads the whole response.
    ///
    /// # Errors
    /// An [`HttpError`] for the model (see the [module](self) docs).
    pub fn send(self) -> Result<Response, HttpError> {
        let first = Url::parse(&self.url)?;
        let mut url = first.clone();
        let mut method = self.method.clone();
        let mut body = self.body.clone();
        let mut headers = self.headers.clone();
        for _ in 0..=MAX_REDIRECTS {
            let response = send_once(&method, &url, &headers, &body, self.timeout)?;
            let location = match response.status {
                301 | 302 | 303 | 307 | 308 => response.header("location").map(str::to_owned),
                _ => None,
            };
            let Some(location) = location else {
                return Ok(response);
            };
            let next = url.join(&location)?;
            if response.status == 303 || (matches!(response.status, 301 | 302) && method == "POST")
            {
                method = "GET".into();
                body.clear();
                headers.retain(|(name, _)| {
                    !name.eq_ignore_ascii_case("content-type")
                        && !name.eq_ignore_ascii_case("content-length")
                });
            }
            if next.authority != url.authority || next.https != url.https {
                // Credentials are for the origin they were written for.
                headers.retain(|(name, _)| {
                    !name.eq_ignore_ascii_case("authorization")
                        && !name.eq_ignore_ascii_case("cookie")
                        && !name.eq_ignore_ascii_case("proxy-authorization")
                });
            }
            url = next;
        }
        Err(HttpError::TooManyRedirects {
            target: first.origin(),
        })
    }
}

/// `GET url`.
///
/// # Errors
/// As [`Request::send`].
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// The [`HttpError`] for a WASI error code on a request to `url`.
fn from_code(code: &ErrorCode, url: &Url) -> HttpError {
    let target = url.origin();
    match code {
        ErrorCode::HttpRequestDenied => HttpError::Denied { target },
        ErrorCode::DestinationIpProhibited => HttpError::AddressForbidden { target },
        ErrorCode::ConnectionLimitReached => HttpError::TooManyRequests,
        ErrorCode::HttpRequestBodySize(limit) => HttpError::RequestTooLarge { limit: *limit },
        ErrorCode::HttpResponseBodySize(limit) => HttpError::ResponseTooLarge { limit: *limit },
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::HttpResponseTimeout
        | ErrorCode::DnsTimeout => HttpError::Timeout { target },
        ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => HttpError::Dns { target },
        ErrorCode::ConnectionRefused => HttpError::Failed {
            target,
            message: "the connection was refused; the service may be down".into(),
        },
        ErrorCode::TlsCertificateError => HttpError::Failed {
            target,
            message: "its TLS certificate is not valid for that host".into(),
        },
        other => HttpError::Failed {
            target,
            message: format!("{other:?}"),
        },
    }
}

fn method_of(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_owned()),
    }
}

/// One request, no redirects.
fn send_once(
    method: &str,
    url: &Url,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Option<Duration>,
) -> Result<Response, HttpError> {
    let failed = |message: String| HttpError::Failed {
        target: url.origin(),
        message,
    };
    let mut entries: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.as_bytes().to_vec()))
        .collect();
    // A declared length lets the host refuse a body over its limit before sending, and
    // spares the server a chunked body.
    if (!body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH"))
        && !entries.iter().any(|(name, _)| name == "content-length")
    {
        entries.push(("content-length".into(), body.len().to_string().into_bytes()));
    }
    let fields = Fields::from_list(&entries)
        .map_err(|err| failed(format!("a header is not allowed or not valid ({err:?})")))?;
    let request = OutgoingRequest::new(fields);
    let invalid = |what: &str| HttpError::InvalidUrl {
        url: format!("{}{}", url.origin(), url.path)
            .chars()
            .take(200)
            .collect(),
        reason: format!("its {what} is not valid"),
    };
    request
        .set_method(&method_of(method))
        .map_err(|()| invalid("method"))?;
    request
        .set_scheme(Some(if url.https {
            &Scheme::Https
        } else {
            &Scheme::Http
        }))
        .map_err(|()| invalid("scheme"))?;
    request
        .set_authority(Some(&url.authority))
        .map_err(|()| invalid("host"))?;
    request
        .set_path_with_query(Some(&url.path))
        .map_err(|()| invalid("path"))?;
    let options = timeout.map(|timeout| {
        let options = RequestOptions::new();
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let _ = options.set_connect_timeout(Some(nanos));
        let _ = options.set_first_byte_timeout(Some(nanos));
        options
    });
    let outgoing = request
        .body()
        .map_err(|()| failed("the request body was taken twice".into()))?;
    // Send first, then write the body: the host reads it while sending.
    let future =
        outgoing_handler::handle(request, options).map_err(|code| from_code(&code, url))?;
    if let Err(code) = write_body(outgoing, body) {
        return Err(match code {
            Some(code) => from_code(&code, url),
            // The host closes the body when it refuses the request (a declared length
            // over its limit, a denied host): the reason is in the response, so wait
            // for it rather than report a bare broken pipe.
            None => match response_of(&future) {
                Some(Err(code)) => from_code(&code, url),
                _ => failed("writing the request body failed".into()),
            },
        });
    }
    let incoming = match response_of(&future) {
        Some(Ok(response)) => response,
        Some(Err(code)) => return Err(from_code(&code, url)),
        None => return Err(failed("the response was lost".into())),
    };
    let status = incoming.status();
    let headers = incoming
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    let body = incoming
        .consume()
        .map_err(|()| failed("the response body was taken twice".into()))?;
    let body = read_body(body).map_err(|code| match code {
        Some(code) => from_code(&code, url),
        None => failed("reading the response body failed (the connection broke, or the body is larger than the host allows)".into()),
    })?;
    Ok(Response {
        status,
        headers,
        body,
        url: format!("{}{}", url.origin(), url.path),
    })
}

/// Waits for the answer to a sent request: `None` when it was lost (taken twice, or the
/// host dropped it).
fn response_of(future: &FutureIncomingResponse) -> Option<Result<IncomingResponse, ErrorCode>> {
    future.subscribe().block();
    future.get()?.ok()
}

/// Writes `body` into `outgoing` and finishes it. `Err(Some(code))` when the host says
/// why it failed.
fn write_body(outgoing: OutgoingBody, body: &[u8]) -> Result<(), Option<ErrorCode>> {
    {
        let stream = outgoing.write().map_err(|()| None)?;
        for chunk in body.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(stream_code)?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(Some)
}

/// Reads `body` to its end.
fn read_body(body: IncomingBody) -> Result<Vec<u8>, Option<ErrorCode>> {
    let mut bytes = Vec::new();
    {
        let stream = body.stream().map_err(|()| None)?;
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(err) => return Err(stream_code(err)),
            }
        }
    }
    drop(IncomingBody::finish(body));
    Ok(bytes)
}

fn stream_code(err: StreamError) -> Option<ErrorCode> {
    match err {
        StreamError::LastOperationFailed(err) => wasip2::http::types::http_error_code(&err),
        StreamError::Closed => None,
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn urls_parse_into_origin_and_path() {
        let u = url("HTTPS://Api.Example.org:8443/v1/x?q=1#frag");
        assert!(u.https);
        assert_eq!(u.authority, "api.example.org:8443");
        assert_eq!(u.path, "/v1/x?q=1");
        assert_eq!(u.origin(), "https://api.example.org:8443");
        assert_eq!(url("http://x.test").path, "/");
        assert_eq!(url("http://x.test?a=b").path, "/?a=b");
        for (bad, reason) in [
            ("ftp://x.test/", "it must start with https:// or http://"),
            ("x.test/a", "it must start with https:// or http://"),
            ("https:///a", "it has no host"),
            (
                "https://u:p@x.test/",
                "it carries a user name or password; send credentials in a header instead",
            ),
            (
                "https://x.test/a b",
                "its path holds spaces or control characters; percent-encode them (%20)",
            ),
        ] {
            match Url::parse(bad) {
                Err(HttpError::InvalidUrl { reason: got, .. }) => assert_eq!(got, reason, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn redirect_locations_resolve_against_the_current_url() {
        let base = url("https://a.test/dir/page?x=1");
        assert_eq!(
            base.join("https://b.test/z").unwrap().to_string(),
            "https://b.test/z"
        );
        assert_eq!(
            base.join("//c.test/y").unwrap().to_string(),
            "https://c.test/y"
        );
        assert_eq!(
            base.join("/root").unwrap().to_string(),
            "https://a.test/root"
        );
        assert_eq!(
            base.join("other").unwrap().to_string(),
            "https://a.test/dir/other"
        );
        assert_eq!(
            base.join("?y=2").unwrap().to_string(),
            "https://a.test/dir/page?y=2"
        );
        assert!(base.join("gopher://x").is_err());
    }

    #[test]
    fn wasi_codes_become_errors_for_the_model() {
        let u = url("https://evil.test/secret?token=abc");
        let denied = from_code(&ErrorCode::HttpRequestDenied, &u);
        assert_eq!(
            denied.to_string(),
            "the request to https://evil.test was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts"
        );
        assert!(!denied.to_string().contains("token"));
        assert_eq!(
            from_code(&ErrorCode::HttpResponseBodySize(Some(1024)), &u).to_string(),
            "the response is larger than the host allows (at most 1024 bytes); ask for less (a smaller page, a narrower query)"
        );
        assert_eq!(
            from_code(&ErrorCode::ConnectionLimitReached, &u),
            HttpError::TooManyRequests
        );
        assert!(matches!(
            from_code(&ErrorCode::DestinationIpProhibited, &u),
            HttpError::AddressForbidden { .. }
        ));
        assert!(matches!(
            ToolError::from(Url::parse("nope").unwrap_err()),
            ToolError::InvalidArguments(_)
        ));
        assert!(matches!(ToolError::from(denied), ToolError::Failed(_)));
    }
}
