//! Turning what went wrong into an [`OciError`] that says what to do: timeouts, HTTP
//! statuses (with the registry's own message), reqwest, I/O and oci-client errors.

use oci_client::errors::OciDistributionError;
use toolhost::error::ErrorChain;

use super::RegistryClient;
use crate::error::Operation;
use crate::OciError;

impl RegistryClient {
    pub(super) fn timed_out(&self, what: &str) -> OciError {
        OciError::TimedOut {
            registry: self.reference.registry().to_owned(),
            what: what.to_owned(),
            after: self.options.timeout,
        }
    }

    /// A body that did not end within its deadline.
    pub(super) fn body_timed_out(&self, what: &str, deadline: std::time::Duration) -> OciError {
        OciError::TimedOut {
            registry: self.reference.registry().to_owned(),
            what: what.to_owned(),
            after: deadline,
        }
    }

    pub(super) fn status_error(
        &self,
        status: u16,
        operation: Operation,
        what: &str,
        detail: Option<String>,
    ) -> OciError {
        let registry = self.reference.registry().to_owned();
        let repository = self.reference.repository().to_owned();
        match status {
            401 => OciError::Unauthorized {
                registry,
                repository,
                operation,
                had_credentials: !self.options.credentials.is_anonymous(),
                detail,
            },
            403 => OciError::Forbidden {
                registry,
                repository,
                operation,
                detail,
            },
            404 => OciError::NotFound {
                registry,
                what: what.to_owned(),
                detail,
            },
            status => OciError::Status {
                registry,
                status,
                what: what.to_owned(),
                detail,
            },
        }
    }

    pub(super) fn map_reqwest(&self, err: reqwest::Error, what: &str) -> OciError {
        if let Some(status) = err.status() {
            return self.status_error(status.as_u16(), Operation::Pull, what, None);
        }
        if err.is_timeout() {
            return self.timed_out(what);
        }
        if err.is_redirect() {
            return OciError::Protocol {
                registry: self.reference.registry().to_owned(),
                what: what.to_owned(),
                message: ErrorChain(&err).to_string(),
            };
        }
        OciError::Unreachable {
            registry: self.reference.registry().to_owned(),
            message: ErrorChain(&err).to_string(),
        }
    }

    pub(super) fn map_io(&self, err: std::io::Error, what: &str) -> OciError {
        match err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
        {
            Some(inner) if inner.is_timeout() => self.timed_out(what),
            _ => OciError::Unreachable {
                registry: self.reference.registry().to_owned(),
                message: ErrorChain(&err).to_string(),
            },
        }
    }

    pub(super) fn map_error(
        &self,
        err: OciDistributionError,
        operation: Operation,
        what: &str,
    ) -> OciError {
        let registry = self.reference.registry().to_owned();
        match err {
            OciDistributionError::RequestError(err) => match err.status() {
                Some(status) => self.status_error(status.as_u16(), operation, what, None),
                None if err.is_timeout() => self.timed_out(what),
                None if err.is_redirect() => OciError::Protocol {
                    registry,
                    what: what.to_owned(),
                    message: ErrorChain(&err).to_string(),
                },
                None => OciError::Unreachable {
                    registry,
                    message: ErrorChain(&err).to_string(),
                },
            },
            OciDistributionError::UnauthorizedError { .. } => {
                self.status_error(401, operation, what, None)
            }
            OciDistributionError::AuthenticationFailure(reason) => {
                self.status_error(401, operation, what, registry_message(reason.as_bytes()))
            }
            OciDistributionError::ServerError { code, message, .. } => {
                self.status_error(code, operation, what, registry_message(message.as_bytes()))
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                use oci_client::errors::OciErrorCode as Code;
                let detail = Some(
                    envelope
                        .errors
                        .iter()
                        .map(|e| e.message.clone())
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                let code = envelope.errors.first().map(|e| &e.code);
                let status = match code {
                    Some(Code::Unauthorized) => 401,
                    Some(Code::Denied) => 403,
                    Some(
                        Code::NameUnknown
                        | Code::ManifestUnknown
                        | Code::BlobUnknown
                        | Code::NotFound,
                    ) => 404,
                    Some(Code::Toomanyrequests) => 429,
                    _ => 400,
                };
                self.status_error(status, operation, what, detail)
            }
            OciDistributionError::IoError(err) => self.map_io(err, what),
            other => OciError::Protocol {
                registry,
                what: what.to_owned(),
                message: other.to_string(),
            },
        }
    }
}

/// The registry's error message from a body: the distribution spec's `errors[].message`
/// when it is one, else the first 200 characters of printable text.
pub(super) fn registry_message(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        message: String,
    }
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(body) {
        let text: Vec<String> = envelope
            .errors
            .into_iter()
            .map(|e| e.message)
            .filter(|m| !m.is_empty())
            .collect();
        return (!text.is_empty()).then(|| text.join("; "));
    }
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}
