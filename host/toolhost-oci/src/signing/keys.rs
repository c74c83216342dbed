//! Signing keys as cosign writes and reads them: a public key is a PEM `PUBLIC KEY`
//! (SubjectPublicKeyInfo) of an ECDSA P-256 or an Ed25519 key; a private key is a PEM
//! `PRIVATE KEY` (PKCS#8) or `ENCRYPTED PRIVATE KEY` (PKCS#8 PBES2, opened with a
//! passphrase). The crypto is ring's (the one rustls already runs on).

use std::fmt;

use base64::Engine as _;
use pkcs8::der::Decode as _;
use pkcs8::pkcs5::{pbes2, scrypt};
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, KeyPair as _};
use sha2::{Digest, Sha256};

/// Largest key file read (64 KiB; a PEM key is a few hundred bytes).
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The DER prefix of an ECDSA P-256 SubjectPublicKeyInfo, before the 65-byte point.
const P256_SPKI_PREFIX: &[u8] = &[
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo, before the 32-byte key.
const ED25519_SPKI_PREFIX: &[u8] = &[
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The most scrypt work an encrypted key may ask for (N = 2^20, r = 8: 1 GiB of memory
/// would be N·r·128 = 1 GiB; with N at most 2^20 and r at most 16 it stays under 2 GiB of
/// work and a few seconds), and the most PBKDF2 rounds (10 million): a key file cannot
/// make opening it take minutes.
const MAX_SCRYPT_LOG_N: u8 = 20;
const MAX_SCRYPT_R: u16 = 16;
const MAX_SCRYPT_P: u16 = 16;
const MAX_PBKDF2_ROUNDS: u32 = 10_000_000;

/// The scrypt cost of keys written here (N = 2^15, r = 8, p = 1: 32 MiB, a fraction of a
/// second), as OpenSSL's default (2^14) or a little above.
const WRITE_SCRYPT_LOG_N: u8 = 15;

/// Why a key could not be read, parsed or made. Each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The text is not the PEM block expected.
    #[error("{0}")]
    Format(String),
    /// An encrypted key without a passphrase, or with a wrong one.
    #[error("{0}")]
    Passphrase(String),
    /// The key is of an algorithm this host does not sign or verify with.
    #[error("{0}")]
    Algorithm(String),
    /// The system's random source or the key encryption failed.
    #[error("{0}")]
    Crypto(String),
}

/// The algorithm of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// ECDSA over P-256 with SHA-256 (cosign's default); signatures are DER.
    EcdsaP256,
    /// Ed25519 over the payload's bytes.
    Ed25519,
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyAlgorithm::EcdsaP256 => "ECDSA P-256",
            KeyAlgorithm::Ed25519 => "Ed25519",
        })
    }
}

/// A public key that verifies signatures.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    algorithm: KeyAlgorithm,
    /// The SubjectPublicKeyInfo DER.
    spki: Vec<u8>,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({} {})", self.algorithm, self.fingerprint())
    }
}

impl PublicKey {
    /// Parses a PEM `PUBLIC KEY` (what `cosign generate-key-pair` writes as cosign.pub and
    /// `host keygen` as PREFIX.pub): ECDSA P-256 or Ed25519.
    ///
    /// # Errors
    /// [`KeyError::Format`] when it is not such a PEM block, [`KeyError::Algorithm`] for
    /// another kind of key.
    ///
    /// ```
    /// use toolhost_oci::signing::{KeyAlgorithm, PublicKey};
    ///
    /// let pem = "-----BEGIN PUBLIC KEY-----\n\
    ///     MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n\
    ///     -----END PUBLIC KEY-----\n";
    /// let key = PublicKey::from_pem(pem)?;
    /// assert_eq!(key.algorithm(), KeyAlgorithm::Ed25519);
    /// assert!(key.fingerprint().starts_with("sha256:"));
    /// # Ok::<(), toolhost_oci::signing::KeyError>(())
    /// ```
    pub fn from_pem(text: &str) -> Result<Self, KeyError> {
        let der = pem_block(text, &["PUBLIC KEY"]).map_err(|reason| {
            KeyError::Format(format!(
                "{reason}; a verification key is a PEM \"PUBLIC KEY\" (cosign.pub, or the .pub `host keygen` writes)"
            ))
        })?;
        Self::from_spki(&der.1)
    }

    /// A key from its SubjectPublicKeyInfo DER.
    ///
    /// # Errors
    /// [`KeyError::Algorithm`] unless it is an ECDSA P-256 or Ed25519 key.
    pub fn from_spki(der: &[u8]) -> Result<Self, KeyError> {
        let algorithm = if der.len() == P256_SPKI_PREFIX.len() + 65
            && der.starts_with(P256_SPKI_PREFIX)
            && der[P256_SPKI_PREFIX.len()] == 0x04
        {
            KeyAlgorithm::EcdsaP256
        } else if der.len() == ED25519_SPKI_PREFIX.len() + 32
            && der.starts_with(ED25519_SPKI_PREFIX)
        {
            KeyAlgorithm::Ed25519
        } else {
            return Err(KeyError::Algorithm(
                "the public key is neither an ECDSA P-256 key (uncompressed) nor an Ed25519 key; this host verifies those two (RSA and other curves are not supported)".into(),
            ));
        };
        Ok(Self {
            algorithm,
            spki: der.to_vec(),
        })
    }

    /// Its SubjectPublicKeyInfo DER.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// Its algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// `sha256:` and the hex SHA-256 of its SubjectPublicKeyInfo DER: what the lock
    /// records as the signer (`openssl pkey -pubin -in KEY.pub -outform DER | sha256sum`
    /// prints the same hex).
    pub fn fingerprint(&self) -> String {
        format!("sha256:{}", hex(&Sha256::digest(&self.spki)))
    }

    /// The PEM text (`-----BEGIN PUBLIC KEY-----`...).
    pub fn to_pem(&self) -> String {
        to_pem("PUBLIC KEY", &self.spki)
    }

    /// Whether `signature` is this key's over exactly `message`: ECDSA P-256 over the
    /// SHA-256 of `message` with a DER signature, or Ed25519 over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let (algorithm, prefix): (&dyn signature::VerificationAlgorithm, usize) = match self
            .algorithm
        {
            KeyAlgorithm::EcdsaP256 => (&signature::ECDSA_P256_SHA256_ASN1, P256_SPKI_PREFIX.len()),
            KeyAlgorithm::Ed25519 => (&signature::ED25519, ED25519_SPKI_PREFIX.len()),
        };
        signature::UnparsedPublicKey::new(algorithm, &self.spki[prefix..])
            .verify(message, signature)
            .is_ok()
    }
}

/// A private key that signs.
pub struct SigningKey {
    inner: Signer,
    public: PublicKey,
}

enum Signer {
    Ecdsa(signature::EcdsaKeyPair),
    Ed25519(signature::Ed25519KeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key itself.
        write!(
            f,
            "SigningKey({} {})",
            self.public.algorithm,
            self.public.fingerprint()
        )
    }
}

impl SigningKey {
    /// A new random key.
    ///
    /// # Errors
    /// [`KeyError::Crypto`] when the system's random source fails.
    pub fn generate(algorithm: KeyAlgorithm) -> Result<(Self, Vec<u8>), KeyError> {
        let rng = SystemRandom::new();
        let crypto = |_| KeyError::Crypto("the system's random source failed".into());
        let pkcs8 = match algorithm {
            KeyAlgorithm::EcdsaP256 => signature::EcdsaKeyPair::generate_pkcs8(
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                &rng,
            )
            .map_err(crypto)?,
            KeyAlgorithm::Ed25519 => {
                signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(crypto)?
            }
        };
        let der = pkcs8.as_ref().to_vec();
        Ok((Self::from_pkcs8(&der)?, der))
    }

    /// Parses a PEM private key: `PRIVATE KEY` (PKCS#8), or `ENCRYPTED PRIVATE KEY`
    /// (PKCS#8 PBES2, scrypt or PBKDF2-SHA256 with AES-CBC, as `openssl pkcs8 -topk8
    /// -v2 aes-256-cbc` and `host keygen --passphrase-env` write) opened with
    /// `passphrase`.
    ///
    /// # Errors
    /// [`KeyError::Format`], [`KeyError::Passphrase`] (none given for an encrypted key,
    /// or a wrong one), [`KeyError::Algorithm`].
    pub fn from_pem(text: &str, passphrase: Option<&[u8]>) -> Result<Self, KeyError> {
        let (label, der) = pem_block(
            text,
            &["PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED SIGSTORE PRIVATE KEY"],
        )
        .map_err(|reason| {
            KeyError::Format(format!(
                "{reason}; a signing key is a PEM \"PRIVATE KEY\" or \"ENCRYPTED PRIVATE KEY\" (PKCS#8, as `host keygen` writes)"
            ))
        })?;
        match label {
            "PRIVATE KEY" => Self::from_pkcs8(&der),
            "ENCRYPTED PRIVATE KEY" => {
                let passphrase = passphrase.ok_or_else(|| {
                    KeyError::Passphrase(
                        "the key is encrypted; give the environment variable that holds its passphrase with --passphrase-env".into(),
                    )
                })?;
                let plain = decrypt_pkcs8(&der, passphrase)?;
                Self::from_pkcs8(&plain)
            }
            "EC PRIVATE KEY" => Err(KeyError::Format(
                "the key is a SEC1 \"EC PRIVATE KEY\"; convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pem`".into(),
            )),
            _ => Err(KeyError::Format(
                "the key is in cosign's own encrypted format (\"ENCRYPTED SIGSTORE PRIVATE KEY\"), which this host does not read; make a key with `host keygen`, or export the cosign key as PKCS#8".into(),
            )),
        }
    }

    /// A key from PKCS#8 DER (ECDSA P-256 or Ed25519).
    fn from_pkcs8(der: &[u8]) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        if let Ok(pair) = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            der,
            &rng,
        ) {
            let spki = [P256_SPKI_PREFIX, pair.public_key().as_ref()].concat();
            return Ok(Self {
                public: PublicKey::from_spki(&spki)?,
                inner: Signer::Ecdsa(pair),
            });
        }
        if let Ok(pair) = signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            let spki = [ED25519_SPKI_PREFIX, pair.public_key().as_ref()].concat();
            return Ok(Self {
                public: PublicKey::from_spki(&spki)?,
                inner: Signer::Ed25519(pair),
            });
        }
        Err(KeyError::Algorithm(
            "the private key is neither an ECDSA P-256 nor an Ed25519 PKCS#8 key; this host signs with those two".into(),
        ))
    }

    /// Its public key.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `message`: ECDSA P-256 over its SHA-256 (DER signature), or Ed25519.
    ///
    /// # Errors
    /// [`KeyError::Crypto`] when the random source fails (ECDSA needs a nonce).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        match &self.inner {
            Signer::Ecdsa(pair) => pair
                .sign(&SystemRandom::new(), message)
                .map(|sig| sig.as_ref().to_vec())
                .map_err(|_| {
                    KeyError::Crypto("signing failed (the system's random source)".into())
                }),
            Signer::Ed25519(pair) => Ok(pair.sign(message).as_ref().to_vec()),
        }
    }
}

/// PKCS#8 DER as PEM: `PRIVATE KEY`, or `ENCRYPTED PRIVATE KEY` under `passphrase`
/// (PBES2: scrypt N=2^15 r=8 p=1, AES-256-CBC).
///
/// # Errors
/// [`KeyError::Crypto`] when the random source or the encryption fails.
pub fn private_key_pem(pkcs8: &[u8], passphrase: Option<&[u8]>) -> Result<String, KeyError> {
    let Some(passphrase) = passphrase else {
        return Ok(to_pem("PRIVATE KEY", pkcs8));
    };
    let crypto = |what: &str| KeyError::Crypto(format!("cannot encrypt the key: {what}"));
    let rng = SystemRandom::new();
    let mut salt = [0_u8; 16];
    let mut iv = [0_u8; 16];
    rng.fill(&mut salt)
        .and_then(|()| rng.fill(&mut iv))
        .map_err(|_| crypto("the system's random source failed"))?;
    let params = scrypt::Params::new(WRITE_SCRYPT_LOG_N, 8, 1, 32)
        .map_err(|err| crypto(&err.to_string()))?;
    let params = pbes2::Parameters::scrypt_aes256cbc(params, &salt, &iv)
        .map_err(|err| crypto(&err.to_string()))?;
    let info = pkcs8::PrivateKeyInfo::from_der(pkcs8).map_err(|err| crypto(&err.to_string()))?;
    let encrypted = info
        .encrypt_with_params(params, passphrase)
        .map_err(|err| crypto(&err.to_string()))?;
    Ok(to_pem("ENCRYPTED PRIVATE KEY", encrypted.as_bytes()))
}

/// Opens an `ENCRYPTED PRIVATE KEY`, its work bounded before it starts.
fn decrypt_pkcs8(der: &[u8], passphrase: &[u8]) -> Result<Vec<u8>, KeyError> {
    let info = pkcs8::EncryptedPrivateKeyInfo::from_der(der).map_err(|err| {
        KeyError::Format(format!(
            "the encrypted key does not parse as PKCS#8 ({err})"
        ))
    })?;
    let too_costly = |what: String| {
        KeyError::Format(format!(
            "the encrypted key asks for {what}, more than this host spends on opening a key; re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc -scrypt` or `host keygen`"
        ))
    };
    match info.encryption_algorithm.pbes2() {
        Some(params) => {
            if let Some(scrypt) = params.kdf.scrypt() {
                let log_n = scrypt.cost_parameter.checked_ilog2().unwrap_or(0);
                if log_n > u32::from(MAX_SCRYPT_LOG_N)
                    || scrypt.block_size > MAX_SCRYPT_R
                    || scrypt.parallelization > MAX_SCRYPT_P
                {
                    return Err(too_costly(format!(
                        "scrypt N={} r={} p={}",
                        scrypt.cost_parameter, scrypt.block_size, scrypt.parallelization
                    )));
                }
            }
            if let Some(pbkdf2) = params.kdf.pbkdf2() {
                if pbkdf2.iteration_count > MAX_PBKDF2_ROUNDS {
                    return Err(too_costly(format!(
                        "{} PBKDF2 rounds",
                        pbkdf2.iteration_count
                    )));
                }
            }
        }
        None => {
            return Err(KeyError::Format(
                "the key is encrypted with PBES1 (DES or RC2), which this host does not open; re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`".into(),
            ))
        }
    }
    info.decrypt(passphrase)
        .map(|doc| doc.as_bytes().to_vec())
        .map_err(|_| {
            KeyError::Passphrase(
                "the key does not open with this passphrase (wrong passphrase, or a damaged key)"
                    .into(),
            )
        })
}

/// The DER of the one PEM block of `text` whose label is one of `labels`.
fn pem_block<'l>(text: &str, labels: &[&'l str]) -> Result<(&'l str, Vec<u8>), String> {
    let begin = text
        .find("-----BEGIN ")
        .ok_or_else(|| "it is not PEM text (no -----BEGIN line)".to_owned())?;
    let rest = &text[begin + "-----BEGIN ".len()..];
    let label_end = rest
        .find("-----")
        .ok_or_else(|| "its -----BEGIN line does not end".to_owned())?;
    let found = &rest[..label_end];
    let label = labels
        .iter()
        .find(|label| **label == found)
        .ok_or_else(|| format!("it holds a PEM \"{}\"", found.escape_debug()))?;
    let body = &rest[label_end + "-----".len()..];
    let end_line = format!("-----END {found}-----");
    let end = body
        .find(&end_line)
        .ok_or_else(|| format!("it has no {end_line} line"))?;
    let base64: String = body[..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(base64.as_bytes())
        .map_err(|err| format!("its body is not base64 ({err})"))?;
    Ok((label, der))
}

/// DER as a PEM block of `label`, 64 characters a line.
fn to_pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str(&format!("-----END {label}-----\n"));
    text
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
