//! The access token checks, each hostile token against its exact refusal.

use std::sync::Arc;

use serde_json::json;

use super::testkit::{b64, claims, now, Issuers, Signer, AUDIENCE, ISSUER, OTHER_ISSUER};
use super::{Denial, OAuthConfig, Subject, Verifier};

/// A verifier for ISSUER (publishing `keys`, each named by its place: `k0`, `k1`...)
/// and OTHER_ISSUER (publishing `other`).
fn verifier(keys: &[&Signer], other: &[&Signer]) -> (Verifier, Arc<Issuers>) {
    let issuers = Arc::new(Issuers::default());
    let jwks = |keys: &[&Signer], prefix: &str| {
        keys.iter()
            .enumerate()
            .map(|(i, key)| key.jwk(&format!("{prefix}{i}")))
            .collect()
    };
    issuers.publish(ISSUER, jwks(keys, "k"));
    issuers.publish(OTHER_ISSUER, jwks(other, "o"));
    let verifier = Verifier::new(issuers.config(), vec!["alice".into()]);
    (verifier, issuers)
}

fn invalid(result: Result<Subject, Denial>) -> String {
    match result {
        Err(Denial::Invalid(why)) => why,
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[tokio::test]
async fn tokens_of_each_allowed_algorithm_pass() {
    let (rsa, ec, ed) = (Signer::rsa(), Signer::ec(), Signer::ed());
    let (verifier, issuers) = verifier(&[&rsa, &ec, &ed], &[]);
    for (i, key) in [&rsa, &ec, &ed].into_iter().enumerate() {
        let mut claims = claims("svc-1");
        claims["scope"] = json!("mcp:tools extra");
        let token = key.sign(json!({"kid": format!("k{i}"), "typ": "at+jwt"}), &claims);
        assert_eq!(
            verifier.verify(&token).await,
            Ok(Subject {
                issuer: ISSUER.into(),
                sub: "svc-1".into(),
                scopes: vec!["extra".into(), "mcp:tools".into()],
            }),
            "{}",
            key.alg()
        );
    }
    // `scp` as an array, `aud` as an array holding this server's URI.
    let mut claims = claims("svc-1");
    claims["scope"] = json!(null);
    claims["scp"] = json!(["mcp:tools"]);
    claims["aud"] = json!(["https://other.example.com", AUDIENCE]);
    let token = ec.sign(json!({"kid": "k1"}), &claims);
    assert!(verifier.verify(&token).await.is_ok());
    // One fetch of the metadata and one of the JWKS served them all.
    assert_eq!(issuers.jwks_fetches(ISSUER), 1);
}

#[tokio::test]
async fn alg_none_and_hmac_are_refused() {
    let rsa = Signer::rsa();
    let (verifier, issuers) = verifier(&[&rsa], &[]);
    let payload = b64(claims("svc").to_string().as_bytes());
    for header in [json!({"alg": "none"}), json!({"alg": "None", "kid": "k0"})] {
        let token = format!("{}.{payload}.", b64(header.to_string().as_bytes()));
        let why = invalid(verifier.verify(&token).await);
        assert!(why.starts_with("the token is not a JWT"), "{why}");
    }
    // HS256 "signed" with the RSA public key as the secret (the classic confusion).
    let public = rsa.jwk("k0");
    let message = format!(
        "{}.{payload}",
        b64(json!({"alg": "HS256", "kid": "k0"}).to_string().as_bytes())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, public.to_string().as_bytes());
    let tag = ring::hmac::sign(&key, message.as_bytes());
    let token = format!("{message}.{}", b64(tag.as_ref()));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the token is signed with HS256; this server takes RS256, ES256 or EdDSA"
    );
    for alg in ["HS384", "HS512", "RS384", "PS256", "ES384"] {
        let token = format!(
            "{}.{payload}.c2ln",
            b64(json!({"alg": alg, "kid": "k0"}).to_string().as_bytes())
        );
        let why = invalid(verifier.verify(&token).await);
        assert!(
            why.starts_with(&format!("the token is signed with {alg}")),
            "{why}"
        );
    }
    assert_eq!(issuers.jwks_fetches(ISSUER), 0, "refused before any fetch");
}

#[tokio::test]
async fn a_key_never_checks_another_algorithm() {
    let (rsa, ec) = (Signer::rsa(), Signer::ec());
    let (verifier, _) = verifier(&[&rsa, &ec], &[]);
    // ES256 naming the RSA key's kid, and RS256 naming the EC key's: refused by kind.
    let token = ec.sign(json!({"kid": "k0"}), &claims("svc"));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the issuer's key \"k0\" is a Rsa key, which may not check ES256"
    );
    let token = rsa.sign(json!({"kid": "k1"}), &claims("svc"));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the issuer's key \"k1\" is a P256 key, which may not check RS256"
    );
    // A JWK whose own `alg` is another: not used for RS256.
    let issuers = Arc::new(Issuers::default());
    let mut jwk = rsa.jwk("r");
    jwk["alg"] = json!("RS384");
    issuers.publish(ISSUER, vec![jwk]);
    let verifier = Verifier::new(issuers.config(), vec![]);
    let token = rsa.sign(json!({"kid": "r"}), &claims("svc"));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the issuer's key \"r\" is a Rsa for RS384 key, which may not check RS256"
    );
}

/// A change made to a token's claims.
type Change = dyn Fn(&mut serde_json::Value);

#[tokio::test]
async fn time_audience_issuer_and_signature_are_checked() {
    let ec = Signer::ec();
    let (verifier, issuers) = verifier(&[&ec], &[]);
    let with = |change: &Change| {
        let mut claims = claims("svc");
        change(&mut claims);
        ec.sign(json!({"kid": "k0"}), &claims)
    };
    let cases: [(&Change, &str); 8] = [
        (
            &|c| c["exp"] = json!(now() - 120),
            "the token has expired (`exp`)",
        ),
        (
            &|c| c["nbf"] = json!(now() + 120),
            "the token is not valid yet (`nbf`)",
        ),
        (
            &|c| c["aud"] = json!("https://mcp.example.com/other"),
            "the token is not for this server (`aud`)",
        ),
        (
            &|c| c["aud"] = json!(["https://x.example.com"]),
            "the token is not for this server (`aud`)",
        ),
        (
            &|c| {
                c.as_object_mut().unwrap().remove("exp");
            },
            "the token has no `exp`",
        ),
        (
            &|c| {
                c.as_object_mut().unwrap().remove("aud");
            },
            "the token has no `aud`",
        ),
        (
            &|c| c["iss"] = json!("https://evil.example.com"),
            "the token's issuer \"https://evil.example.com\" is not one this server trusts",
        ),
        (
            &|c| {
                c.as_object_mut().unwrap().remove("iss");
            },
            "the token has no `iss`",
        ),
    ];
    for (change, expected) in cases {
        assert_eq!(invalid(verifier.verify(&with(change)).await), expected);
    }
    // Within the 60 s leeway: taken.
    assert!(verifier
        .verify(&with(&|c| c["exp"] = json!(now() - 30)))
        .await
        .is_ok());
    assert!(verifier
        .verify(&with(&|c| c["nbf"] = json!(now() + 30)))
        .await
        .is_ok());
    // A signature that does not match (the claims changed after signing).
    let token = with(&|_| {});
    let (rest, signature) = token.rsplit_once('.').unwrap();
    let (header, _) = rest.split_once('.').unwrap();
    let forged = format!(
        "{header}.{}.{signature}",
        b64(claims("root").to_string().as_bytes())
    );
    assert_eq!(
        invalid(verifier.verify(&forged).await),
        "the token's signature does not verify"
    );
    assert_eq!(issuers.jwks_fetches(ISSUER), 1);
}

#[tokio::test]
async fn a_key_is_taken_only_from_the_tokens_own_issuer() {
    let (ours, theirs) = (Signer::ec(), Signer::ec());
    let (verifier, issuers) = verifier(&[&ours], &[&theirs]);
    // Signed by OTHER_ISSUER's key, claiming ISSUER: ISSUER's keys have no "o0".
    let token = theirs.sign(json!({"kid": "o0"}), &claims("svc"));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the issuer's keys have no key \"o0\" for ES256"
    );
    // Signed by OTHER_ISSUER's key under a kid ISSUER has: the signature fails.
    let token = theirs.sign(json!({"kid": "k0"}), &claims("svc"));
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the token's signature does not verify"
    );
    assert_eq!(issuers.jwks_fetches(OTHER_ISSUER), 0);
    // The same `sub` from the other issuer is taken as the other issuer's.
    let mut other = claims("svc");
    other["iss"] = json!(OTHER_ISSUER);
    let token = theirs.sign(json!({"kid": "o0"}), &other);
    assert_eq!(verifier.verify(&token).await.unwrap().issuer, OTHER_ISSUER);
}

#[tokio::test]
async fn unknown_kids_cause_one_fetch_per_interval_not_one_each() {
    let ec = Signer::ec();
    let (verifier, issuers) = verifier(&[&ec], &[]);
    let good = ec.sign(json!({"kid": "k0"}), &claims("svc"));
    assert!(verifier.verify(&good).await.is_ok());
    assert_eq!(issuers.jwks_fetches(ISSUER), 1);
    for i in 0..1000 {
        let token = ec.sign(json!({"kid": format!("unknown-{i}")}), &claims("svc"));
        assert_eq!(
            invalid(verifier.verify(&token).await),
            format!("the issuer's keys have no key \"unknown-{i}\" for ES256")
        );
    }
    // The first fetch was less than 30 s ago: none more.
    assert_eq!(issuers.jwks_fetches(ISSUER), 1);
    // A token without kid takes the issuer's one key of its kind.
    let token = ec.sign(json!({}), &claims("svc"));
    assert!(verifier.verify(&token).await.is_ok());
}

#[tokio::test]
async fn oversized_and_malformed_tokens_are_refused_unread() {
    let ec = Signer::ec();
    let (verifier, issuers) = verifier(&[&ec], &[]);
    let huge = "a".repeat(64 * 1024);
    assert_eq!(
        invalid(verifier.verify(&huge).await),
        "the token is 65536 bytes, over the 8192 this server reads"
    );
    // Padded out to just over 8 KiB with a claim: refused by size too.
    let mut big = claims("svc");
    big["pad"] = json!("x".repeat(8 * 1024));
    let token = ec.sign(json!({"kid": "k0"}), &big);
    assert!(invalid(verifier.verify(&token).await).starts_with("the token is "));
    for bad in [
        "",
        "a.b",
        "a.b.c",
        "!!!.???.###",
        "eyJhbGciOiJFUzI1NiJ9.%%%.x",
    ] {
        let why = invalid(verifier.verify(bad).await);
        assert!(
            why.starts_with("the token is not a JWT")
                || why.starts_with("the token's claims do not decode"),
            "{bad}: {why}"
        );
    }
    assert_eq!(issuers.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn subjects_are_client_names_and_never_a_static_tokens() {
    let ec = Signer::ec();
    let (verifier, _) = verifier(&[&ec], &[]);
    for (sub, expected) in [
        ("../etc", "the token's `sub` \"../etc\" is not a valid client name (A-Za-z0-9_-, at most 64 characters)"),
        ("", "the token's `sub` \"\" is not a valid client name (A-Za-z0-9_-, at most 64 characters)"),
        ("alice", "the token's `sub` \"alice\" is a static token's client name; one principal cannot be both"),
    ] {
        let token = ec.sign(json!({"kid": "k0"}), &claims(sub));
        assert_eq!(invalid(verifier.verify(&token).await), expected);
    }
    let mut numeric = claims("x");
    numeric["sub"] = json!(7);
    let token = ec.sign(json!({"kid": "k0"}), &numeric);
    assert_eq!(
        invalid(verifier.verify(&token).await),
        "the token has no `sub`"
    );
}

#[tokio::test]
async fn a_missing_required_scope_is_insufficient_scope() {
    let ec = Signer::ec();
    let (verifier, _) = verifier(&[&ec], &[]);
    for scope in [
        json!("mcp:read"),
        json!(""),
        json!(null),
        json!("mcp:toolsX"),
    ] {
        let mut claims = claims("svc");
        claims["scope"] = scope;
        let token = ec.sign(json!({"kid": "k0"}), &claims);
        assert_eq!(
            verifier.verify(&token).await,
            Err(Denial::InsufficientScope)
        );
    }
    assert_eq!(verifier.required, "mcp:tools");
}

#[tokio::test]
async fn keys_that_cannot_be_had_are_unavailable_and_not_fetched_per_token() {
    let ec = Signer::ec();
    let issuers = Arc::new(Issuers::default());
    let verifier = Verifier::new(issuers.config(), vec![]);
    let token = ec.sign(json!({"kid": "k0"}), &claims("svc"));
    let Err(Denial::Unavailable(why)) = verifier.verify(&token).await else {
        panic!("not unavailable");
    };
    assert_eq!(
        why,
        "cannot get the signing keys of the OAuth issuer https://auth.example.com: https://auth.example.com/.well-known/oauth-authorization-server: 404 Not Found; https://auth.example.com/.well-known/openid-configuration: 404 Not Found"
    );
    let calls = issuers.calls.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..100 {
        assert!(matches!(
            verifier.verify(&token).await,
            Err(Denial::Unavailable(_))
        ));
    }
    assert_eq!(
        issuers.calls.load(std::sync::atomic::Ordering::SeqCst),
        calls
    );
    // Metadata naming another issuer, or a plain-HTTP JWKS of a public host: refused.
    let issuers = Arc::new(Issuers::default());
    issuers.bodies.lock().unwrap().insert(
        format!("{ISSUER}/.well-known/oauth-authorization-server"),
        json!({"issuer": "https://evil.example.com", "jwks_uri": format!("{ISSUER}/jwks")}),
    );
    let verifier = Verifier::new(issuers.config(), vec![]);
    let Err(Denial::Unavailable(why)) = verifier.verify(&token).await else {
        panic!("not unavailable");
    };
    assert!(why.ends_with("names the issuer Some(\"https://evil.example.com\"), not \"https://auth.example.com\" (RFC 8414 §3.3)"), "{why}");
    let issuers = Arc::new(Issuers::default());
    issuers.bodies.lock().unwrap().insert(
        format!("{ISSUER}/.well-known/oauth-authorization-server"),
        json!({"issuer": ISSUER, "jwks_uri": "http://keys.example.com/jwks"}),
    );
    let verifier = Verifier::new(issuers.config(), vec![]);
    let Err(Denial::Unavailable(why)) = verifier.verify(&token).await else {
        panic!("not unavailable");
    };
    assert!(
        why.contains(
            "its jwks_uri http://keys.example.com/jwks: plain HTTP is only for a loopback address"
        ),
        "{why}"
    );
}

#[test]
fn settings_are_checked() {
    let issuers = Arc::new(Issuers::default());
    let config = |issuer: &str, audience: &str| {
        OAuthConfig::new(vec![issuer.into()], audience, issuers.fetcher())
    };
    assert_eq!(config(ISSUER, AUDIENCE).check(), Ok(()));
    assert_eq!(config("http://127.0.0.1:9000", AUDIENCE).check(), Ok(()));
    assert_eq!(config("http://[::1]:9000/realm", AUDIENCE).check(), Ok(()));
    let err = config("http://auth.example.com", AUDIENCE)
        .check()
        .unwrap_err();
    assert!(
        err.starts_with(
            "--oauth-issuer http://auth.example.com: plain HTTP is only for a loopback address"
        ),
        "{err}"
    );
    assert_eq!(
        config("http://auth.example.com", AUDIENCE)
            .with_insecure_issuer(true)
            .check(),
        Ok(())
    );
    assert!(config("ftp://auth.example.com", AUDIENCE).check().is_err());
    let err = config(ISSUER, "/mcp").check().unwrap_err();
    assert!(
        err.starts_with("--oauth-audience \"/mcp\" is not an absolute URI"),
        "{err}"
    );
    let err = config(ISSUER, AUDIENCE)
        .with_scopes(vec!["a\"b".into()])
        .check()
        .unwrap_err();
    assert!(
        err.starts_with("--oauth-scope \"a\\\"b\" is not a scope"),
        "{err}"
    );
    let none = OAuthConfig::new(vec![], AUDIENCE, issuers.fetcher());
    assert!(none.check().is_err());
    // The metadata URL: the well-known path between the authority and the path.
    for (audience, url) in [
        (
            AUDIENCE,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        ),
        (
            "https://mcp.example.com",
            "https://mcp.example.com/.well-known/oauth-protected-resource",
        ),
        (
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource",
        ),
    ] {
        assert_eq!(config(ISSUER, audience).resource_metadata_url(), url);
    }
    assert_eq!(
        config(ISSUER, AUDIENCE)
            .with_scopes(vec!["mcp:tools".into()])
            .resource_metadata(),
        json!({
            "resource": AUDIENCE,
            "authorization_servers": [ISSUER],
            "scopes_supported": ["mcp:tools"],
            "bearer_methods_supported": ["header"],
        })
    );
}
