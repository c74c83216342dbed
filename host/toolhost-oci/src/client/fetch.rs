//! Bounded transfers from the registry: the manifest GET, and blob downloads into a
//! [`Sink`], each under a size cap and a deadline that grows with the size, retried once
//! on a transient error. Every request of a pull is ours (reqwest, with our redirect
//! policy), so every body is read under a cap: error answers' too.

use std::io::{Seek, Write};
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::manifest::OciDescriptor;
use sha2::{Digest, Sha256};

use super::errors::registry_message;
use super::{hex, sha256_text, PulledFile, RegistryClient, MIN_DOWNLOAD_BYTES_PER_SECOND};
use crate::error::Operation;
use crate::layout::{self, ACCEPTED_MANIFESTS, MAX_OCI_MANIFEST_BYTES};
use crate::{OciError, OciReference};

impl RegistryClient {
    /// GETs a manifest (capped at [`MAX_OCI_MANIFEST_BYTES`]) and checks its digest
    /// against the reference's and the `Docker-Content-Digest` header; tried twice.
    pub(super) async fn get_manifest(
        &self,
        reference: &OciReference,
    ) -> Result<(Vec<u8>, String, Option<String>), OciError> {
        retry_once(&format!("the manifest of {reference}"), || {
            self.get_manifest_once(reference)
        })
        .await
    }

    async fn get_manifest_once(
        &self,
        reference: &OciReference,
    ) -> Result<(Vec<u8>, String, Option<String>), OciError> {
        let what = format!("the manifest of {reference}");
        let version = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!(
            "{}/v2/{}/manifests/{version}",
            self.base_url(),
            reference.repository()
        );
        let request = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, ACCEPTED_MANIFESTS.join(", "));
        let request = self.pull_authorization().await?.apply(request);
        let response = tokio::time::timeout(self.options.timeout, request.send())
            .await
            .map_err(|_| self.timed_out(&what))?
            .map_err(|err| self.map_reqwest(err, &what))?;
        let status = response.status();
        let header_digest = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or(value).trim().to_owned());
        if !status.is_success() {
            let detail = registry_message(&self.error_body(response).await);
            return Err(self.status_error(status.as_u16(), Operation::Pull, &what, detail));
        }
        let deadline = self.deadline(MAX_OCI_MANIFEST_BYTES);
        let mut body = Vec::new();
        let read = tokio::time::timeout(deadline, async {
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|err| self.map_reqwest(err, &what))?;
                if (body.len() + chunk.len()) as u64 > MAX_OCI_MANIFEST_BYTES {
                    return Err(OciError::TooLarge {
                        reference: reference.to_string(),
                        what: "OCI manifest".into(),
                        size: MAX_OCI_MANIFEST_BYTES,
                        limit: MAX_OCI_MANIFEST_BYTES,
                        endless: true,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(())
        })
        .await;
        read.map_err(|_| self.body_timed_out(&what, deadline))??;
        let digest = sha256_text(&body);
        if let Some(expected) = reference.digest() {
            if expected != digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.to_string(),
                    what: "manifest".into(),
                    expected: expected.to_owned(),
                    actual: digest,
                });
            }
        }
        if let Some(header) = header_digest.filter(|header| header.starts_with("sha256:")) {
            if header != digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.to_string(),
                    what: "manifest (against its Docker-Content-Digest header)".into(),
                    expected: header,
                    actual: digest,
                });
            }
        }
        Ok((body, digest, content_type))
    }

    /// Downloads a layer into a new temporary file in `dir` named after `file`.
    pub(super) async fn fetch_to_file(
        &self,
        layer: &OciDescriptor,
        file: &str,
        limit: u64,
        dir: &Path,
    ) -> Result<PulledFile, OciError> {
        let io = |message: &str, error: std::io::Error| OciError::Io {
            path: dir.to_owned(),
            message: message.to_owned(),
            error,
        };
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{file}."))
            .suffix(".part")
            .tempfile_in(dir)
            .map_err(|err| {
                io(
                    "cannot create a temporary file in the plugin directory",
                    err,
                )
            })?;
        let size = self.fetch(layer, file, limit, temp.as_file_mut()).await?;
        temp.as_file()
            .sync_all()
            .map_err(|err| io("cannot write the downloaded file", err))?;
        Ok(PulledFile {
            file: temp,
            digest: layer.digest.clone(),
            size,
        })
    }

    /// Downloads a blob into `sink`: refused before reading when it declares more than
    /// `limit`; read as it arrives, stopped as soon as it exceeds its declared size,
    /// checked against its digest at the end. Tried twice (`sink` is emptied between).
    pub(super) async fn fetch(
        &self,
        layer: &OciDescriptor,
        what: &str,
        limit: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let reference = self.reference.to_string();
        let not_a_plugin = |reason: String| OciError::NotAPlugin {
            reference: reference.clone(),
            reason,
        };
        let declared = layout::size_of(layer).map_err(not_a_plugin)?;
        if declared > limit {
            return Err(OciError::TooLarge {
                reference: reference.clone(),
                what: what.to_owned(),
                size: declared,
                limit,
                endless: false,
            });
        }
        // The digest goes into the blob's URL: a sha256 digest, nothing else.
        crate::reference::check_digest(&layer.digest)
            .map_err(|reason| not_a_plugin(format!("its {what} layer has a {reason}")))?;
        // Only the registry's own blob URL is fetched, never the alternate `urls` a
        // manifest may list: they would let the registry point this host at any address.
        self.fetch_once(layer, what, declared, sink).await
    }

    async fn fetch_once(
        &self,
        layer: &OciDescriptor,
        what: &str,
        declared: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                sink.reset().map_err(|error| OciError::Io {
                    path: what.into(),
                    message: "cannot restart the download".into(),
                    error,
                })?;
            }
            match self.fetch_attempt(layer, what, declared, sink).await {
                Err(err) if attempt == 1 && err.is_transient() => {
                    tracing::warn!("{err}; trying once more");
                }
                other => return other,
            }
        }
    }

    async fn fetch_attempt(
        &self,
        layer: &OciDescriptor,
        what: &str,
        declared: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let reference = self.reference.to_string();
        let description = format!("the {what} of {reference}");
        let deadline = self.deadline(declared);
        let url = format!(
            "{}/v2/{}/blobs/{}",
            self.base_url(),
            self.reference.repository(),
            layer.digest
        );
        let request = self.pull_authorization().await?.apply(self.http.get(&url));
        let response = tokio::time::timeout(self.options.timeout, request.send())
            .await
            .map_err(|_| self.timed_out(&description))?
            .map_err(|err| self.map_reqwest(err, &description))?;
        let status = response.status();
        if !status.is_success() {
            let detail = registry_message(&self.error_body(response).await);
            return Err(self.status_error(status.as_u16(), Operation::Pull, &description, detail));
        }
        let outcome = tokio::time::timeout(deadline, async {
            let mut stream = response.bytes_stream();
            let mut hasher = Sha256::new();
            let mut total: u64 = 0;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|err| self.map_reqwest(err, &description))?;
                total += chunk.len() as u64;
                if total > declared {
                    return Err(OciError::TooLarge {
                        reference: reference.clone(),
                        what: what.to_owned(),
                        size: declared,
                        limit: declared,
                        endless: true,
                    });
                }
                hasher.update(&chunk);
                sink.write(&chunk).map_err(|error| OciError::Io {
                    path: what.into(),
                    message: "cannot write the download".into(),
                    error,
                })?;
                if let Some(progress) = &self.options.progress {
                    progress(what, total, declared);
                }
            }
            if total < declared {
                return Err(OciError::Protocol {
                    registry: self.reference.registry().to_owned(),
                    what: description.clone(),
                    message: format!("it ended after {total} of its {declared} bytes"),
                });
            }
            let actual = format!("sha256:{}", hex(&hasher.finalize()));
            if actual != layer.digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.clone(),
                    what: what.to_owned(),
                    expected: layer.digest.clone(),
                    actual,
                });
            }
            Ok(total)
        })
        .await;
        outcome.map_err(|_| self.body_timed_out(&description, deadline))?
    }

    /// How long a download of `bytes` may take: the timeout plus `bytes` at
    /// [`MIN_DOWNLOAD_BYTES_PER_SECOND`].
    pub(super) fn deadline(&self, bytes: u64) -> Duration {
        self.options.timeout + Duration::from_secs(bytes / MIN_DOWNLOAD_BYTES_PER_SECOND)
    }
}

/// Where a download goes, restartable for the retry.
pub(crate) trait Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    fn reset(&mut self) -> std::io::Result<()>;
}

impl Sink for Vec<u8> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.extend_from_slice(bytes);
        Ok(())
    }
    fn reset(&mut self) -> std::io::Result<()> {
        self.clear();
        Ok(())
    }
}

impl Sink for std::fs::File {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_all(bytes)
    }
    fn reset(&mut self) -> std::io::Result<()> {
        self.set_len(0)?;
        self.rewind()
    }
}

/// Runs `attempt` once more when it fails with a transient error, logging why.
pub(super) async fn retry_once<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, OciError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, OciError>>,
{
    match attempt().await {
        Err(err) if err.is_transient() => {
            tracing::warn!("{what}: {err}; trying once more");
            attempt().await
        }
        other => other,
    }
}
