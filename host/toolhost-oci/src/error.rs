//! [`OciError`]: why a pull or push failed, said for an operator, with what to do.

use std::path::PathBuf;
use std::time::Duration;

use toolhost::registry::{format_bytes, format_duration};

use super::ReferenceError;

/// Which registry operation an error happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Fetching a plugin.
    Pull,
    /// Publishing a plugin.
    Push,
}

impl Operation {
    fn verb(self) -> &'static str {
        match self {
            Operation::Pull => "pull from",
            Operation::Push => "push to",
        }
    }
}

/// Why a pull or push failed. Each message names the registry (or file) and says what
/// to do instead. A failed pull leaves nothing behind in the plugin directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OciError {
    /// The reference is not a valid `oci://` reference.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The credentials could not be found or read.
    #[error("{message}")]
    Credentials {
        /// What is wrong and what to do.
        message: String,
    },
    /// The registry could not be reached (twice).
    #[error("cannot reach the registry {registry}: {message}; is it running, and are the host and port right?")]
    Unreachable {
        /// `HOST[:PORT]`.
        registry: String,
        /// The connection error.
        message: String,
    },
    /// The registry did not answer in time (twice).
    #[error("the registry {registry} did not answer within {} while fetching {what}; try again later, or raise --registry-timeout", format_duration(*after))]
    TimedOut {
        /// `HOST[:PORT]`.
        registry: String,
        /// What was being fetched or sent.
        what: String,
        /// The time limit.
        after: Duration,
    },
    /// A response body longer than this host ever reads for its kind (a token response):
    /// reading stopped at the cap.
    #[error("the registry {registry} sent a {what} longer than {}, the most this host reads for one; reading stopped there. No registry needs that much: it is misconfigured or hostile; do not pull from it, and tell its operator", format_bytes(*limit))]
    BodyTooLarge {
        /// `HOST[:PORT]`.
        registry: String,
        /// Which body (`token response`).
        what: String,
        /// The cap.
        limit: u64,
    },
    /// The whole pull or push took longer than its time limit.
    #[error("the {} {registry} did not finish within {} (the time limit of a whole pull or push); the registry is too slow or holds the connection open: try again later, or raise --registry-deadline", operation.verb(), format_duration(*after))]
    DeadlinePassed {
        /// `HOST[:PORT]`.
        registry: String,
        /// Pull or push.
        operation: Operation,
        /// The time limit.
        after: Duration,
    },
    /// 401: credentials are needed, or the ones given were refused.
    #[error("the registry {registry} refused to let us {} {repository} without valid credentials (401 Unauthorized){}; {}", operation.verb(), detail_text(detail.as_deref()), if *had_credentials { "check the user name and password (--registry-user, --registry-password-env, or docker login)" } else { "log in with `docker login` (read from ~/.docker/config.json), or pass --registry-user and --registry-password-env" })]
    Unauthorized {
        /// `HOST[:PORT]`.
        registry: String,
        /// The repository.
        repository: String,
        /// Pull or push.
        operation: Operation,
        /// Whether credentials were sent.
        had_credentials: bool,
        /// The registry's own words, if any.
        detail: Option<String>,
    },
    /// 403: the credentials are valid but may not do this.
    #[error("the registry {registry} denied access to {repository} (403 Forbidden){}; these credentials may not {} it: ask its owner for access, or use another account", detail_text(detail.as_deref()), operation.verb())]
    Forbidden {
        /// `HOST[:PORT]`.
        registry: String,
        /// The repository.
        repository: String,
        /// Pull or push.
        operation: Operation,
        /// The registry's own words, if any.
        detail: Option<String>,
    },
    /// 404: no such repository, tag or digest (or blob).
    #[error("{what} was not found in the registry {registry} (404 Not Found){}; check the repository and tag (`host push` publishes one)", detail_text(detail.as_deref()))]
    NotFound {
        /// `HOST[:PORT]`.
        registry: String,
        /// What was asked for.
        what: String,
        /// The registry's own words, if any.
        detail: Option<String>,
    },
    /// Any other HTTP error status.
    #[error(
        "the registry {registry} answered {status} to {what}{}",
        detail_text(detail.as_deref())
    )]
    Status {
        /// `HOST[:PORT]`.
        registry: String,
        /// The HTTP status.
        status: u16,
        /// What was asked for.
        what: String,
        /// The registry's own words, if any.
        detail: Option<String>,
    },
    /// The manifest (or index) is not what a plugin artifact is.
    #[error("{reference}: {reason}")]
    NotAPlugin {
        /// The reference pulled.
        reference: String,
        /// What it is instead.
        reason: String,
    },
    /// A blob or manifest is larger than allowed: declared so, or it kept coming past its
    /// declared size (reading stopped there).
    #[error("{reference}: the {what} is {}, over the limit of {}{}", size_text(*size, *endless), format_bytes(*limit), if *endless { "; reading stopped there (the registry sent more than it declared)" } else { "; raise --max-plugin-bytes if you trust it" })]
    TooLarge {
        /// The reference pulled.
        reference: String,
        /// `component`, `manifest`, ...
        what: String,
        /// Its size (declared, or read so far).
        size: u64,
        /// The limit.
        limit: u64,
        /// Whether it was sent past its declared size.
        endless: bool,
    },
    /// Content whose digest is not the one it was asked for (or declared).
    #[error("{reference}: the registry sent a {what} whose digest is {actual}, not {expected}; it was discarded. The registry (or something between) is serving wrong content: do not trust it, try again later")]
    DigestMismatch {
        /// The reference pulled.
        reference: String,
        /// `component`, `manifest`, ...
        what: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The `application/wasm` layer is not a WebAssembly component.
    #[error("{reference}: {reason}")]
    NotAComponent {
        /// The reference (or file).
        reference: String,
        /// What it is instead, and how to make a component.
        reason: String,
    },
    /// A local file could not be read or written.
    #[error("{}: {message}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        message: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// `--verify-key` was given, but the registry holds no signature of the manifest.
    #[error("{reference} ({digest}) is not signed: the registry has no signature tag {tag}; sign it with `host sign {reference} --key KEY.pem` (or cosign), or pull without --verify-key if you do not need a signer")]
    Unsigned {
        /// The reference pulled.
        reference: String,
        /// The manifest digest that should be signed.
        digest: String,
        /// The tag looked for (`sha256-HEX.sig`).
        tag: String,
    },
    /// Signatures were found, but none verifies: each reason names a signature and what
    /// failed (another key, another digest, malformed, too large).
    #[error("{reference} ({digest}): no signature verifies with the key(s) given, so nothing was installed: {}", reasons.join("; "))]
    SignatureRefused {
        /// The reference pulled.
        reference: String,
        /// The manifest digest that should be signed.
        digest: String,
        /// Why each signature failed.
        reasons: Vec<String>,
    },
    /// The signing key could not sign.
    #[error("cannot sign: {message}")]
    Signing {
        /// What failed.
        message: String,
    },
    /// The registry answered something the protocol does not allow.
    #[error("the registry {registry} answered {what} with something invalid: {message}")]
    Protocol {
        /// `HOST[:PORT]`.
        registry: String,
        /// What was asked for.
        what: String,
        /// What was wrong.
        message: String,
    },
}

impl OciError {
    /// A stable snake_case name of the kind, for logs and tests.
    pub fn kind(&self) -> &'static str {
        match self {
            OciError::Reference(_) => "reference",
            OciError::Credentials { .. } => "credentials",
            OciError::Unreachable { .. } => "unreachable",
            OciError::TimedOut { .. } => "timed_out",
            OciError::BodyTooLarge { .. } => "body_too_large",
            OciError::DeadlinePassed { .. } => "deadline_passed",
            OciError::Unauthorized { .. } => "unauthorized",
            OciError::Forbidden { .. } => "forbidden",
            OciError::NotFound { .. } => "not_found",
            OciError::Status { .. } => "status",
            OciError::NotAPlugin { .. } => "not_a_plugin",
            OciError::TooLarge { .. } => "too_large",
            OciError::DigestMismatch { .. } => "digest_mismatch",
            OciError::NotAComponent { .. } => "not_a_component",
            OciError::Io { .. } => "io",
            OciError::Protocol { .. } => "protocol",
            OciError::Unsigned { .. } => "unsigned",
            OciError::SignatureRefused { .. } => "signature_refused",
            OciError::Signing { .. } => "signing",
        }
    }

    /// Whether trying once more may help (a connection failure, a time-out, a 5xx or
    /// 429 answer).
    pub fn is_transient(&self) -> bool {
        match self {
            OciError::Unreachable { .. } | OciError::TimedOut { .. } => true,
            OciError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

fn detail_text(detail: Option<&str>) -> String {
    match detail {
        Some(detail) if !detail.is_empty() => format!(" ({detail})"),
        _ => String::new(),
    }
}

fn size_text(size: u64, endless: bool) -> String {
    if endless {
        format!("more than {}", format_bytes(size))
    } else {
        format_bytes(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_say_what_to_do() {
        let err = OciError::Unauthorized {
            registry: "r:1".into(),
            repository: "t/g".into(),
            operation: Operation::Pull,
            had_credentials: false,
            detail: None,
        };
        assert_eq!(
            err.to_string(),
            "the registry r:1 refused to let us pull from t/g without valid credentials (401 Unauthorized); log in with `docker login` (read from ~/.docker/config.json), or pass --registry-user and --registry-password-env"
        );
        assert!(!err.is_transient());
        let err = OciError::Status {
            registry: "r".into(),
            status: 503,
            what: "x".into(),
            detail: None,
        };
        assert!(err.is_transient());
        let err = OciError::DeadlinePassed {
            registry: "r:1".into(),
            operation: Operation::Push,
            after: Duration::from_secs(600),
        };
        assert!(
            err.to_string()
                .starts_with("the push to r:1 did not finish within 600s "),
            "{err}"
        );
        assert!(!err.is_transient());
    }
}
