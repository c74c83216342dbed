#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;

const DIGEST: &str = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
const OTHER: &str = "sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9";

fn key(algorithm: KeyAlgorithm) -> SigningKey {
    SigningKey::generate(algorithm).unwrap().0
}

fn signed(key: &SigningKey, digest: &str) -> (Vec<u8>, String) {
    let payload = Payload::new("127.0.0.1:5000/tools/greet", digest).to_bytes();
    let signature = base64_text(&key.sign(&payload).unwrap());
    (payload, signature)
}

#[test]
fn a_signature_verifies_with_its_key_only_over_its_digest() {
    for algorithm in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::Ed25519] {
        let signer = key(algorithm);
        let other = key(algorithm);
        let keys = [signer.public_key().clone()];
        let (payload, signature) = signed(&signer, DIGEST);
        let verified = verify_one(&payload, Some(&signature), &keys, DIGEST).unwrap();
        assert_eq!(verified.key, *signer.public_key());

        let err = verify_one(
            &payload,
            Some(&signature),
            &[other.public_key().clone()],
            DIGEST,
        )
        .unwrap_err();
        assert!(
            err.starts_with("its signature does not verify with the key(s) given (sha256:"),
            "{err}"
        );

        let err = verify_one(&payload, Some(&signature), &keys, OTHER).unwrap_err();
        assert_eq!(
            err,
            format!("it signs {DIGEST}, not the manifest pulled ({OTHER}): a signature of another version")
        );

        // A payload edited to name another digest no longer verifies.
        let edited = String::from_utf8(payload.clone())
            .unwrap()
            .replace(DIGEST, OTHER);
        let err = verify_one(edited.as_bytes(), Some(&signature), &keys, OTHER).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");

        // One flipped bit of the signature.
        let mut bytes = base64::engine::general_purpose::STANDARD
            .decode(&signature)
            .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let err = verify_one(&payload, Some(&base64_text(&bytes)), &keys, DIGEST).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
    }
}

#[test]
fn malformed_signatures_say_what_is_wrong() {
    let signer = key(KeyAlgorithm::EcdsaP256);
    let keys = [signer.public_key().clone()];
    let (payload, _) = signed(&signer, DIGEST);
    assert_eq!(
        verify_one(&payload, None, &keys, DIGEST).unwrap_err(),
        "it has no dev.cosignproject.cosign/signature annotation"
    );
    let err = verify_one(&payload, Some("not*base64!"), &keys, DIGEST).unwrap_err();
    assert!(
        err.starts_with("its signature annotation is not base64 ("),
        "{err}"
    );
    let long = "A".repeat(MAX_SIGNATURE_BYTES + 4);
    assert_eq!(
        verify_one(&payload, Some(&long), &keys, DIGEST).unwrap_err(),
        "its signature annotation is 1028 characters long, over the limit of 1024"
    );
    // A payload signed right but of another type.
    let mut other = Payload::new("x/y", DIGEST);
    other.critical.kind = "something else".into();
    let bytes = other.to_bytes();
    let signature = base64_text(&signer.sign(&bytes).unwrap());
    assert_eq!(
        verify_one(&bytes, Some(&signature), &keys, DIGEST).unwrap_err(),
        "its payload's critical.type is \"something else\", not \"cosign container image signature\""
    );
}

#[test]
fn the_payload_is_cosigns_simple_signing_json() {
    let text =
        String::from_utf8(Payload::new("127.0.0.1:5000/tools/greet", DIGEST).to_bytes()).unwrap();
    assert_eq!(
        text,
        format!(
            "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"127.0.0.1:5000/tools/greet\"}},\"image\":{{\"docker-manifest-digest\":\"{DIGEST}\"}},\"type\":\"cosign container image signature\"}},\"optional\":null}}"
        )
    );
    assert_eq!(
        signature_tag(DIGEST),
        "sha256-2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae.sig"
    );
}

#[test]
fn keys_round_trip_through_pem_encrypted_or_not() {
    for algorithm in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::Ed25519] {
        let (signer, pkcs8) = SigningKey::generate(algorithm).unwrap();
        let plain = private_key_pem(&pkcs8, None).unwrap();
        assert!(plain.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let read = SigningKey::from_pem(&plain, None).unwrap();
        assert_eq!(read.public_key(), signer.public_key());

        let encrypted = private_key_pem(&pkcs8, Some(b"correct horse")).unwrap();
        assert!(encrypted.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"));
        let read = SigningKey::from_pem(&encrypted, Some(b"correct horse")).unwrap();
        assert_eq!(read.public_key(), signer.public_key());
        let err = SigningKey::from_pem(&encrypted, Some(b"wrong")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the key does not open with this passphrase (wrong passphrase, or a damaged key)"
        );
        let err = SigningKey::from_pem(&encrypted, None).unwrap_err();
        assert!(err.to_string().contains("--passphrase-env"), "{err}");

        let public = PublicKey::from_pem(&signer.public_key().to_pem()).unwrap();
        assert_eq!(public, *signer.public_key());
        assert_eq!(public.algorithm(), algorithm);
        // The key is never in its Debug text.
        assert!(!format!("{signer:?}").contains(&plain[30..60]));
    }
    let err = PublicKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("it holds a PEM \"PRIVATE KEY\"; a verification key is"),
        "{err}"
    );
    let err = PublicKey::from_pem("hello").unwrap_err();
    assert!(err.to_string().starts_with("it is not PEM text"), "{err}");
}

#[test]
fn the_lock_evidence_is_checked_again_offline() {
    let signer = key(KeyAlgorithm::EcdsaP256);
    let component = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "size": 2, "digest": OTHER},
        "layers": [{"mediaType": "application/wasm", "size": 8, "digest": component}],
    }))
    .unwrap();
    let source = format!("sha256:{}", hex(&Sha256::digest(&manifest)));
    let (payload, signature) = signed(&signer, &source);
    let manifests = [base64_text(&manifest)];
    let fingerprint = signer.public_key().fingerprint();
    let evidence = PinnedEvidence {
        key: &fingerprint,
        payload: &base64_text(&payload),
        signature: &signature,
        manifests: &manifests,
    };
    let keys = [signer.public_key().clone()];
    assert_eq!(
        check_pinned(&evidence, &keys, &source, component, None),
        Ok(fingerprint.clone())
    );
    // Another component pinned than the one signed.
    let err = check_pinned(&evidence, &keys, &source, OTHER, None).unwrap_err();
    assert!(
        err.starts_with("the signed manifest's component is sha256:9f86"),
        "{err}"
    );
    // Another key required.
    let other = key(KeyAlgorithm::Ed25519);
    let err = check_pinned(
        &evidence,
        &[other.public_key().clone()],
        &source,
        component,
        None,
    )
    .unwrap_err();
    assert_eq!(
        err,
        format!("it is signed by {fingerprint}, which is not one of the --require-signer keys")
    );
    // A lock edited to claim the required key, with a signature it did not make.
    let claimed = other.public_key().fingerprint();
    let forged = PinnedEvidence {
        key: &claimed,
        ..evidence.clone()
    };
    let err = check_pinned(
        &forged,
        &[other.public_key().clone()],
        &source,
        component,
        None,
    )
    .unwrap_err();
    assert!(
        err.starts_with(
            "the signature the lock keeps does not hold: its signature does not verify"
        ),
        "{err}"
    );
}
