//! [`RegistryClient`]: resolve, download and publish one plugin artifact.
//!
//! This file holds the client, its options and results, `resolve` and `download`; the
//! bounded transfers are in `fetch.rs`, the challenge and token exchange in `token.rs`,
//! publishing in `push.rs`, the error mapping in `errors.rs`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::layout::{
    self, check_component, plugin_layers, Fetched, PluginLayers, MAX_MANIFEST_LAYER_BYTES,
    WASM_CONFIG_MEDIA_TYPE,
};
use super::{Credentials, OciError, OciReference};
use crate::error::Operation;

mod errors;
mod fetch;
mod push;
mod signatures;
mod token;

pub use signatures::Signed;

use token::Authorization;

/// Default largest component fetched (64 MiB): the example plugins are 100-300 KiB and
/// large real-world components a few tens of MiB.
pub(crate) const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 * 1024 * 1024;

/// Default time limit of each request (connect, and each wait for data).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The slowest average download accepted (64 KiB/s): a blob of N bytes must arrive
/// within the timeout plus N / 64 KiB seconds, so a registry that trickles bytes cannot
/// hold a pull forever.
pub(crate) const MIN_DOWNLOAD_BYTES_PER_SECOND: u64 = 64 * 1024;

/// Default time limit of a whole pull or push (10 minutes): every request, body and
/// retry of it. At the slowest rate accepted ([`MIN_DOWNLOAD_BYTES_PER_SECOND`]) 10
/// minutes carry about 38 MiB; raise it for larger components over slow links.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(10 * 60);

/// Largest token response read (64 KiB): a registry's token service answers a JSON
/// object of a token or two, a few KiB. Reading stops there with
/// [`OciError::BodyTooLarge`].
pub(crate) const MAX_TOKEN_BYTES: u64 = 64 * 1024;

/// Most of an error answer's body read for its message (64 KiB); the rest is dropped,
/// and the error is the answer's status.
pub(crate) const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Told how a download goes: what (`greet.wasm`), bytes so far, bytes in all.
pub type ProgressFn = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// How to reach a registry: [`ClientOptions::default`] (anonymous, HTTPS except on
/// loopback, 30 s per request, 10 minutes in all, 64 MiB per component, no progress), changed with the `with_*`
/// setters and read back with the getters. The fields are private, so a setting added
/// later is not a breaking change.
///
/// ```
/// use std::time::Duration;
/// use toolhost_oci::{ClientOptions, Credentials};
///
/// let options = ClientOptions::default()
///     .with_timeout(Duration::from_secs(5))
///     .with_insecure_registries(vec!["registry.lan:5000".to_owned()])
///     .with_credentials(Credentials::Basic { user: "ada".into(), password: "s3cret".into() });
/// assert_eq!(options.timeout(), Duration::from_secs(5));
/// assert_eq!(options.deadline(), Duration::from_secs(600));
/// assert_eq!(options.insecure_registries(), ["registry.lan:5000"]);
/// assert!(!format!("{options:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
pub struct ClientOptions {
    credentials: Credentials,
    insecure_registries: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) deadline: Duration,
    pub(crate) max_component_bytes: u64,
    pub(crate) progress: Option<ProgressFn>,
}

impl ClientOptions {
    /// How to log in. Default [`Credentials::Anonymous`].
    #[must_use]
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Registries (`HOST` or `HOST:PORT`) spoken to over plain HTTP. Loopback ones always
    /// are; every other one uses HTTPS unless listed here. Default: none.
    #[must_use]
    pub fn with_insecure_registries(mut self, registries: Vec<String>) -> Self {
        self.insecure_registries = registries;
        self
    }

    /// Time limit of each request (connect, and each wait for data); a body also has a
    /// deadline of this plus its cap (or declared size) at the slowest rate accepted,
    /// 64 KiB/s. Default 30 s; past it a
    /// request ends with [`OciError::TimedOut`]. No bound of its own: the deadline
    /// ([`with_deadline`](Self::with_deadline)) still ends everything.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Time limit of everything the client does, counted from its creation: a whole
    /// pull (challenge, token, manifests, config, blobs, retries) or push. Default
    /// 10 minutes (at 64 KiB/s, the slowest rate accepted, about 38 MiB); past it the pull ends with
    /// [`OciError::DeadlinePassed`].
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Largest component fetched; reading stops there with [`OciError::TooLarge`].
    /// Default 64 MiB.
    #[must_use]
    pub fn with_max_component_bytes(mut self, bytes: u64) -> Self {
        self.max_component_bytes = bytes;
        self
    }

    /// Called as a download goes (what, bytes so far, bytes in all). Default: none.
    #[must_use]
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// How the client logs in.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Registries spoken to over plain HTTP besides loopback ones.
    pub fn insecure_registries(&self) -> &[String] {
        &self.insecure_registries
    }

    /// Time limit of each request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Time limit of a whole pull or push.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Largest component fetched.
    pub fn max_component_bytes(&self) -> u64 {
        self.max_component_bytes
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            credentials: Credentials::Anonymous,
            insecure_registries: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            progress: None,
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("credentials", &self.credentials)
            .field("insecure_registries", &self.insecure_registries)
            .field("timeout", &self.timeout)
            .field("deadline", &self.deadline)
            .field("max_component_bytes", &self.max_component_bytes)
            .finish_non_exhaustive()
    }
}

/// What a reference resolved to: the artifact's digest and its layers, checked to be a
/// plugin. Nothing is downloaded but the manifest (and config).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Resolved {
    /// The digest the reference resolved to (of the index, when it is one): what the lock
    /// records as the source's digest, and what a later pull of the tag is compared with.
    pub digest: String,
    /// The component's size in bytes, as declared.
    pub component_size: u64,
    /// Whether the artifact carries a plugin manifest.
    pub has_manifest: bool,
    layers: PluginLayers,
    /// The manifests read, from the one `digest` names down to the image manifest (one,
    /// or an index and its image manifest), as the registry sent them.
    manifests: Vec<Vec<u8>>,
}

impl Resolved {
    /// The manifests read, from the one [`digest`](Self::digest) names down to the image
    /// manifest (one, or an index and its image manifest): what a lock keeps to check a
    /// signature again offline.
    pub fn manifests(&self) -> &[Vec<u8>] {
        &self.manifests
    }
}

/// A file downloaded into the plugin directory under a temporary name, verified.
#[derive(Debug)]
#[non_exhaustive]
pub struct PulledFile {
    /// The temporary file (deleted when dropped, unless persisted).
    pub file: tempfile::NamedTempFile,
    /// `sha256:...` of its bytes (checked against the registry's descriptor).
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A plugin downloaded and verified, not yet installed.
#[derive(Debug)]
#[non_exhaustive]
pub struct Pulled {
    /// The component.
    pub component: PulledFile,
    /// Its manifest, when the artifact carries one.
    pub manifest: Option<PulledFile>,
}

/// What a push published.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pushed {
    /// The digest of the OCI manifest pushed: `oci://HOST/REPO@DIGEST` pulls exactly it.
    pub digest: String,
    /// The layers pushed (1: the component; 2: and its manifest).
    pub layers: usize,
}

/// A client for one repository of one registry, for one pull or push.
///
/// # Sandbox
/// HTTPS unless the registry is on loopback or named insecure. Every body a pull reads
/// is capped and read as it arrives: a token response at 64 KiB, an OCI
/// manifest or index at [`MAX_OCI_MANIFEST_BYTES`](crate::layout::MAX_OCI_MANIFEST_BYTES),
/// the config at [`MAX_CONFIG_BYTES`](crate::layout::MAX_CONFIG_BYTES), a component at
/// [`ClientOptions::max_component_bytes`], a manifest layer at
/// [`MAX_MANIFEST_LAYER_BYTES`] (a blob never past its declared size either), an error
/// answer at 64 KiB; every blob is checked against its digest. Each
/// body has a deadline (the timeout plus its size at 64 KiB/s, the slowest rate accepted),
/// and the whole pull or push [`ClientOptions::deadline`]. Alternate `urls` a manifest
/// gives for a layer are never fetched. Credentials are not sent to another host when a
/// request is redirected there, a redirect from HTTPS to plain HTTP is refused, and a
/// token is fetched over HTTPS only from an HTTPS registry.
///
/// A push goes through oci-client: its deadline bounds it in time, but oci-client reads
/// the registry's answers to a push (and, without a bearer token, its token exchange)
/// whole; push to registries you trust.
pub struct RegistryClient {
    client: oci_client::Client,
    http: reqwest::Client,
    reference: OciReference,
    client_reference: oci_client::Reference,
    insecure: bool,
    options: ClientOptions,
    authorization: OnceCell<Authorization>,
    /// When [`ClientOptions::deadline`] ends.
    ends_at: tokio::time::Instant,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient")
            .field("reference", &self.reference)
            .field("insecure", &self.insecure)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl RegistryClient {
    /// A client for `reference`'s repository.
    ///
    /// # Errors
    /// [`OciError::Protocol`] when the HTTP client cannot be built.
    pub fn new(reference: &OciReference, options: ClientOptions) -> Result<Self, OciError> {
        // reqwest is built without a bundled crypto provider; ring is ours. Installing
        // twice is harmless (the first one stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let insecure = reference.is_loopback()
            || options
                .insecure_registries
                .iter()
                .any(|name| name == reference.registry() || name == reference.host());
        let config = ClientConfig {
            protocol: if insecure {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            read_timeout: Some(options.timeout),
            connect_timeout: Some(options.timeout),
            user_agent: concat!("wasm-toolhost/", env!("CARGO_PKG_VERSION")),
            max_concurrent_download: 1,
            max_concurrent_upload: 1,
            ..ClientConfig::default()
        };
        let registry = reference.registry().to_owned();
        let build_error = |message: String| OciError::Protocol {
            registry: registry.clone(),
            what: "setting up".into(),
            message,
        };
        let client = oci_client::Client::try_from(config)
            .map_err(|err| build_error(format!("cannot build the HTTP client: {err}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(options.timeout)
            .read_timeout(options.timeout)
            .user_agent(concat!("wasm-toolhost/", env!("CARGO_PKG_VERSION")))
            .redirect(redirect_policy())
            .build()
            .map_err(|err| build_error(format!("cannot build the HTTP client: {err}")))?;
        Ok(Self {
            client,
            http,
            client_reference: reference.to_client(),
            reference: reference.clone(),
            insecure,
            // A deadline too far to add counts as a year from now.
            ends_at: tokio::time::Instant::now()
                .checked_add(options.deadline)
                .or_else(|| {
                    tokio::time::Instant::now().checked_add(Duration::from_secs(365 * 86_400))
                })
                .unwrap_or_else(tokio::time::Instant::now),
            options,
            authorization: OnceCell::new(),
        })
    }

    /// Whether this client speaks plain HTTP.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// `http://HOST[:PORT]` or `https://HOST[:PORT]`.
    fn base_url(&self) -> String {
        format!(
            "{}://{}",
            if self.insecure { "http" } else { "https" },
            self.reference.registry()
        )
    }

    /// `work`, ended with [`OciError::DeadlinePassed`] when the client's deadline passes.
    async fn within<T>(
        &self,
        operation: Operation,
        work: impl std::future::Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        match tokio::time::timeout_at(self.ends_at, work).await {
            Ok(result) => result,
            Err(_) => Err(OciError::DeadlinePassed {
                registry: self.reference.registry().to_owned(),
                operation,
                after: self.options.deadline,
            }),
        }
    }

    /// Fetches the reference's manifest (following an index to its wasm entry) and checks
    /// that it is a plugin: one `application/wasm` layer within the size limit, at most
    /// one plugin manifest layer, and (when the config is a Wasm config) a component.
    ///
    /// # Errors
    /// Any [`OciError`]: unreachable, time-out, 401/403/404, a digest that does not
    /// match, not a plugin, too large, the deadline passed.
    pub async fn resolve(&self) -> Result<Resolved, OciError> {
        self.within(Operation::Pull, self.resolve_now()).await
    }

    async fn resolve_now(&self) -> Result<Resolved, OciError> {
        let reference = &self.reference;
        let (body, digest, content_type) = self.get_manifest(reference).await?;
        let mut manifests = vec![body.clone()];
        let not_a_plugin = |reason: String| OciError::NotAPlugin {
            reference: reference.to_string(),
            reason,
        };
        let image = match layout::parse_manifest(&body, content_type.as_deref())
            .map_err(|reason| not_a_plugin(format!("its manifest is not usable: {reason}")))?
        {
            Fetched::Image(image) => image,
            Fetched::Index(index) => {
                let entry = layout::pick_from_index(&index).map_err(not_a_plugin)?;
                crate::reference::check_digest(&entry).map_err(|reason| {
                    not_a_plugin(format!("its index names an entry with a {reason}"))
                })?;
                let (body, _, content_type) =
                    self.get_manifest(&reference.with_digest(&entry)).await?;
                manifests.push(body.clone());
                match layout::parse_manifest(&body, content_type.as_deref()).map_err(|reason| {
                    not_a_plugin(format!(
                        "the manifest its index points to is not usable: {reason}"
                    ))
                })? {
                    Fetched::Image(image) => image,
                    Fetched::Index(_) => {
                        return Err(not_a_plugin(
                            "its index points to another index; a plugin is an image manifest"
                                .into(),
                        ))
                    }
                }
            }
        };
        let layers = plugin_layers(&image).map_err(not_a_plugin)?;
        for layer in [Some(&layers.component), layers.manifest.as_ref()]
            .into_iter()
            .flatten()
        {
            crate::reference::check_digest(&layer.digest).map_err(|reason| {
                not_a_plugin(format!(
                    "a layer's {reason}; this host verifies sha256 only"
                ))
            })?;
        }
        let component_size = layout::size_of(&layers.component).map_err(not_a_plugin)?;
        if component_size > self.options.max_component_bytes {
            return Err(OciError::TooLarge {
                reference: reference.to_string(),
                what: "component".into(),
                size: component_size,
                limit: self.options.max_component_bytes,
                endless: false,
            });
        }
        if layers.config.media_type == WASM_CONFIG_MEDIA_TYPE {
            self.check_config(&layers.config).await?;
        }
        Ok(Resolved {
            digest,
            component_size,
            has_manifest: layers.manifest.is_some(),
            layers,
            manifests,
        })
    }

    /// Downloads what `resolved` names into `dir`, as temporary files (`.NAME.wasm.*`),
    /// each checked against its digest and its size as it arrives, and the component's
    /// header. A failure leaves nothing behind.
    ///
    /// # Errors
    /// Any [`OciError`]; [`OciError::Io`] when the directory cannot be written.
    pub async fn download(
        &self,
        resolved: &Resolved,
        dir: &Path,
        name: &str,
    ) -> Result<Pulled, OciError> {
        self.within(Operation::Pull, self.download_now(resolved, dir, name))
            .await
    }

    async fn download_now(
        &self,
        resolved: &Resolved,
        dir: &Path,
        name: &str,
    ) -> Result<Pulled, OciError> {
        let reference = self.reference.to_string();
        let component_file = format!("{name}.wasm");
        let component = self
            .fetch_to_file(
                &resolved.layers.component,
                &component_file,
                self.options.max_component_bytes,
                dir,
            )
            .await?;
        let mut head = [0_u8; 8];
        let read = {
            use std::io::Read;
            let mut file = component.file.reopen().map_err(|error| OciError::Io {
                path: component.file.path().to_owned(),
                message: "cannot read the downloaded component".into(),
                error,
            })?;
            file.read(&mut head).unwrap_or(0)
        };
        check_component(&head[..read]).map_err(|reason| OciError::NotAComponent {
            reference: reference.clone(),
            reason,
        })?;
        let manifest = match &resolved.layers.manifest {
            Some(layer) => Some(
                self.fetch_to_file(
                    layer,
                    &format!("{name}.toml"),
                    MAX_MANIFEST_LAYER_BYTES,
                    dir,
                )
                .await?,
            ),
            None => None,
        };
        Ok(Pulled {
            component,
            manifest,
        })
    }
}

/// The redirect policy of our own requests: at most [`MAX_REDIRECTS`], never from HTTPS
/// to plain HTTP (reqwest already drops credentials on a redirect to another host).
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let downgrade = attempt.url().scheme() == "http"
            && attempt.previous().iter().any(|url| url.scheme() == "https");
        if downgrade {
            attempt.error("a redirect from HTTPS to plain HTTP was refused")
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    })
}

/// `sha256:` and the hex digest of `bytes`.
pub(crate) fn sha256_text(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
