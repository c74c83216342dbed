//! `oci://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST)`: where a plugin lives in a registry.

use std::fmt;
use std::net::IpAddr;

/// Why a reference was refused. Each message shows the text and the form expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// It does not start with `oci://`.
    #[error("\"{text}\" is not an oci:// reference; write oci://HOST[:PORT]/REPOSITORY:TAG (or @sha256:DIGEST), e.g. oci://ghcr.io/acme/greet:1")]
    NotOci {
        /// The text given.
        text: String,
    },
    /// The text after `oci://` is not `HOST[:PORT]/REPOSITORY...`.
    #[error("\"{text}\": {reason}; write oci://HOST[:PORT]/REPOSITORY:TAG (or @sha256:DIGEST), e.g. oci://ghcr.io/acme/greet:1")]
    Invalid {
        /// The text given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// Neither a tag nor a digest: which version is meant is not said.
    #[error("\"{text}\" names no version; add a tag (oci://{registry}/{repository}:1) or a digest (oci://{registry}/{repository}@sha256:...)")]
    NoVersion {
        /// The text given.
        text: String,
        /// Its registry.
        registry: String,
        /// Its repository.
        repository: String,
    },
    /// A push by digest only: a push needs a tag to publish under.
    #[error("\"{text}\" has no tag to publish under; push to oci://{registry}/{repository}:TAG (the digest is printed after the push)")]
    NoTag {
        /// The text given.
        text: String,
        /// Its registry.
        registry: String,
        /// Its repository.
        repository: String,
    },
}

/// A parsed `oci://` reference. The registry is always explicit (no Docker Hub default):
/// a plugin's source is written down in the lock file as it was given.
///
/// ```
/// use toolhost_oci::OciReference;
///
/// let reference: OciReference = "oci://127.0.0.1:5000/tools/greet:1".parse()?;
/// assert_eq!(reference.registry(), "127.0.0.1:5000");
/// assert_eq!(reference.repository(), "tools/greet");
/// assert_eq!(reference.tag(), Some("1"));
/// assert_eq!(reference.plugin_name(), "greet");
/// assert!(reference.is_loopback());
/// assert!("docker://127.0.0.1:5000/tools/greet:1".parse::<OciReference>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    registry: String,
    host: String,
    repository: String,
    tag: Option<String>,
    digest: Option<String>,
}

impl OciReference {
    /// Parses `text`, which must name a tag or a digest (or both).
    ///
    /// # Errors
    /// [`ReferenceError`].
    pub fn parse(text: &str) -> Result<Self, ReferenceError> {
        let reference = Self::parse_any(text)?;
        if reference.tag.is_none() && reference.digest.is_none() {
            return Err(ReferenceError::NoVersion {
                text: text.to_owned(),
                registry: reference.registry,
                repository: reference.repository,
            });
        }
        Ok(reference)
    }

    /// Parses a reference to push to: it must name a tag.
    ///
    /// # Errors
    /// [`ReferenceError`].
    pub fn parse_for_push(text: &str) -> Result<Self, ReferenceError> {
        let reference = Self::parse_any(text)?;
        if reference.tag.is_none() {
            return Err(ReferenceError::NoTag {
                text: text.to_owned(),
                registry: reference.registry,
                repository: reference.repository,
            });
        }
        Ok(Self {
            digest: None,
            ..reference
        })
    }

    fn parse_any(text: &str) -> Result<Self, ReferenceError> {
        let invalid = |reason: &str| ReferenceError::Invalid {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(rest) = text.strip_prefix("oci://") else {
            return Err(ReferenceError::NotOci {
                text: text.to_owned(),
            });
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| invalid("there is no repository after the registry"))?;
        let host = check_registry(registry).map_err(|reason| invalid(&reason))?;
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                check_digest(digest).map_err(|reason| invalid(&reason))?;
                (path, Some(digest.to_owned()))
            }
            None => (path, None),
        };
        // A tag follows the last `:` of the last segment (a port's `:` is in the registry).
        let last = path.rsplit('/').next().unwrap_or(path);
        let (repository, tag) = match last.rsplit_once(':') {
            Some((_, tag)) => {
                check_tag(tag).map_err(|reason| invalid(&reason))?;
                (&path[..path.len() - tag.len() - 1], Some(tag.to_owned()))
            }
            None => (path, None),
        };
        check_repository(repository).map_err(|reason| invalid(&reason))?;
        Ok(Self {
            registry: registry.to_owned(),
            host,
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// `HOST[:PORT]`, as written.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The host alone (no port, no brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `REPO`, e.g. `acme/greet`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, if one was given.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The digest (`sha256:...`), if one was given.
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The repository's last segment: the plugin's default name (`greet` for
    /// `acme/greet`). Repository names are lower-case letters, digits and `._-`.
    pub fn plugin_name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// Whether the registry is on this machine (127.0.0.0/8, ::1, `localhost`): those are
    /// spoken to over plain HTTP.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .parse::<IpAddr>()
                .is_ok_and(|address| address.is_loopback())
    }

    /// The same repository at `digest`, without a tag.
    pub fn with_digest(&self, digest: &str) -> Self {
        Self {
            tag: None,
            digest: Some(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The same repository at `tag` (a signature's `sha256-HEX.sig`).
    pub(crate) fn with_tag(&self, tag: &str) -> Self {
        Self {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        }
    }

    /// The reference as `oci-client` takes it.
    pub(crate) fn to_client(&self) -> oci_client::Reference {
        match (&self.tag, &self.digest) {
            (Some(tag), Some(digest)) => oci_client::Reference::with_tag_and_digest(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
                digest.clone(),
            ),
            (None, Some(digest)) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (tag, None) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone().unwrap_or_else(|| "latest".to_owned()),
            ),
        }
    }
}

impl std::str::FromStr for OciReference {
    type Err = ReferenceError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// `HOST[:PORT]` with an explicit host: a dotted name, an IP address (IPv6 in
/// brackets), or `localhost`. Returns the host.
fn check_registry(registry: &str) -> Result<String, String> {
    if registry.is_empty() {
        return Err("the registry is empty".into());
    }
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 registry address lacks its closing ]")?;
        host.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("\"{host}\" is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or("after ] comes :PORT")?),
        };
        (host, port)
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |port| port == 0) {
            return Err(format!(
                "the registry's port \"{port}\" is not a port number (1-65535)"
            ));
        }
    }
    let named = host.contains('.')
        || host.eq_ignore_ascii_case("localhost")
        || registry.starts_with('[')
        || port.is_some();
    if !named {
        return Err(format!(
            "\"{host}\" does not look like a registry host (a name with a dot, an address, localhost, or HOST:PORT); the registry is always written out, e.g. oci://ghcr.io/{host}/..."
        ));
    }
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':')
        && !host.starts_with(['-', '.'])
        && !host.ends_with('-');
    if !valid {
        return Err(format!("\"{host}\" is not a host name"));
    }
    Ok(host.to_owned())
}

/// The distribution spec's repository grammar: lower-case path components of
/// `[a-z0-9]+` joined by `.`, `_`, `__` or `-`s, separated by `/`.
fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() {
        return Err("the repository is empty".into());
    }
    if repository.len() > 255 {
        return Err("the repository is longer than 255 characters".into());
    }
    for component in repository.split('/') {
        let valid = !component.is_empty()
            && component
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && component.as_bytes()[0].is_ascii_alphanumeric()
            && component.as_bytes()[component.len() - 1].is_ascii_alphanumeric()
            && !component.contains("..")
            && !component.contains("._")
            && !component.contains("_.");
        if !valid {
            return Err(format!(
                "repository component \"{component}\" is not valid (lower-case letters and digits, joined by . _ or -)"
            ));
        }
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), String> {
    let valid = !tag.is_empty()
        && tag.len() <= 128
        && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.as_bytes()[0] == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "tag \"{tag}\" is not valid (up to 128 letters, digits, . _ -, not starting with . or -)"
        ))
    }
}

/// `sha256:` and 64 lower-case hex digits (the only algorithm this host verifies).
pub(crate) fn check_digest(digest: &str) -> Result<(), String> {
    let valid = digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "digest \"{digest}\" is not sha256: and 64 lower-case hex digits"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn tags_digests_ports_and_paths() {
        let r = OciReference::parse("oci://ghcr.io/acme/tools/greet:1.2.0").unwrap();
        assert_eq!(
            (r.registry(), r.host(), r.repository(), r.tag(), r.digest()),
            (
                "ghcr.io",
                "ghcr.io",
                "acme/tools/greet",
                Some("1.2.0"),
                None
            )
        );
        assert_eq!(r.plugin_name(), "greet");
        assert!(!r.is_loopback());
        assert_eq!(r.to_string(), "oci://ghcr.io/acme/tools/greet:1.2.0");

        let text = format!("oci://localhost:5000/greet@{DIGEST}");
        let r = OciReference::parse(&text).unwrap();
        assert_eq!(
            (r.registry(), r.host(), r.tag(), r.digest()),
            ("localhost:5000", "localhost", None, Some(DIGEST))
        );
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), text);
        assert_eq!(
            r.to_client().to_string(),
            format!("localhost:5000/greet@{DIGEST}")
        );

        let r = OciReference::parse(&format!("oci://[::1]:5000/a/b:t@{DIGEST}")).unwrap();
        assert_eq!(
            (r.host(), r.tag(), r.digest()),
            ("::1", Some("t"), Some(DIGEST))
        );
        assert!(r.is_loopback());
        assert!(OciReference::parse("oci://127.0.0.2:1/x:y")
            .unwrap()
            .is_loopback());
        assert!(!OciReference::parse("oci://10.0.0.1:1/x:y")
            .unwrap()
            .is_loopback());
    }

    fn refused(text: &str) -> String {
        OciReference::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_references_say_what_to_write() {
        for text in [
            "ghcr.io/acme/greet:1",
            "docker://ghcr.io/a:1",
            "OCI://ghcr.io/a:1",
            "",
        ] {
            assert!(
                refused(text)
                    .contains("is not an oci:// reference; write oci://HOST[:PORT]/REPOSITORY:TAG"),
                "{text}: {}",
                refused(text)
            );
        }
        assert!(refused("oci://ghcr.io").contains("there is no repository"));
        assert!(
            refused("oci://acme/greet:1").contains("\"acme\" does not look like a registry host")
        );
        assert!(refused("oci://ghcr.io/Acme/greet:1").contains("repository component \"Acme\""));
        assert!(refused("oci://ghcr.io/a/../b:1").contains("repository component \"..\""));
        assert!(refused("oci://ghcr.io/a//b:1").contains("repository component \"\""));
        assert!(refused("oci://ghcr.io/a:-x").contains("tag \"-x\""));
        assert!(refused("oci://ghcr.io:0/a:1").contains("port \"0\""));
        assert!(refused("oci://ghcr.io:http/a:1").contains("port \"http\""));
        assert!(refused("oci://ghcr.io/a@sha256:abc").contains("64 lower-case hex digits"));
        assert!(refused("oci://ghcr.io/a@md5:abc").contains("is not sha256:"));
        assert!(refused("oci://gh_cr.io/a:1").contains("is not a host name"));
        assert_eq!(
            refused("oci://ghcr.io/acme/greet"),
            "\"oci://ghcr.io/acme/greet\" names no version; add a tag (oci://ghcr.io/acme/greet:1) or a digest (oci://ghcr.io/acme/greet@sha256:...)"
        );
        assert_eq!(
            OciReference::parse_for_push(&format!("oci://ghcr.io/acme/greet@{DIGEST}"))
                .unwrap_err()
                .to_string(),
            "\"oci://ghcr.io/acme/greet@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\" has no tag to publish under; push to oci://ghcr.io/acme/greet:TAG (the digest is printed after the push)"
        );
    }
}
