//! Credentials for a registry: given explicitly, or read from the docker config
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, as `docker login` and
//! `oras login` write it, credential helpers included), or none.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::OciError;

/// Largest docker config read (1 MiB): it is a few lines of JSON per registry.
const MAX_DOCKER_CONFIG_BYTES: u64 = 1024 * 1024;

/// How to log in to a registry. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No credentials (anonymous pulls; a token is still fetched when the registry
    /// hands one out anonymously).
    Anonymous,
    /// A user name and password (or token), sent as HTTP basic auth or exchanged for a
    /// bearer token as the registry asks.
    Basic {
        /// The user name.
        user: String,
        /// The password or token.
        password: String,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { user, .. } => f
                .debug_struct("Basic")
                .field("user", user)
                .field("password", &"<redacted>")
                .finish(),
        }
    }
}

impl Credentials {
    /// `user` with the password read from the environment variable `variable`.
    ///
    /// # Errors
    /// [`OciError::Credentials`] when the variable is not set, empty or not UTF-8.
    pub fn from_env(user: &str, variable: &str) -> Result<Self, OciError> {
        match std::env::var(variable) {
            Ok(password) if !password.is_empty() => Ok(Credentials::Basic {
                user: user.to_owned(),
                password,
            }),
            Ok(_) => Err(OciError::Credentials {
                message: format!(
                    "--registry-password-env {variable}: the variable is empty; set it to the password or token of {user}"
                ),
            }),
            Err(std::env::VarError::NotPresent) => Err(OciError::Credentials {
                message: format!(
                    "--registry-password-env {variable}: the variable is not set; export it with the password or token of {user} (the flag names the variable, not the password)"
                ),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(OciError::Credentials {
                message: format!("--registry-password-env {variable}: the value is not UTF-8"),
            }),
        }
    }

    /// Whether a user name is given.
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Credentials::Anonymous)
    }

    pub(crate) fn to_client(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Credentials::Anonymous => oci_client::secrets::RegistryAuth::Anonymous,
            Credentials::Basic { user, password } => {
                oci_client::secrets::RegistryAuth::Basic(user.clone(), password.clone())
            }
        }
    }
}

/// Where docker keeps its config: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json`; `None` when neither variable is set.
pub fn docker_config_path() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| Path::new(&home).join(".docker"))
        })
        .map(|dir| dir.join("config.json"))
}

/// The credentials for `registry` (`HOST[:PORT]`) in the docker config at `path`:
/// `auths` entries (`auth`, or `username` and `password`), and credential helpers
/// (`credHelpers`, `credsStore`) run as docker runs them. [`Credentials::Anonymous`]
/// when the file does not exist or names nothing for the registry.
///
/// An `identitytoken` (an OAuth refresh token some `docker login`s store) is not used:
/// a warning is logged and the pull is anonymous.
///
/// # Errors
/// [`OciError::Credentials`] when the file exists but cannot be read or parsed, or a
/// credential helper fails.
pub fn from_docker_config(path: &Path, registry: &str) -> Result<Credentials, OciError> {
    use docker_credential::{CredentialRetrievalError as E, DockerCredential};
    let bad = |message: String| {
        OciError::Credentials {
        message: format!(
            "{}: {message}; fix it (docker login rewrites it), or pass --registry-user and --registry-password-env",
            path.display()
        ),
    }
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Credentials::Anonymous)
        }
        Err(err) => return Err(bad(format!("cannot read it: {err}"))),
    };
    let metadata = file
        .metadata()
        .map_err(|err| bad(format!("cannot read it: {err}")))?;
    if !metadata.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    let mut text = Vec::new();
    file.take(MAX_DOCKER_CONFIG_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|err| bad(format!("cannot read it: {err}")))?;
    if text.len() as u64 > MAX_DOCKER_CONFIG_BYTES {
        return Err(bad("it is larger than 1 MiB".into()));
    }
    match docker_credential::get_credential_from_reader(text.as_slice(), registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(Credentials::Basic { user, password })
        }
        Ok(DockerCredential::IdentityToken(_)) => {
            tracing::warn!(
                "{} holds an identity token for {registry}, which this host does not use; pulling anonymously (pass --registry-user and --registry-password-env to log in)",
                path.display()
            );
            Ok(Credentials::Anonymous)
        }
        Err(E::NoCredentialConfigured) => Ok(Credentials::Anonymous),
        Err(E::ConfigReadError) => Err(bad("it is not valid JSON".into())),
        Err(E::CredentialDecodingError) => Err(bad(format!(
            "the auth entry of {registry} is not base64 of USER:PASSWORD"
        ))),
        Err(E::CredentialMismatchError) => Err(bad(format!(
            "the auth entry of {registry} does not match its username and password"
        ))),
        Err(E::HelperFailure { helper, stderr, .. }) => Err(bad(format!(
            "the credential helper docker-credential-{helper} failed for {registry}: {}",
            stderr.trim()
        ))),
        Err(other) => Err(bad(format!("no credentials for {registry}: {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn auths_entries_are_read_per_registry() {
        // "ada:s3cret" in base64.
        let (_dir, path) = config(
            r#"{"auths":{"127.0.0.1:5000":{"auth":"YWRhOnMzY3JldA=="},"other.io":{"username":"bob","password":"pw"}}}"#,
        );
        assert_eq!(
            from_docker_config(&path, "127.0.0.1:5000").unwrap(),
            Credentials::Basic {
                user: "ada".into(),
                password: "s3cret".into()
            }
        );
        assert_eq!(
            from_docker_config(&path, "other.io").unwrap(),
            Credentials::Basic {
                user: "bob".into(),
                password: "pw".into()
            }
        );
        assert_eq!(
            from_docker_config(&path, "third.io").unwrap(),
            Credentials::Anonymous
        );
    }

    #[test]
    fn a_missing_config_is_anonymous_and_a_broken_one_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            from_docker_config(&dir.path().join("none.json"), "r").unwrap(),
            Credentials::Anonymous
        );
        let (_dir, path) = config("{not json");
        let err = from_docker_config(&path, "r").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: it is not valid JSON", path.display())),
            "{err}"
        );
        let (_dir, path) = config(r#"{"auths":{"r":{"auth":"!!"}}}"#);
        let err = from_docker_config(&path, "r").unwrap_err().to_string();
        assert!(err.contains("is not base64 of USER:PASSWORD"), "{err}");
    }

    #[test]
    fn debug_never_shows_the_password() {
        let text = format!(
            "{:?}",
            Credentials::Basic {
                user: "ada".into(),
                password: "s3cret".into()
            }
        );
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("ada"), "{text}");
    }

    #[test]
    fn password_env_must_be_set() {
        let err = Credentials::from_env("ada", "TOOLHOST_OCI_TEST_UNSET_VARIABLE")
            .unwrap_err()
            .to_string();
        assert!(err.contains("the variable is not set"), "{err}");
    }
}
