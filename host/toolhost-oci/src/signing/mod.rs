//! Signed plugins in cosign's key-based format: who published a component, not only
//! that its bytes did not change.
//!
//! # Where a signature lives
//! As cosign stores it: in the plugin's own repository, under the tag
//! `sha256-<hex>.sig` (the signed manifest's digest, `:` turned into `-`), an OCI image
//! manifest with one layer per signature. Each layer is of media type
//! [`SIMPLE_SIGNING_MEDIA_TYPE`]; its blob is the "simple signing" JSON payload
//! ([`Payload`]) whose `critical.image.docker-manifest-digest` names the signed
//! manifest, and its annotation [`SIGNATURE_ANNOTATION`] holds the base64 signature over
//! the blob's exact bytes: ECDSA P-256 with SHA-256 (a DER signature), or Ed25519.
//!
//! The OCI 1.1 referrers form is not read: a signature stored only as a referrer (cosign
//! with `--registry-referrers-mode=oci-1-1`) is not found, and the pull is refused as
//! unsigned. The tag form is cosign's default, and what every registry can store.
//!
//! # What is checked
//! [`RegistryClient::verify_signature`](crate::RegistryClient::verify_signature), each
//! signature by [`verify_one`]: at most [`MAX_SIGNATURE_LAYERS`] layers looked at, each payload at
//! most [`MAX_PAYLOAD_BYTES`] and checked against its digest; a signature must be valid
//! base64 of at most [`MAX_SIGNATURE_BYTES`], verify with one of the keys given, and its
//! payload must name exactly the manifest digest that is pulled, with cosign's type.
//! [`check_pinned`] checks the same evidence again offline, as `plugins.lock` keeps it.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod keys;

pub use keys::{
    private_key_pem, KeyAlgorithm, KeyError, PublicKey, SigningKey, MAX_KEY_FILE_BYTES,
};

/// The media type of a cosign signature layer (its blob is the payload).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The `critical.type` of a cosign image signature.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";

/// Most signature layers looked at in one signature manifest (64): each is one signer's
/// signature; a manifest with more is refused, not searched.
pub const MAX_SIGNATURE_LAYERS: usize = 64;

/// Largest payload blob read (64 KiB; cosign's is a few hundred bytes).
pub const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;

/// Largest signature annotation decoded (1 KiB of base64; a P-256 DER signature is at
/// most 72 bytes, an Ed25519 one 64).
pub const MAX_SIGNATURE_BYTES: usize = 1024;

/// The tag a signature of `digest` (`sha256:HEX`) is stored under: `sha256-HEX.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// The simple-signing payload cosign signs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// What is signed.
    pub critical: Critical,
    /// Free annotations (cosign's `-a key=value`); not checked.
    #[serde(default)]
    pub optional: Option<BTreeMap<String, serde_json::Value>>,
}

/// The payload's signed part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Critical {
    /// The repository signed (not checked: a copy in another registry keeps its
    /// signature; the digest is what binds the content).
    pub identity: Identity,
    /// The signed manifest.
    pub image: Image,
    /// [`SIGNATURE_TYPE`].
    #[serde(rename = "type")]
    pub kind: String,
}

/// `critical.identity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `HOST/REPO`.
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

/// `critical.image`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `sha256:HEX` of the signed manifest.
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl Payload {
    /// The payload that signs `digest` in `repository` (`HOST/REPO`).
    pub fn new(repository: &str, digest: &str) -> Self {
        Self {
            critical: Critical {
                identity: Identity {
                    docker_reference: repository.to_owned(),
                },
                image: Image {
                    docker_manifest_digest: digest.to_owned(),
                },
                kind: SIGNATURE_TYPE.to_owned(),
            },
            optional: None,
        }
    }

    /// The payload's bytes, as signed.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising plain strings and maps cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A signature that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The key that verified it.
    pub key: PublicKey,
    /// The payload's bytes.
    pub payload: Vec<u8>,
    /// The signature's bytes.
    pub signature: Vec<u8>,
}

/// Checks one signature: `payload` (the layer's blob, already checked against its
/// digest) signed by one of `keys` with the base64 `annotation`, naming `digest`.
///
/// # Errors
/// Why it does not verify, in words for the operator.
pub fn verify_one(
    payload: &[u8],
    annotation: Option<&str>,
    keys: &[PublicKey],
    digest: &str,
) -> Result<Verified, String> {
    let annotation =
        annotation.ok_or_else(|| format!("it has no {SIGNATURE_ANNOTATION} annotation"))?;
    if annotation.len() > MAX_SIGNATURE_BYTES {
        return Err(format!(
            "its signature annotation is {} characters long, over the limit of {MAX_SIGNATURE_BYTES}",
            annotation.len()
        ));
    }
    let signature = base64::engine::general_purpose::STANDARD
        .decode(annotation.trim())
        .map_err(|err| format!("its signature annotation is not base64 ({err})"))?;
    let key = keys
        .iter()
        .find(|key| key.verifies(payload, &signature))
        .ok_or_else(|| {
            let names: Vec<String> = keys.iter().map(PublicKey::fingerprint).collect();
            format!(
                "its signature does not verify with the key(s) given ({}): signed by another key, or the payload or signature was changed",
                names.join(", ")
            )
        })?;
    let parsed: Payload = serde_json::from_slice(payload).map_err(|err| {
        format!("its payload verifies but is not a simple-signing payload ({err})")
    })?;
    if parsed.critical.kind != SIGNATURE_TYPE {
        return Err(format!(
            "its payload's critical.type is \"{}\", not \"{SIGNATURE_TYPE}\"",
            parsed.critical.kind.escape_debug()
        ));
    }
    if parsed.critical.image.docker_manifest_digest != digest {
        return Err(format!(
            "it signs {}, not the manifest pulled ({digest}): a signature of another version",
            parsed.critical.image.docker_manifest_digest.escape_debug()
        ));
    }
    Ok(Verified {
        key: key.clone(),
        payload: payload.to_vec(),
        signature,
    })
}

/// What a lock keeps of a verified pull, to check it again offline (`--require-signer`):
/// base64 of the payload and the signature, and the manifests from the signed one down
/// to the image manifest (one, or an index then its image manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedEvidence<'a> {
    /// The fingerprint the lock claims.
    pub key: &'a str,
    /// Base64 of the payload.
    pub payload: &'a str,
    /// Base64 of the signature.
    pub signature: &'a str,
    /// Base64 of each manifest.
    pub manifests: &'a [String],
}

/// Checks what a lock entry keeps: the claimed key is one of `keys`, its signature
/// verifies over the payload, the payload names `source_digest`, the first manifest is
/// that digest, an index's entry names the next, and the image manifest's
/// `application/wasm` layer is `component` and its plugin-manifest layer `manifest`.
/// Returns the key's fingerprint.
///
/// # Errors
/// Why not, in words for the operator.
pub fn check_pinned(
    evidence: &PinnedEvidence<'_>,
    keys: &[PublicKey],
    source_digest: &str,
    component: &str,
    manifest: Option<&str>,
) -> Result<String, String> {
    let key = keys
        .iter()
        .find(|key| key.fingerprint() == evidence.key)
        .ok_or_else(|| {
            format!(
                "it is signed by {}, which is not one of the --require-signer keys",
                evidence.key
            )
        })?;
    let decode = |what: &str, text: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|err| format!("the lock's {what} is not base64 ({err})"))
    };
    let payload = decode("signature payload", evidence.payload)?;
    let signature = decode("signature", evidence.signature)?;
    let annotation = base64::engine::general_purpose::STANDARD.encode(&signature);
    verify_one(
        &payload,
        Some(&annotation),
        std::slice::from_ref(key),
        source_digest,
    )
    .map_err(|reason| format!("the signature the lock keeps does not hold: {reason}"))?;
    let mut expected = source_digest.to_owned();
    let count = evidence.manifests.len();
    if count == 0 || count > 2 {
        return Err(format!(
            "the lock keeps {count} manifests; a signed entry keeps one (or an index and its image manifest): pull it again"
        ));
    }
    for (index, text) in evidence.manifests.iter().enumerate() {
        let body = decode("manifest", text)?;
        let digest = format!("sha256:{}", hex(&Sha256::digest(&body)));
        if digest != expected {
            return Err(format!(
                "the manifest the lock keeps is {digest}, not the signed {expected}: the lock was edited; pull it again"
            ));
        }
        match crate::layout::parse_manifest(&body, None) {
            Ok(crate::layout::Fetched::Index(parsed)) if index + 1 < count => {
                expected = crate::layout::pick_from_index(&parsed)?;
            }
            Ok(crate::layout::Fetched::Image(image)) if index + 1 == count => {
                let layers = crate::layout::plugin_layers(&image)?;
                if layers.component.digest != component {
                    return Err(format!(
                        "the signed manifest's component is {}, but the lock pins {component}: the lock was edited; pull it again",
                        layers.component.digest
                    ));
                }
                let signed_manifest = layers.manifest.as_ref().map(|layer| layer.digest.as_str());
                if signed_manifest != manifest {
                    return Err(format!(
                        "the signed manifest's plugin manifest is {}, but the lock pins {}: the lock was edited; pull it again",
                        signed_manifest.unwrap_or("none"),
                        manifest.unwrap_or("none")
                    ));
                }
            }
            Ok(_) => {
                return Err(
                    "the manifests the lock keeps are not an index and its image manifest; pull it again"
                        .into(),
                )
            }
            Err(reason) => return Err(format!("a manifest the lock keeps is not usable: {reason}")),
        }
    }
    Ok(key.fingerprint())
}

/// Base64 (standard, padded), as the lock and the annotation write it.
pub fn base64_text(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes base64 (standard, padded), as the lock writes it.
///
/// # Errors
/// What is wrong with the text.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|err| format!("not base64 ({err})"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
