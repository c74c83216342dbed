//! Who may talk to the server: the `Host` allow-list (against DNS rebinding), the
//! `Origin` check (browsers), and bearer tokens.

use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest bearer token accepted: 16 characters. A short token is guessable over
/// the network however it is compared.
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest client name a token file may give: 64 characters of `A-Za-z0-9_-`.
pub const MAX_CLIENT_NAME_LEN: usize = 64;

/// Why a token file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("cannot read the token file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `TOKEN` or `TOKEN NAME`.
    #[error("{path} line {line}: {problem}; each line is a token, optionally followed by a space and the client's name (A-Za-z0-9_-, at most 64 characters)")]
    Line {
        /// The file.
        path: String,
        /// Its 1-based line number.
        line: usize,
        /// What is wrong (never the token itself).
        problem: String,
    },
    /// No token in the file.
    #[error("{path} holds no token; put one token per line (at least 16 characters, e.g. from `openssl rand -hex 32`)")]
    Empty {
        /// The file.
        path: String,
    },
}

/// One accepted token: its SHA-256 digest (the token itself is not kept) and the
/// client's name, if the file gave one.
#[derive(Clone)]
struct Token {
    digest: [u8; 32],
    client: Option<String>,
}

/// The bearer tokens the server accepts, each optionally naming its client.
///
/// Tokens are compared in constant time: the presented token is hashed and its digest
/// compared with every accepted digest, without stopping at a match.
#[derive(Clone, Default)]
pub struct Tokens {
    tokens: Vec<Token>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("count", &self.tokens.len())
            .field(
                "clients",
                &self
                    .tokens
                    .iter()
                    .map(|t| t.client.as_deref())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Who a request came from, once its token matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    /// The name the token file gave the token, if any.
    pub name: Option<String>,
}

/// Whether `name` is a valid client name (`A-Za-z0-9_-`, 1 to 64 characters): safe in a
/// path, a log line and a header.
pub fn valid_client_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CLIENT_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Tokens {
    /// Accepts `token` for client `name` (if given).
    ///
    /// # Errors
    /// A description of what is wrong: a token shorter than [`MIN_TOKEN_LEN`] or with
    /// characters outside visible ASCII, a name that is not [valid](valid_client_name),
    /// or a token given twice.
    pub fn add(&mut self, token: &str, name: Option<&str>) -> Result<(), String> {
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is {} characters long; use at least {MIN_TOKEN_LEN}",
                token.len()
            ));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token has characters other than visible ASCII".into());
        }
        if let Some(name) = name {
            if !valid_client_name(name) {
                return Err(format!("the client name {name:?} is not valid"));
            }
            if self
                .tokens
                .iter()
                .any(|t| t.client.as_deref() == Some(name))
            {
                return Err(format!("the client name {name:?} is given twice"));
            }
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if self.tokens.iter().any(|t| t.digest == digest) {
            return Err("the same token is given twice".into());
        }
        self.tokens.push(Token {
            digest,
            client: name.map(str::to_owned),
        });
        Ok(())
    }

    /// Reads a token file: one token per line, optionally followed by whitespace and the
    /// client's name; blank lines and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// [`TokenFileError`]; its messages never contain a token.
    pub fn from_file(path: &Path) -> Result<Self, TokenFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Reads a token file's text; `path` names it in errors.
    ///
    /// # Errors
    /// As [`Tokens::from_file`].
    pub fn parse(text: &str, path: &str) -> Result<Self, TokenFileError> {
        let mut tokens = Self::default();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (token, name) = (words.next().unwrap_or_default(), words.next());
            let problem = if words.next().is_some() {
                Err("more than a token and a name".to_owned())
            } else {
                tokens.add(token, name)
            };
            problem.map_err(|problem| TokenFileError::Line {
                path: path.to_owned(),
                line: index + 1,
                problem,
            })?;
        }
        if tokens.is_empty() {
            return Err(TokenFileError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(tokens)
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The client names the file gives.
    pub(crate) fn names(&self) -> Vec<String> {
        self.tokens
            .iter()
            .filter_map(|t| t.client.clone())
            .collect()
    }

    /// Whether every token names its client.
    pub fn all_named(&self) -> bool {
        self.tokens.iter().all(|t| t.client.is_some())
    }

    /// The client whose token `presented` is, in time independent of which token (if
    /// any) matches and of where a mismatch starts.
    pub fn check(&self, presented: &str) -> Option<Client> {
        self.identify(presented).map(|(_, client)| client)
    }

    /// As [`Tokens::check`], with which token matched: its place in the file (0 for
    /// the first), which tells apart unnamed tokens (tasks are bound to it).
    pub(crate) fn identify(&self, presented: &str) -> Option<(usize, Client)> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (index, token) in self.tokens.iter().enumerate() {
            let equal: bool = token.digest.ct_eq(&digest).into();
            if equal {
                found = Some((
                    index,
                    Client {
                        name: token.client.clone(),
                    },
                ));
            }
        }
        found
    }
}

/// The host name of a `Host` header (or an URI authority): lower-cased, without the port
/// and, for an IPv6 literal, with its brackets. `None` when it is malformed.
pub(super) fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        format!("[{inside}]")
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name.to_owned(),
            Some(_) => return None,
            None => host.to_owned(),
        }
    };
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_[]:".contains(&b));
    valid.then(|| name.to_ascii_lowercase())
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

/// An origin as compared: lower-cased, without a trailing `/`.
pub(super) fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        for (header, name) in [
            ("localhost:8080", Some("localhost")),
            ("LOCALHOST", Some("localhost")),
            ("127.0.0.1:1", Some("127.0.0.1")),
            ("[::1]:8080", Some("[::1]")),
            ("[::1]", Some("[::1]")),
            ("evil.example.com:8080", Some("evil.example.com")),
            ("", None),
            (":80", None),
            ("a:b", None),
            ("[::1]x", None),
            ("a b:80", None),
            ("a/b", None),
            ("x:123456", None),
        ] {
            assert_eq!(host_name(header).as_deref(), name, "{header:?}");
        }
    }

    #[test]
    fn token_files() {
        let tokens = Tokens::parse(
            "# comment\n\n0123456789abcdef alice\n  fedcba9876543210fedcba  \n",
            "t",
        )
        .unwrap();
        assert_eq!(tokens.len(), 2);
        assert!(!tokens.all_named());
        assert_eq!(
            tokens.check("0123456789abcdef"),
            Some(Client {
                name: Some("alice".into())
            })
        );
        assert_eq!(
            tokens.check("fedcba9876543210fedcba"),
            Some(Client { name: None })
        );
        assert_eq!(tokens.check("0123456789abcde"), None);
        assert_eq!(tokens.check(""), None);
        assert_eq!(tokens.check("0123456789abcdef "), None);

        let err = |text: &str| Tokens::parse(text, "f").unwrap_err().to_string();
        assert_eq!(
            err("short\n"),
            "f line 1: the token is 5 characters long; use at least 16; each line is a token, optionally followed by a space and the client's name (A-Za-z0-9_-, at most 64 characters)"
        );
        assert!(err("0123456789abcdef a b\n").contains("line 1: more than a token and a name"));
        assert!(err("0123456789abcdef ../x\n").contains("the client name \"../x\" is not valid"));
        assert!(err("0123456789abcdef a\n1123456789abcdef a\n")
            .starts_with("f line 2: the client name \"a\" is given twice"));
        assert!(err("0123456789abcdef\n0123456789abcdef\n")
            .starts_with("f line 2: the same token is given twice"));
        assert_eq!(
            err("# nothing\n"),
            "f holds no token; put one token per line (at least 16 characters, e.g. from `openssl rand -hex 32`)"
        );
        // No error message ever shows a token.
        assert!(!err("0123456789abcdefé\n").contains("0123456789"));
    }
}
