//! Hostile signature artifacts the real registry cannot produce: a signature manifest of
//! 100,000 layers, and a payload blob that never ends. Each is refused within the pull's
//! bounds, naming what failed.

use std::time::Duration;

use super::fake::{digest, Fake, Reply, Request};
use super::{component, options, wasm_manifest, CONFIG};
use toolhost_oci::signing::{KeyAlgorithm, PublicKey, SigningKey, SIMPLE_SIGNING_MEDIA_TYPE};
use toolhost_oci::{OciError, OciReference, RegistryClient};

/// A fake serving the plugin at `:1` and `signature` (a manifest answer) at any `.sig`
/// tag, `payload` for every other blob.
fn signed_registry(
    signature: impl Fn() -> Reply + Send + Sync + 'static,
    payload: impl Fn() -> Reply + Send + Sync + 'static,
) -> impl Fn(&Request) -> Reply + Send + Sync + 'static {
    let bytes = component();
    let (d, n) = (digest(&bytes), bytes.len() as u64);
    move |request: &Request| {
        if request.path == "/v2/" {
            Reply::status(200, "{}")
        } else if request.path.ends_with(".sig") {
            signature()
        } else if request.path.contains("/manifests/") {
            Reply::json(200, &wasm_manifest(d.clone(), n))
        } else if request.path.ends_with(&digest(CONFIG)) {
            Reply::bytes(CONFIG)
        } else {
            payload()
        }
    }
}

async fn verify(fake: &Fake, keys: &[PublicKey]) -> Result<(), OciError> {
    let reference: OciReference = format!("oci://{}/tools/greet:1", fake.address)
        .parse()
        .unwrap();
    let client = RegistryClient::new(&reference, options()).unwrap();
    let resolved = client.resolve().await?;
    client.verify_signature(&resolved, keys).await.map(drop)
}

fn key() -> PublicKey {
    SigningKey::generate(KeyAlgorithm::EcdsaP256)
        .unwrap()
        .0
        .public_key()
        .clone()
}

#[tokio::test]
async fn a_signature_manifest_of_100000_layers_is_not_read_past_4_mib() {
    let layer = serde_json::json!({
        "mediaType": SIMPLE_SIGNING_MEDIA_TYPE,
        "digest": digest(b"{}"),
        "size": 2,
        "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ=="},
    });
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(b"{}"), "size": 2},
        "layers": vec![layer; 100_000],
    });
    let fake = Fake::start(signed_registry(
        move || Reply::json(200, &body),
        || Reply::bytes(b"{}"),
    ))
    .await;
    let err = verify(&fake, &[key()]).await.unwrap_err();
    assert!(
        matches!(&err, OciError::TooLarge { what, limit, .. } if what == "OCI manifest" && *limit == 4 << 20),
        "{err}"
    );
}

#[tokio::test]
async fn an_endless_signature_payload_stops_at_its_declared_size() {
    let body = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(b"{}"), "size": 2},
        "layers": [{
            "mediaType": SIMPLE_SIGNING_MEDIA_TYPE,
            "digest": digest(b"x"),
            "size": 300,
            "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ=="},
        }],
    });
    let fake = Fake::start(signed_registry(
        move || Reply::json(200, &body),
        || Reply::endless(b"{\"critical\":".repeat(64)),
    ))
    .await;
    let started = std::time::Instant::now();
    let err = verify(&fake, &[key()]).await.unwrap_err();
    assert!(
        matches!(&err, OciError::TooLarge { what, endless: true, limit: 300, .. } if what == "signature payload"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn no_signature_tag_is_unsigned() {
    let fake = Fake::start(signed_registry(
        || Reply::status(404, r#"{"errors":[{"code":"MANIFEST_UNKNOWN"}]}"#),
        || Reply::bytes(b"{}"),
    ))
    .await;
    let err = verify(&fake, &[key()]).await.unwrap_err();
    assert_eq!(err.kind(), "unsigned");
    assert!(
        err.to_string()
            .contains("is not signed: the registry has no signature tag sha256-"),
        "{err}"
    );
}
