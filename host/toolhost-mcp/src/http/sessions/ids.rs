//! Session ids any process holding the key can check: 32 hex digits of randomness
//! followed by 32 hex digits of HMAC-SHA256 over them and the client's name, under the
//! server's session key.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The length of a session id: 64 hex digits.
pub const SESSION_ID_LEN: usize = 64;

/// What a terminated id is remembered by: its random half (the tag half follows from
/// it, the client and the key). `None` for text that is not an id.
pub(super) fn random_part(id: &str) -> Option<u128> {
    u128::from_str_radix(id.get(..SESSION_ID_LEN / 2)?, 16).ok()
}

/// The secret that signs session ids. Give every process behind one load balancer the
/// same key; a process with a key of its own accepts only its own sessions.
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// Why a session key could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionKeyError {
    /// The system's random source failed.
    #[error("cannot draw a random session key: {0}")]
    Random(String),
    /// The key material is too short.
    #[error("the session key is {got} bytes long; use at least 32 bytes of secret (e.g. `openssl rand -hex 32`)")]
    TooShort {
        /// Its length.
        got: usize,
    },
}

impl SessionKey {
    /// A fresh random key: sessions of this process only.
    ///
    /// # Errors
    /// [`SessionKeyError::Random`] when the system's random source fails.
    pub fn random() -> Result<Self, SessionKeyError> {
        let mut key = [0; 32];
        getrandom::fill(&mut key).map_err(|err| SessionKeyError::Random(err.to_string()))?;
        Ok(Self(key))
    }

    /// A key from secret material (a key file's content, surrounding blanks removed),
    /// hashed into the key.
    ///
    /// # Errors
    /// [`SessionKeyError::TooShort`] under 32 bytes.
    pub fn from_secret(secret: &[u8]) -> Result<Self, SessionKeyError> {
        let secret = secret.trim_ascii();
        if secret.len() < 32 {
            return Err(SessionKeyError::TooShort { got: secret.len() });
        }
        Ok(Self(<Sha256 as sha2::Digest>::digest(secret).into()))
    }

    fn tag(&self, random: &str, client: Option<&str>) -> Hmac<Sha256> {
        // HMAC pads a key shorter than the hash's block (64 bytes) with zeros, so the
        // 32-byte key padded here is the same key, given at the size that cannot fail.
        let mut block = [0u8; 64];
        block[..self.0.len()].copy_from_slice(&self.0);
        let mut mac = <Hmac<Sha256> as hmac::digest::KeyInit>::new(&block.into());
        mac.update(b"wasm-toolhost mcp session\0");
        mac.update(random.as_bytes());
        mac.update(b"\0");
        mac.update(client.unwrap_or_default().as_bytes());
        mac
    }

    /// A new session id for `client`.
    ///
    /// # Errors
    /// [`SessionKeyError::Random`] when the system's random source fails.
    pub fn issue(&self, client: Option<&str>) -> Result<String, SessionKeyError> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|err| SessionKeyError::Random(err.to_string()))?;
        let random = hex(&random);
        let tag = self.tag(&random, client).finalize().into_bytes();
        Ok(random + &hex(&tag[..16]))
    }

    /// Whether `id` is one this key issued to `client` (checked in constant time).
    pub fn verify(&self, id: &str, client: Option<&str>) -> bool {
        if id.len() != SESSION_ID_LEN
            || !id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return false;
        }
        let (random, tag) = id.split_at(SESSION_ID_LEN / 2);
        let Some(tag) = unhex(tag) else { return false };
        self.tag(random, client).verify_truncated_left(&tag).is_ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_against_key_and_client() {
        let key = SessionKey::random().unwrap();
        let id = key.issue(Some("alice")).unwrap();
        assert_eq!(id.len(), SESSION_ID_LEN);
        assert!(key.verify(&id, Some("alice")));
        assert!(!key.verify(&id, Some("bob")), "another client's id");
        assert!(!key.verify(&id, None));
        assert!(
            !SessionKey::random().unwrap().verify(&id, Some("alice")),
            "another key"
        );
        // Any change is refused, including case and length.
        let mut flipped = id.clone().into_bytes();
        flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
        assert!(!key.verify(std::str::from_utf8(&flipped).unwrap(), Some("alice")));
        assert!(!key.verify(&id.to_uppercase(), Some("alice")));
        assert!(!key.verify(&id[..63], Some("alice")));
        assert!(!key.verify(&format!("{id}0"), Some("alice")));
        assert!(!key.verify("../../etc/passwd", Some("alice")));
        assert!(!key.verify("", None));
        // Two processes with the same secret accept each other's ids.
        let secret = b"0123456789abcdef0123456789abcdef\n";
        let (a, b) = (
            SessionKey::from_secret(secret).unwrap(),
            SessionKey::from_secret(secret).unwrap(),
        );
        assert!(b.verify(&a.issue(None).unwrap(), None));
        assert_eq!(
            SessionKey::from_secret(b"  short  ")
                .unwrap_err()
                .to_string(),
            "the session key is 5 bytes long; use at least 32 bytes of secret (e.g. `openssl rand -hex 32`)"
        );
    }
}
