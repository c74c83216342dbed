//! Where a session's registry and files come from: [`Registries`], one for every
//! session or one built per session from its [`SessionInfo`].

use std::sync::Arc;

use toolhost::registry::Registry;

use crate::resources::FileResources;

/// What a new session's registry is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session id; `None` in stateless mode, where every request stands alone.
    pub id: Option<String>,
    /// The name of the client whose token opened it, if the token has one: a static
    /// token's name from the token file, or an OAuth access token's `sub` (never the
    /// same: a token whose `sub` is a token file's name is refused). Both are
    /// `A-Za-z0-9_-`, at most 64 characters.
    pub client: Option<String>,
    /// The scopes its bearer token granted (OAuth); empty for a static token. Those of
    /// the token that opened the session (or with which this process first saw it).
    pub scopes: Vec<String>,
    /// The issuer of its OAuth token (`None` for a static token): with
    /// [`SessionInfo::client`], the principal its quotas are kept for.
    pub issuer: Option<String>,
}

/// Builds a session's registry (e.g. the file tools over a storage root of its own).
/// Runs on a blocking thread: it may create directories.
pub type RegistryFactory = Arc<dyn Fn(&SessionInfo) -> Result<Arc<Registry>, String> + Send + Sync>;

/// Builds a session's registry and the files it offers as resources (`None`: none),
/// e.g. the file tools and the files of a storage root of its own
/// ([`Registries::per_session_root_with_files`]). Runs on a blocking thread.
pub type ServedFactory = Arc<
    dyn Fn(&SessionInfo) -> Result<(Arc<Registry>, Option<FileResources>), String> + Send + Sync,
>;

/// Which registry a session serves, and which files it offers as resources: one for
/// every session ([`Registries::shared`]) or one built per session
/// ([`Registries::per_session`], [`Registries::per_session_root`]). Made by its
/// constructors only, so what a session can be given grows without breaking callers.
///
/// ```
/// use std::sync::Arc;
/// use toolhost::registry::Registry;
/// use toolhost_mcp::http::Registries;
///
/// let registries = Registries::shared(Arc::new(Registry::new()));
/// assert!(format!("{registries:?}").starts_with("Registries::shared"));
/// ```
#[derive(Clone)]
pub struct Registries(pub(super) Served);

/// What [`Registries`] holds.
#[derive(Clone)]
pub(super) enum Served {
    /// The same registry (and files) for every session.
    Shared(Arc<Registry>, Option<FileResources>),
    /// A registry (and files) per session, built when the session is first seen by this
    /// process.
    PerSession(ServedFactory),
}

impl Registries {
    /// The same registry for every session, offering no resources.
    pub fn shared(registry: Arc<Registry>) -> Self {
        Self(Served::Shared(registry, None))
    }

    /// The same registry for every session, and the files of one storage root offered
    /// to every session as resources ([`FileResources`]).
    pub fn shared_with_files(registry: Arc<Registry>, files: FileResources) -> Self {
        Self(Served::Shared(registry, Some(files)))
    }

    /// A registry per session, built by `factory` when the session is first seen by
    /// this process, offering no resources.
    pub fn per_session(factory: RegistryFactory) -> Self {
        Self(Served::PerSession(Arc::new(move |info: &SessionInfo| {
            factory(info).map(|registry| (registry, None))
        })))
    }

    /// A registry and the files it offers per session, built by `factory` when the
    /// session is first seen by this process: each session sees only the files its
    /// factory gave it.
    pub fn per_session_with_files(factory: ServedFactory) -> Self {
        Self(Served::PerSession(factory))
    }

    /// The per-session factory, if these registries are built per session (for tests).
    #[cfg(test)]
    pub(crate) fn factory(&self) -> Option<&ServedFactory> {
        match &self.0 {
            Served::PerSession(factory) => Some(factory),
            Served::Shared(..) => None,
        }
    }
}

impl std::fmt::Debug for Registries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Served::Shared(registry, files) => f
                .debug_tuple("Registries::shared")
                .field(registry)
                .field(files)
                .finish(),
            Served::PerSession(_) => f.write_str("Registries::per_session(..)"),
        }
    }
}
