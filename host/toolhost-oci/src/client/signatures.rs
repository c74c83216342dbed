//! cosign signatures in the registry: finding and verifying the signature of a resolved
//! plugin (`sha256-HEX.sig`), bounded like the rest of the pull, and publishing one.

use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;

use super::token::Authorization;
use super::{sha256_text, RegistryClient, Resolved};
use crate::error::Operation;
use crate::layout::{self, Fetched};
use crate::signing::{
    base64_text, signature_tag, verify_one, Payload, PublicKey, SigningKey, Verified,
    MAX_PAYLOAD_BYTES, MAX_SIGNATURE_LAYERS, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE,
};
use crate::OciError;

/// The config media type of a signature manifest (cosign writes an image config).
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// What `host sign` published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Signed {
    /// The manifest digest signed.
    pub digest: String,
    /// The tag the signature is stored under (`sha256-HEX.sig`).
    pub tag: String,
    /// The fingerprint of the key that signed.
    pub key: String,
    /// How many signatures the tag holds now (ours and those there before).
    pub signatures: usize,
}

impl RegistryClient {
    /// Finds the cosign signatures of `resolved` (the tag `sha256-HEX.sig` in the same
    /// repository) and returns the first that verifies with one of `keys` and names
    /// exactly `resolved.digest`.
    ///
    /// # Sandbox
    /// The signature manifest is read under the manifest cap, at most
    /// [`MAX_SIGNATURE_LAYERS`] layers are looked at (more are refused), each payload is
    /// refused when it declares more than [`MAX_PAYLOAD_BYTES`], read under that cap and
    /// checked against its digest; all within the client's deadline.
    ///
    /// # Errors
    /// [`OciError::Unsigned`] when there is no signature, [`OciError::SignatureRefused`]
    /// naming why each signature failed, and the registry's errors.
    pub async fn verify_signature(
        &self,
        resolved: &Resolved,
        keys: &[PublicKey],
    ) -> Result<Verified, OciError> {
        self.within(Operation::Pull, self.verify_signature_now(resolved, keys))
            .await
    }

    async fn verify_signature_now(
        &self,
        resolved: &Resolved,
        keys: &[PublicKey],
    ) -> Result<Verified, OciError> {
        let tag = signature_tag(&resolved.digest);
        let refused = |reasons: Vec<String>| OciError::SignatureRefused {
            reference: self.reference.to_string(),
            digest: resolved.digest.clone(),
            reasons,
        };
        let Some((digest, layers)) = self.signature_layers(&tag, &resolved.digest).await? else {
            return Err(OciError::Unsigned {
                reference: self.reference.to_string(),
                digest: resolved.digest.clone(),
                tag,
            });
        };
        let layers = layers.map_err(|reason| refused(vec![reason]))?;
        if layers.is_empty() {
            return Err(refused(vec![format!(
                "its signature manifest ({tag}, {digest}) has no layers"
            )]));
        }
        let mut reasons = Vec::new();
        for (index, layer) in layers.iter().enumerate() {
            let annotation = layer
                .annotations
                .as_ref()
                .and_then(|annotations| annotations.get(SIGNATURE_ANNOTATION));
            let reason = if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
                if annotation.is_some() {
                    format!(
                        "it carries a signature annotation, but its media type is {}, not {SIMPLE_SIGNING_MEDIA_TYPE}",
                        layer.media_type.escape_debug()
                    )
                } else {
                    format!(
                        "its media type is {}, not a signature ({SIMPLE_SIGNING_MEDIA_TYPE})",
                        layer.media_type.escape_debug()
                    )
                }
            } else {
                match self.payload(layer).await? {
                    Err(reason) => reason,
                    Ok(payload) => {
                        match verify_one(
                            &payload,
                            annotation.map(String::as_str),
                            keys,
                            &resolved.digest,
                        ) {
                            Ok(verified) => return Ok(verified),
                            Err(reason) => reason,
                        }
                    }
                }
            };
            reasons.push(format!("signature layer {}: {reason}", index + 1));
        }
        Err(refused(reasons))
    }

    /// The signature manifest under `tag`: `None` when there is none (404), else its
    /// digest and its layers (or why they are not usable).
    async fn signature_layers(
        &self,
        tag: &str,
        signed: &str,
    ) -> Result<Option<(String, Result<Vec<OciDescriptor>, String>)>, OciError> {
        let reference = self.reference.with_tag(tag);
        let (body, digest, content_type) = match self.get_manifest(&reference).await {
            Ok(found) => found,
            Err(OciError::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err),
        };
        let layers = (|| {
            if digest == signed {
                return Err(format!(
                    "the signature tag {tag} points to the signed manifest itself ({digest}), not to a signature"
                ));
            }
            match layout::parse_manifest(&body, content_type.as_deref()) {
                Ok(Fetched::Image(image)) => {
                    if image.layers.len() > MAX_SIGNATURE_LAYERS {
                        return Err(format!(
                            "its signature manifest ({tag}) has {} layers, over the limit of {MAX_SIGNATURE_LAYERS}",
                            image.layers.len()
                        ));
                    }
                    Ok(image.layers)
                }
                Ok(Fetched::Index(_)) => Err(format!(
                    "its signature tag {tag} is an image index, not a signature manifest"
                )),
                Err(reason) => Err(format!(
                    "its signature manifest ({tag}) is not usable: {reason}"
                )),
            }
        })();
        Ok(Some((digest, layers)))
    }

    /// The signature tag cannot take another signature.
    fn unusable_signature_tag(&self, message: String) -> OciError {
        OciError::Protocol {
            registry: self.reference.registry().to_owned(),
            what: format!("the signature tag of {}", self.reference),
            message,
        }
    }

    /// A signature layer's payload: `Ok(Err(reason))` when it is refused without reading
    /// (declared too large, a bad digest).
    async fn payload(&self, layer: &OciDescriptor) -> Result<Result<Vec<u8>, String>, OciError> {
        let declared = match layout::size_of(layer) {
            Ok(size) => size,
            Err(reason) => return Ok(Err(reason)),
        };
        if declared > MAX_PAYLOAD_BYTES {
            return Ok(Err(format!(
                "its payload declares {}, over the limit of {} for a signature payload; not read",
                toolhost::registry::format_bytes(declared),
                toolhost::registry::format_bytes(MAX_PAYLOAD_BYTES)
            )));
        }
        if let Err(reason) = crate::reference::check_digest(&layer.digest) {
            return Ok(Err(format!("its payload has a {reason}")));
        }
        let mut bytes = Vec::new();
        self.fetch(layer, "signature payload", MAX_PAYLOAD_BYTES, &mut bytes)
            .await?;
        Ok(Ok(bytes))
    }

    /// Signs `digest` (a manifest of this repository) with `key` and publishes the
    /// signature as cosign does: appended to the signature manifest under
    /// `sha256-HEX.sig` (created when there is none).
    ///
    /// # Errors
    /// [`OciError::Protocol`] when the existing signature manifest is not one or
    /// already holds [`MAX_SIGNATURE_LAYERS`] signatures, [`OciError::Signing`] when the
    /// key fails, and the registry's errors.
    pub async fn push_signature(&self, digest: &str, key: &SigningKey) -> Result<Signed, OciError> {
        self.within(Operation::Push, self.push_signature_now(digest, key))
            .await
    }

    async fn push_signature_now(&self, digest: &str, key: &SigningKey) -> Result<Signed, OciError> {
        let tag = signature_tag(digest);
        let payload = Payload::new(
            &format!(
                "{}/{}",
                self.reference.registry(),
                self.reference.repository()
            ),
            digest,
        )
        .to_bytes();
        let signature = key.sign(&payload).map_err(|err| OciError::Signing {
            message: err.to_string(),
        })?;
        let mut layers = match self.signature_layers(&tag, digest).await? {
            None => Vec::new(),
            Some((_, Ok(layers))) => layers,
            Some((_, Err(reason))) => {
                return Err(self.unusable_signature_tag(format!(
                    "{reason}; delete the tag {tag} before signing"
                )))
            }
        };
        if layers.len() >= MAX_SIGNATURE_LAYERS {
            return Err(self.unusable_signature_tag(format!(
                "its signature manifest ({tag}) already holds {} signatures, the most this host reads",
                layers.len()
            )));
        }
        let payload_digest = sha256_text(&payload);
        layers.push(OciDescriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
            digest: payload_digest.clone(),
            size: payload.len() as i64,
            urls: None,
            artifact_type: None,
            annotations: Some(
                [(SIGNATURE_ANNOTATION.to_owned(), base64_text(&signature))]
                    .into_iter()
                    .collect(),
            ),
        });
        let diff_ids: Vec<&str> = layers.iter().map(|layer| layer.digest.as_str()).collect();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "",
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "config": {},
        }))
        .unwrap_or_default();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": layout::OCI_MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": SIGNATURE_CONFIG_MEDIA_TYPE,
                "size": config.len(),
                "digest": sha256_text(&config),
            },
            "layers": layers,
        }))
        .unwrap_or_default();
        let sig_reference = self.reference.with_tag(&tag).to_client();
        let auth = match self.authorize(Operation::Push).await? {
            Authorization::Bearer(token) => RegistryAuth::Bearer(token),
            Authorization::Basic(..) | Authorization::None => self.options.credentials.to_client(),
        };
        self.client
            .auth(&sig_reference, &auth, RegistryOperation::Push)
            .await
            .map_err(|err| self.map_error(err, Operation::Push, "the token"))?;
        self.push_blob(payload.into(), &payload_digest).await?;
        self.push_blob(config.clone().into(), &sha256_text(&config))
            .await?;
        self.client
            .push_manifest_raw(
                &sig_reference,
                manifest,
                const { reqwest::header::HeaderValue::from_static(layout::OCI_MANIFEST_MEDIA_TYPE) },
            )
            .await
            .map_err(|err| self.map_error(err, Operation::Push, "the signature manifest"))?;
        Ok(Signed {
            digest: digest.to_owned(),
            tag,
            key: key.public_key().fingerprint(),
            signatures: layers.len(),
        })
    }
}
