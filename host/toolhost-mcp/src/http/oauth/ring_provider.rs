//! jsonwebtoken's signature checks on ring: RS256, ES256 and EdDSA only, verifying only
//! (the server never signs a token). Any other algorithm, HMAC above all, is refused
//! here too, whatever the caller asked for.

use jsonwebtoken::crypto::{CryptoProvider, JwkUtils, JwtSigner, JwtVerifier};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ED25519,
    RSA_PKCS1_2048_8192_SHA256,
};

/// The provider: verifying with ring, no signing, no JWK utilities (keys come as JWKs'
/// public parts, which jsonwebtoken reads itself).
pub(super) static RING: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    jwk_utils: JwkUtils {
        extract_rsa_public_key_components: |_| Err(ErrorKind::InvalidKeyFormat.into()),
        extract_ec_public_key_coordinates: |_, _| Err(ErrorKind::InvalidKeyFormat.into()),
        compute_digest: |data, _| {
            ring::digest::digest(&ring::digest::SHA256, data)
                .as_ref()
                .to_vec()
        },
    },
};

/// Makes [`RING`] jsonwebtoken's provider for this process, unless one is already
/// installed (an application's own: it then checks the signatures, for the algorithms
/// this server allows only).
pub(super) fn install() {
    let _ = RING.install_default();
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature jsonwebtoken's CryptoProvider takes"
)]
fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    Err(ErrorKind::Signing("this server verifies tokens, it does not sign them".into()).into())
}

/// A verifier for `algorithm` over `key`, when the key's family is the algorithm's.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "the signature jsonwebtoken's CryptoProvider takes"
)]
fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    let family = match algorithm {
        Algorithm::RS256 => AlgorithmFamily::Rsa,
        Algorithm::ES256 => AlgorithmFamily::Ec,
        Algorithm::EdDSA => AlgorithmFamily::Ed,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    if key.family() != family {
        return Err(ErrorKind::InvalidAlgorithm.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        key: key.kind().clone(),
    }))
}

struct RingVerifier {
    algorithm: Algorithm,
    key: DecodingKeyKind,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        let checked = match (&self.algorithm, &self.key) {
            (Algorithm::RS256, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                RsaPublicKeyComponents { n, e }.verify(&RSA_PKCS1_2048_8192_SHA256, message, sig)
            }
            (Algorithm::ES256, DecodingKeyKind::SecretOrDer(point)) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point).verify(message, sig)
            }
            (Algorithm::EdDSA, DecodingKeyKind::SecretOrDer(x)) => {
                UnparsedPublicKey::new(&ED25519, x).verify(message, sig)
            }
            _ => return Err(signature::Error::new()),
        };
        checked.map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
