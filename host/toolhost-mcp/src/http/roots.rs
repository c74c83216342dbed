//! One storage root per session ([`SessionRootTemplate`]): a directory named from the
//! session id and the token's client name, created on first use, and the registry over
//! it ([`Registries::per_session_root`]), built when the session is first seen by this
//! process (so any process with the same session key rebuilds it from the id alone).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use tracing::info;

use toolhost::registry::Registry;
use toolhost::vfs::{OsStorage, Storage};

use crate::FileResources;

use super::sessions::{Registries, SessionInfo};

/// The placeholder for the session id in a [`SessionRootTemplate`].
pub const SESSION_PLACEHOLDER: &str = "{session}";
/// The placeholder for the token's client name in a [`SessionRootTemplate`].
pub const CLIENT_PLACEHOLDER: &str = "{client}";

/// Where each session's storage root is: a path with [`SESSION_PLACEHOLDER`] (one root
/// per session) and/or [`CLIENT_PLACEHOLDER`] (one per token), e.g.
/// `/srv/mcp/{client}/{session}`, checked once by [`SessionRootTemplate::parse`].
///
/// The values put in are checked by the server before a root is named from them (hex
/// session ids, `A-Za-z0-9_-` client names), so no root leaves the template's base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRootTemplate {
    template: String,
    /// The part before the first placeholder's path component: must exist.
    base: PathBuf,
}

/// Why a session root template was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// Neither placeholder: every session would share one root.
    #[error("--session-root-template {template} has neither {SESSION_PLACEHOLDER} nor {CLIENT_PLACEHOLDER}, so every session would share one root; put {SESSION_PLACEHOLDER} (one root per session) or {CLIENT_PLACEHOLDER} (one per token) in it, e.g. /srv/mcp/{SESSION_PLACEHOLDER}")]
    NoPlaceholder {
        /// The template.
        template: String,
    },
    /// A `{...}` other than the two placeholders.
    #[error("--session-root-template {template} has a placeholder other than {SESSION_PLACEHOLDER} and {CLIENT_PLACEHOLDER}")]
    UnknownPlaceholder {
        /// The template.
        template: String,
    },
    /// A `..` component.
    #[error("--session-root-template {template} has a `..` component; give the directory plainly")]
    ParentDir {
        /// The template.
        template: String,
    },
    /// The directory above the placeholders does not exist.
    #[error("the directory of --session-root-template, {}, does not exist; create it first (each session's root is made inside it)", base.display())]
    NoBase {
        /// The directory.
        base: PathBuf,
    },
}

impl SessionRootTemplate {
    /// Checks `template`: at least one placeholder, no other `{...}`, no `..`, and the
    /// directory above the first placeholder exists.
    ///
    /// # Errors
    /// A [`TemplateError`] saying which of these fails.
    pub fn parse(template: &str) -> Result<Self, TemplateError> {
        let owned = || template.to_owned();
        let has_session = template.contains(SESSION_PLACEHOLDER);
        let has_client = template.contains(CLIENT_PLACEHOLDER);
        if !has_session && !has_client {
            return Err(TemplateError::NoPlaceholder { template: owned() });
        }
        let stripped = template
            .replace(SESSION_PLACEHOLDER, "")
            .replace(CLIENT_PLACEHOLDER, "");
        if stripped.contains(['{', '}']) {
            return Err(TemplateError::UnknownPlaceholder { template: owned() });
        }
        let path = Path::new(template);
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(TemplateError::ParentDir { template: owned() });
        }
        let mut base = PathBuf::new();
        for component in path.components() {
            if component.as_os_str().to_string_lossy().contains('{') {
                break;
            }
            base.push(component);
        }
        if base.as_os_str().is_empty() {
            base.push(".");
        }
        if !base.is_dir() {
            return Err(TemplateError::NoBase { base });
        }
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        Ok(Self {
            template: owned(),
            base,
        })
    }

    /// The template as given.
    pub fn as_str(&self) -> &str {
        &self.template
    }

    /// The directory every root is made in (canonical).
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// Whether it names [`SESSION_PLACEHOLDER`]: it needs sessions (no stateless mode).
    pub fn per_session(&self) -> bool {
        self.template.contains(SESSION_PLACEHOLDER)
    }

    /// Whether it names [`CLIENT_PLACEHOLDER`]: every token needs a client name.
    pub fn per_client(&self) -> bool {
        self.template.contains(CLIENT_PLACEHOLDER)
    }

    /// The root of `info`'s session.
    ///
    /// # Errors
    /// The message for the client when the template names what `info` lacks (a
    /// session id in stateless mode, a client name for an unnamed token).
    pub fn root(&self, info: &SessionInfo) -> Result<PathBuf, String> {
        let mut root = self.template.clone();
        if root.contains(SESSION_PLACEHOLDER) {
            let id = info
                .id
                .as_deref()
                .ok_or("a {session} root needs sessions; drop --stateless")?;
            root = root.replace(SESSION_PLACEHOLDER, id);
        }
        if root.contains(CLIENT_PLACEHOLDER) {
            let client = info
                .client
                .as_deref()
                .ok_or("a {client} root needs a named token (TOKEN NAME in --auth-token-file)")?;
            root = root.replace(CLIENT_PLACEHOLDER, client);
        }
        Ok(PathBuf::from(root))
    }

    /// The session's root, created (mode 0700, with what is missing above it under
    /// the base) and opened as storage.
    ///
    /// # Errors
    /// The message for the client when the root cannot be named ([`Self::root`]),
    /// created or opened.
    pub fn open(&self, info: &SessionInfo) -> Result<(PathBuf, Arc<dyn Storage>), String> {
        let root = self.root(info)?;
        create_private_dir(&root).map_err(|err| {
            format!(
                "cannot create the session's storage root {}: {err}",
                root.display()
            )
        })?;
        let storage = OsStorage::open(&root).map_err(|err| {
            format!(
                "cannot open the session's storage root {}: {err}",
                root.display()
            )
        })?;
        Ok((root, Arc::new(storage)))
    }
}

/// Creates `dir` (and what is missing above it) readable by this user only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

impl Registries {
    /// A registry per session over a storage root of its own: `template` names the
    /// root, which is created (0700) and opened when the session is first seen by this
    /// process, and `build` makes the session's registry over it (the file tools, and
    /// whatever else every session gets). `build` runs on a blocking thread; its `Err`
    /// refuses the session (`500`, the message to the client and the log).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolhost::registry::Registry;
    /// use toolhost::tools::{register_vfs_tools, VfsToolOptions};
    /// use toolhost_mcp::http::{Registries, SessionInfo, SessionRootTemplate};
    ///
    /// let base = tempfile::tempdir()?;
    /// let template = SessionRootTemplate::parse(&format!("{}/{{session}}", base.path().display()))?;
    /// let registries = Registries::per_session_root(template, |storage, _info: &SessionInfo| {
    ///     let registry = Registry::new();
    ///     register_vfs_tools(&registry, VfsToolOptions::new(storage)).map_err(|err| err.to_string())?;
    ///     Ok(registry)
    /// });
    /// # drop(registries);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_session_root<F>(template: SessionRootTemplate, build: F) -> Self
    where
        F: Fn(Arc<dyn Storage>, &SessionInfo) -> Result<Registry, String> + Send + Sync + 'static,
    {
        Self::per_session_root_with_files(template, move |storage, info| {
            build(storage, info).map(|registry| (registry, None))
        })
    }

    /// As [`Registries::per_session_root`], and each session offers the files of its
    /// own root as resources: `build` gives the session's registry and its
    /// [`FileResources`] (usually over the options its file tools were registered
    /// with), or `None` to offer none. A session never sees another's files: its
    /// resources are over the storage `build` was given for it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolhost::registry::Registry;
    /// use toolhost::tools::{register_vfs_tools, VfsToolOptions};
    /// use toolhost_mcp::http::{Registries, SessionInfo, SessionRootTemplate};
    /// use toolhost_mcp::FileResources;
    ///
    /// let base = tempfile::tempdir()?;
    /// let template = SessionRootTemplate::parse(&format!("{}/{{session}}", base.path().display()))?;
    /// let registries = Registries::per_session_root_with_files(template, |storage, _info: &SessionInfo| {
    ///     let options = VfsToolOptions::builder(storage).hide_hidden_paths(true).build();
    ///     let registry = Registry::new();
    ///     register_vfs_tools(&registry, options.clone()).map_err(|err| err.to_string())?;
    ///     Ok((registry, Some(FileResources::new(options))))
    /// });
    /// # drop(registries);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn per_session_root_with_files<F>(template: SessionRootTemplate, build: F) -> Self
    where
        F: Fn(Arc<dyn Storage>, &SessionInfo) -> Result<(Registry, Option<FileResources>), String>
            + Send
            + Sync
            + 'static,
    {
        Self::per_session_with_files(Arc::new(move |info: &SessionInfo| {
            let (root, storage) = template.open(info)?;
            let (registry, files) = build(storage, info)?;
            info!(
                session_id = info.id.as_deref().unwrap_or("-"),
                client = info.client.as_deref().unwrap_or("-"),
                root = %root.display(),
                resources = files.is_some(),
                "session storage root ready"
            );
            Ok((Arc::new(registry), files))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: Option<&str>, client: Option<&str>) -> SessionInfo {
        SessionInfo {
            id: id.map(str::to_owned),
            client: client.map(str::to_owned),
            scopes: Vec::new(),
            issuer: None,
        }
    }

    #[test]
    fn templates() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let at = |t: &str| format!("{}/{t}", dir.path().display());
        let template = SessionRootTemplate::parse(&at("{client}/s-{session}")).unwrap();
        assert_eq!(template.base(), base);
        assert!(template.per_session() && template.per_client());
        assert_eq!(
            template.root(&info(Some("ab12"), Some("alice"))).unwrap(),
            PathBuf::from(at("alice/s-ab12"))
        );
        let err = |t: &str| SessionRootTemplate::parse(t).unwrap_err().to_string();
        assert!(err(&at("fixed")).contains("has neither {session} nor {client}"));
        assert!(err(&at("{sesion}")).contains("neither"));
        assert!(err(&at("{session}/{other}")).contains("a placeholder other than"));
        assert!(err(&at("../{session}")).contains("`..`"));
        assert!(err("/does/not/exist/{session}")
            .contains("the directory of --session-root-template, /does/not/exist, does not exist"));
        assert_eq!(
            template.root(&info(None, Some("alice"))).unwrap_err(),
            "a {session} root needs sessions; drop --stateless"
        );
        assert_eq!(
            template.root(&info(Some("ab12"), None)).unwrap_err(),
            "a {client} root needs a named token (TOKEN NAME in --auth-token-file)"
        );
    }

    #[test]
    fn each_session_gets_its_own_private_root() {
        let base = tempfile::tempdir().unwrap();
        let template =
            SessionRootTemplate::parse(&format!("{}/{{session}}", base.path().display())).unwrap();
        let registries = Registries::per_session_root(template, |storage, _info| {
            storage
                .write("mine.txt", b"x", "text/plain")
                .map_err(|err| err.to_string())?;
            Ok(Registry::new())
        });
        let factory = registries.factory().expect("a per-session factory");
        factory(&info(Some("aa"), None)).unwrap();
        factory(&info(Some("bb"), None)).unwrap();
        for id in ["aa", "bb"] {
            let root = base.path().join(id);
            assert!(root.join("mine.txt").is_file(), "{id}'s own file");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&root).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o700, "{id}'s root is private");
            }
        }
    }
}
