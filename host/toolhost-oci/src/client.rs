//! [`RegistryClient`]: resolve, download and publish one plugin artifact.

use std::io::{Seek, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::RegistryOperation;
use oci_wasm::{ToConfig, WasmConfig};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::error::Operation;
use super::layout::{
    self, check_component, plugin_layers, Fetched, PluginLayers, ACCEPTED_MANIFESTS,
    MANIFEST_MEDIA_TYPE, MAX_CONFIG_BYTES, MAX_MANIFEST_LAYER_BYTES, MAX_OCI_MANIFEST_BYTES,
    OCI_MANIFEST_MEDIA_TYPE, WASM_CONFIG_MEDIA_TYPE,
};
use super::{Credentials, OciError, OciReference};

/// Default largest component fetched (64 MiB): the example plugins are 100-300 KiB and
/// large real-world components a few tens of MiB.
pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 * 1024 * 1024;

/// Default time limit of each request (connect, and each wait for data).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The slowest average download accepted (64 KiB/s): a blob of N bytes must arrive
/// within the timeout plus N / 64 KiB seconds, so a registry that trickles bytes cannot
/// hold a pull forever.
pub const MIN_DOWNLOAD_BYTES_PER_SECOND: u64 = 64 * 1024;

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 5;

/// Told how a download goes: what (`greet.wasm`), bytes so far, bytes in all.
pub type ProgressFn = Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// How to reach a registry.
#[derive(Clone)]
pub struct ClientOptions {
    /// How to log in.
    pub credentials: Credentials,
    /// Registries (`HOST` or `HOST:PORT`) spoken to over plain HTTP. Loopback ones
    /// always are; every other one uses HTTPS unless listed here.
    pub insecure_registries: Vec<String>,
    /// Time limit of each request (connect, and each wait for data).
    pub timeout: Duration,
    /// Largest component fetched; reading stops there.
    pub max_component_bytes: u64,
    /// Called as a download goes, if set.
    pub progress: Option<ProgressFn>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            credentials: Credentials::Anonymous,
            insecure_registries: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
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
            .field("max_component_bytes", &self.max_component_bytes)
            .finish_non_exhaustive()
    }
}

/// What a reference resolved to: the artifact's digest and its layers, checked to be a
/// plugin. Nothing is downloaded but the manifest (and config).
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The digest the reference resolved to (of the index, when it is one): what the lock
    /// records as the source's digest, and what a later pull of the tag is compared with.
    pub digest: String,
    /// The component's size in bytes, as declared.
    pub component_size: u64,
    /// Whether the artifact carries a plugin manifest.
    pub has_manifest: bool,
    layers: PluginLayers,
}

/// A file downloaded into the plugin directory under a temporary name, verified.
#[derive(Debug)]
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
pub struct Pulled {
    /// The component.
    pub component: PulledFile,
    /// Its manifest, when the artifact carries one.
    pub manifest: Option<PulledFile>,
}

/// What a push published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The digest of the OCI manifest pushed: `oci://HOST/REPO@DIGEST` pulls exactly it.
    pub digest: String,
    /// The layers pushed (1: the component; 2: and its manifest).
    pub layers: usize,
}

/// A client for one repository of one registry.
///
/// # Sandbox
/// HTTPS unless the registry is on loopback or named insecure. Every blob is checked
/// against its digest, capped (a component at [`ClientOptions::max_component_bytes`], a
/// manifest layer at [`MAX_MANIFEST_LAYER_BYTES`], an OCI manifest at
/// [`MAX_OCI_MANIFEST_BYTES`]) and read as it arrives, never past the cap or its declared
/// size. Alternate `urls` a manifest gives for a layer are never fetched. Credentials are
/// not sent to another host when a request is redirected there, and a redirect from HTTPS
/// to plain HTTP is refused.
pub struct RegistryClient {
    client: oci_client::Client,
    http: reqwest::Client,
    reference: OciReference,
    client_reference: oci_client::Reference,
    insecure: bool,
    options: ClientOptions,
    authorization: OnceCell<Authorization>,
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

/// What to send with our own requests (the manifest GET).
#[derive(Clone)]
enum Authorization {
    None,
    Bearer(String),
    Basic(String, String),
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
            options,
            authorization: OnceCell::new(),
        })
    }

    /// Whether this client speaks plain HTTP.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// Fetches the reference's manifest (following an index to its wasm entry) and checks
    /// that it is a plugin: one `application/wasm` layer within the size limit, at most
    /// one plugin manifest layer, and (when the config is a Wasm config) a component.
    ///
    /// # Errors
    /// Any [`OciError`]: unreachable, time-out, 401/403/404, a digest that does not
    /// match, not a plugin, too large.
    pub async fn resolve(&self) -> Result<Resolved, OciError> {
        let reference = &self.reference;
        let (body, digest, content_type) = self.get_manifest(reference).await?;
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

    /// Publishes `component` (named `file_name`, e.g. `greet.wasm`) with its plugin
    /// manifest (`(bytes, file name)`), as the Wasm OCI artifact [`layout`] describes,
    /// under the reference's tag. Returns the manifest's digest.
    ///
    /// # Errors
    /// [`OciError::NotAComponent`] when the bytes are not a component,
    /// [`OciError::TooLarge`] over the size limit, and the registry's errors.
    pub async fn push(
        &self,
        component: Vec<u8>,
        file_name: &str,
        manifest: Option<(Vec<u8>, String)>,
    ) -> Result<Pushed, OciError> {
        let reference = self.reference.to_string();
        if component.len() as u64 > self.options.max_component_bytes {
            return Err(OciError::TooLarge {
                reference: file_name.to_owned(),
                what: "component".into(),
                size: component.len() as u64,
                limit: self.options.max_component_bytes,
                endless: false,
            });
        }
        let not_a_component = |reason: String| OciError::NotAComponent {
            reference: file_name.to_owned(),
            reason,
        };
        check_component(&component).map_err(|reason| {
            not_a_component(reason.replace("its application/wasm layer", "it"))
        })?;
        let (mut config, mut layer) =
            WasmConfig::from_raw_component(component, None).map_err(|err| {
                not_a_component(format!("it does not decode as a component: {err:#}"))
            })?;
        layer.annotations = Some(layout::title(file_name));
        let mut layers = vec![layer];
        if let Some((bytes, name)) = manifest {
            config.layer_digests.push(sha256_text(&bytes));
            layers.push(ImageLayer {
                data: bytes.into(),
                media_type: MANIFEST_MEDIA_TYPE.to_owned(),
                annotations: Some(layout::title(&name)),
            });
        }
        let config = config.to_config().map_err(|err| OciError::Protocol {
            registry: self.reference.registry().to_owned(),
            what: "the config".into(),
            message: format!("{err:#}"),
        })?;
        let mut image = OciImageManifest::build(&layers, &config, None);
        image.media_type = Some(OCI_MANIFEST_MEDIA_TYPE.to_owned());
        let body = serde_json::to_vec(&image).map_err(|err| OciError::Protocol {
            registry: self.reference.registry().to_owned(),
            what: "the manifest".into(),
            message: err.to_string(),
        })?;
        let digest = sha256_text(&body);
        retry_once(&format!("push to {reference}"), || async {
            let auth = self.options.credentials.to_client();
            self.client
                .auth(&self.client_reference, &auth, RegistryOperation::Push)
                .await
                .map_err(|err| self.map_error(err, Operation::Push, "the token"))?;
            for layer in &layers {
                self.push_blob(layer.data.clone(), &layer.sha256_digest())
                    .await?;
            }
            self.push_blob(config.data.clone(), &sha256_text(&config.data))
                .await?;
            self.client
                .push_manifest_raw(
                    &self.client_reference,
                    body.clone(),
                    OCI_MANIFEST_MEDIA_TYPE
                        .parse()
                        .unwrap_or_else(|_| unreachable!("a valid header value")),
                )
                .await
                .map_err(|err| self.map_error(err, Operation::Push, "the manifest"))?;
            Ok(())
        })
        .await?;
        Ok(Pushed {
            digest,
            layers: layers.len(),
        })
    }

    async fn push_blob(&self, data: bytes::Bytes, digest: &str) -> Result<(), OciError> {
        let exists = self
            .client
            .blob_exists(&self.client_reference, digest)
            .await
            .unwrap_or(false);
        if exists {
            return Ok(());
        }
        self.client
            .push_blob(&self.client_reference, data, digest)
            .await
            .map(drop)
            .map_err(|err| self.map_error(err, Operation::Push, &format!("blob {digest}")))
    }

    /// The Wasm config: read (capped), checked against its digest, and a component's.
    async fn check_config(&self, config: &OciDescriptor) -> Result<(), OciError> {
        let mut bytes = Vec::new();
        self.fetch(config, "config", MAX_CONFIG_BYTES, &mut bytes)
            .await?;
        let reference = self.reference.to_string();
        // Read leniently: tools fill the config differently (oras pushes `{}`); only a
        // config that says "core module" is refused here, the header is checked anyway.
        let config: WasmConfig = match WasmConfig::try_from(bytes.as_slice()) {
            Ok(config) => config,
            Err(err) => {
                tracing::debug!("{reference}: the {WASM_CONFIG_MEDIA_TYPE} config does not parse ({err:#}); not used");
                return Ok(());
            }
        };
        if config.os == oci_wasm::MODULE_OS {
            return Err(OciError::NotAComponent {
                reference,
                reason: format!(
                    "its config says it is a core WebAssembly module (os {}), not a component; plugins are components: build for wasm32-wasip2",
                    config.os
                ),
            });
        }
        Ok(())
    }

    /// The authorization for our own requests: a bearer token when the registry hands
    /// one out (oci-client does the token exchange), else basic auth when we have
    /// credentials, else none. Asked once.
    async fn authorization(&self) -> Result<Authorization, OciError> {
        self.authorization
            .get_or_try_init(|| async {
                let auth = self.options.credentials.to_client();
                let token = self
                    .client
                    .auth(&self.client_reference, &auth, RegistryOperation::Pull)
                    .await
                    .map_err(|err| self.map_error(err, Operation::Pull, "a token"))?;
                Ok(match (token, &self.options.credentials) {
                    (Some(token), _) => Authorization::Bearer(token),
                    (None, Credentials::Basic { user, password }) => {
                        Authorization::Basic(user.clone(), password.clone())
                    }
                    (None, Credentials::Anonymous) => Authorization::None,
                })
            })
            .await
            .cloned()
    }

    /// GETs a manifest (capped at [`MAX_OCI_MANIFEST_BYTES`]) and checks its digest
    /// against the reference's and the `Docker-Content-Digest` header; tried twice.
    async fn get_manifest(
        &self,
        reference: &OciReference,
    ) -> Result<(Vec<u8>, String, Option<String>), OciError> {
        retry_once(&format!("the manifest of {reference}"), || {
            self.get_manifest_once(reference)
        })
        .await
    }

    async fn get_manifest_once(
        &self,
        reference: &OciReference,
    ) -> Result<(Vec<u8>, String, Option<String>), OciError> {
        let what = format!("the manifest of {reference}");
        let version = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!(
            "{}://{}/v2/{}/manifests/{version}",
            if self.insecure { "http" } else { "https" },
            reference.registry(),
            reference.repository()
        );
        let mut request = self
            .http
            .get(&url)
            .header(reqwest::header::ACCEPT, ACCEPTED_MANIFESTS.join(", "));
        request = match self.authorization().await? {
            Authorization::None => request,
            Authorization::Bearer(token) => request.bearer_auth(token),
            Authorization::Basic(user, password) => request.basic_auth(user, Some(password)),
        };
        let response = tokio::time::timeout(self.options.timeout, request.send())
            .await
            .map_err(|_| self.timed_out(&what))?
            .map_err(|err| self.map_reqwest(err, &what))?;
        let status = response.status();
        let header_digest = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or(value).trim().to_owned());
        let deadline = self.deadline(MAX_OCI_MANIFEST_BYTES);
        let mut body = Vec::new();
        let read = tokio::time::timeout(deadline, async {
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|err| self.map_reqwest(err, &what))?;
                if (body.len() + chunk.len()) as u64 > MAX_OCI_MANIFEST_BYTES {
                    return Err(OciError::TooLarge {
                        reference: reference.to_string(),
                        what: "OCI manifest".into(),
                        size: MAX_OCI_MANIFEST_BYTES,
                        limit: MAX_OCI_MANIFEST_BYTES,
                        endless: true,
                    });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(())
        })
        .await;
        if !status.is_success() {
            let detail = registry_message(&body);
            return Err(self.status_error(status.as_u16(), Operation::Pull, &what, detail));
        }
        read.map_err(|_| self.timed_out(&what))??;
        let digest = sha256_text(&body);
        if let Some(expected) = reference.digest() {
            if expected != digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.to_string(),
                    what: "manifest".into(),
                    expected: expected.to_owned(),
                    actual: digest,
                });
            }
        }
        if let Some(header) = header_digest.filter(|header| header.starts_with("sha256:")) {
            if header != digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.to_string(),
                    what: "manifest (against its Docker-Content-Digest header)".into(),
                    expected: header,
                    actual: digest,
                });
            }
        }
        Ok((body, digest, content_type))
    }

    /// Downloads a layer into a new temporary file in `dir` named after `file`.
    async fn fetch_to_file(
        &self,
        layer: &OciDescriptor,
        file: &str,
        limit: u64,
        dir: &Path,
    ) -> Result<PulledFile, OciError> {
        let io = |message: &str, error: std::io::Error| OciError::Io {
            path: dir.to_owned(),
            message: message.to_owned(),
            error,
        };
        let mut temp = tempfile::Builder::new()
            .prefix(&format!(".{file}."))
            .suffix(".part")
            .tempfile_in(dir)
            .map_err(|err| {
                io(
                    "cannot create a temporary file in the plugin directory",
                    err,
                )
            })?;
        let size = self.fetch(layer, file, limit, temp.as_file_mut()).await?;
        temp.as_file()
            .sync_all()
            .map_err(|err| io("cannot write the downloaded file", err))?;
        Ok(PulledFile {
            file: temp,
            digest: layer.digest.clone(),
            size,
        })
    }

    /// Downloads a blob into `sink`: refused before reading when it declares more than
    /// `limit`; read as it arrives, stopped as soon as it exceeds its declared size,
    /// checked against its digest at the end. Tried twice (`sink` is emptied between).
    async fn fetch(
        &self,
        layer: &OciDescriptor,
        what: &str,
        limit: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let reference = self.reference.to_string();
        let not_a_plugin = |reason: String| OciError::NotAPlugin {
            reference: reference.clone(),
            reason,
        };
        let declared = layout::size_of(layer).map_err(not_a_plugin)?;
        if declared > limit {
            return Err(OciError::TooLarge {
                reference: reference.clone(),
                what: what.to_owned(),
                size: declared,
                limit,
                endless: false,
            });
        }
        // Never the alternate URLs a manifest may list: fetching them would let the
        // registry point this host at any address (they are not needed for a plugin).
        let layer = OciDescriptor {
            urls: None,
            ..layer.clone()
        };
        self.fetch_once(&layer, what, declared, sink).await
    }

    async fn fetch_once(
        &self,
        layer: &OciDescriptor,
        what: &str,
        declared: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                sink.reset().map_err(|error| OciError::Io {
                    path: what.into(),
                    message: "cannot restart the download".into(),
                    error,
                })?;
            }
            match self.fetch_attempt(layer, what, declared, sink).await {
                Err(err) if attempt == 1 && err.is_transient() => {
                    tracing::warn!("{err}; trying once more");
                }
                other => return other,
            }
        }
    }

    async fn fetch_attempt(
        &self,
        layer: &OciDescriptor,
        what: &str,
        declared: u64,
        sink: &mut dyn Sink,
    ) -> Result<u64, OciError> {
        let reference = self.reference.to_string();
        let description = format!("the {what} of {reference}");
        let deadline = self.deadline(declared);
        let outcome = tokio::time::timeout(deadline, async {
            let mut stream = self
                .client
                .pull_blob_stream(&self.client_reference, layer)
                .await
                .map_err(|err| self.map_error(err, Operation::Pull, &description))?;
            let mut hasher = Sha256::new();
            let mut total: u64 = 0;
            while let Some(chunk) = stream.next().await {
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    // oci-client checks the digest at the end of the stream; ours below
                    // says which digest arrived.
                    Err(_) if total == declared => break,
                    Err(err) => return Err(self.map_io(err, &description)),
                };
                total += chunk.len() as u64;
                if total > declared {
                    return Err(OciError::TooLarge {
                        reference: reference.clone(),
                        what: what.to_owned(),
                        size: declared,
                        limit: declared,
                        endless: true,
                    });
                }
                hasher.update(&chunk);
                sink.write(&chunk).map_err(|error| OciError::Io {
                    path: what.into(),
                    message: "cannot write the download".into(),
                    error,
                })?;
                if let Some(progress) = &self.options.progress {
                    progress(what, total, declared);
                }
            }
            if total < declared {
                return Err(OciError::Protocol {
                    registry: self.reference.registry().to_owned(),
                    what: description.clone(),
                    message: format!("it ended after {total} of its {declared} bytes"),
                });
            }
            let actual = format!("sha256:{}", hex(&hasher.finalize()));
            if actual != layer.digest {
                return Err(OciError::DigestMismatch {
                    reference: reference.clone(),
                    what: what.to_owned(),
                    expected: layer.digest.clone(),
                    actual,
                });
            }
            Ok(total)
        })
        .await;
        outcome.map_err(|_| OciError::TimedOut {
            registry: self.reference.registry().to_owned(),
            what: description.clone(),
            after: deadline,
        })?
    }

    /// How long a download of `bytes` may take: the timeout plus `bytes` at
    /// [`MIN_DOWNLOAD_BYTES_PER_SECOND`].
    fn deadline(&self, bytes: u64) -> Duration {
        self.options.timeout + Duration::from_secs(bytes / MIN_DOWNLOAD_BYTES_PER_SECOND)
    }

    fn timed_out(&self, what: &str) -> OciError {
        OciError::TimedOut {
            registry: self.reference.registry().to_owned(),
            what: what.to_owned(),
            after: self.options.timeout,
        }
    }

    fn status_error(
        &self,
        status: u16,
        operation: Operation,
        what: &str,
        detail: Option<String>,
    ) -> OciError {
        let registry = self.reference.registry().to_owned();
        let repository = self.reference.repository().to_owned();
        match status {
            401 => OciError::Unauthorized {
                registry,
                repository,
                operation,
                had_credentials: !self.options.credentials.is_anonymous(),
                detail,
            },
            403 => OciError::Forbidden {
                registry,
                repository,
                operation,
                detail,
            },
            404 => OciError::NotFound {
                registry,
                what: what.to_owned(),
                detail,
            },
            status => OciError::Status {
                registry,
                status,
                what: what.to_owned(),
                detail,
            },
        }
    }

    fn map_reqwest(&self, err: reqwest::Error, what: &str) -> OciError {
        if let Some(status) = err.status() {
            return self.status_error(status.as_u16(), Operation::Pull, what, None);
        }
        if err.is_timeout() {
            return self.timed_out(what);
        }
        if err.is_redirect() {
            return OciError::Protocol {
                registry: self.reference.registry().to_owned(),
                what: what.to_owned(),
                message: error_chain(&err),
            };
        }
        OciError::Unreachable {
            registry: self.reference.registry().to_owned(),
            message: error_chain(&err),
        }
    }

    fn map_io(&self, err: std::io::Error, what: &str) -> OciError {
        match err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
        {
            Some(inner) if inner.is_timeout() => self.timed_out(what),
            _ => OciError::Unreachable {
                registry: self.reference.registry().to_owned(),
                message: error_chain(&err),
            },
        }
    }

    fn map_error(&self, err: OciDistributionError, operation: Operation, what: &str) -> OciError {
        let registry = self.reference.registry().to_owned();
        match err {
            OciDistributionError::RequestError(err) => match err.status() {
                Some(status) => self.status_error(status.as_u16(), operation, what, None),
                None if err.is_timeout() => self.timed_out(what),
                None if err.is_redirect() => OciError::Protocol {
                    registry,
                    what: what.to_owned(),
                    message: error_chain(&err),
                },
                None => OciError::Unreachable {
                    registry,
                    message: error_chain(&err),
                },
            },
            OciDistributionError::UnauthorizedError { .. } => {
                self.status_error(401, operation, what, None)
            }
            OciDistributionError::AuthenticationFailure(reason) => {
                self.status_error(401, operation, what, registry_message(reason.as_bytes()))
            }
            OciDistributionError::ServerError { code, message, .. } => {
                self.status_error(code, operation, what, registry_message(message.as_bytes()))
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                use oci_client::errors::OciErrorCode as Code;
                let detail = Some(
                    envelope
                        .errors
                        .iter()
                        .map(|e| e.message.clone())
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                let code = envelope.errors.first().map(|e| &e.code);
                let status = match code {
                    Some(Code::Unauthorized) => 401,
                    Some(Code::Denied) => 403,
                    Some(
                        Code::NameUnknown
                        | Code::ManifestUnknown
                        | Code::BlobUnknown
                        | Code::NotFound,
                    ) => 404,
                    Some(Code::Toomanyrequests) => 429,
                    _ => 400,
                };
                self.status_error(status, operation, what, detail)
            }
            OciDistributionError::IoError(err) => self.map_io(err, what),
            other => OciError::Protocol {
                registry,
                what: what.to_owned(),
                message: other.to_string(),
            },
        }
    }
}

/// Where a download goes, restartable for the retry.
pub(crate) trait Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    fn reset(&mut self) -> std::io::Result<()>;
}

impl Sink for Vec<u8> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.extend_from_slice(bytes);
        Ok(())
    }
    fn reset(&mut self) -> std::io::Result<()> {
        self.clear();
        Ok(())
    }
}

impl Sink for std::fs::File {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_all(bytes)
    }
    fn reset(&mut self) -> std::io::Result<()> {
        self.set_len(0)?;
        self.rewind()
    }
}

/// Runs `attempt` once more when it fails with a transient error, logging why.
async fn retry_once<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, OciError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, OciError>>,
{
    match attempt().await {
        Err(err) if err.is_transient() => {
            tracing::warn!("{what}: {err}; trying once more");
            attempt().await
        }
        other => other,
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

/// The registry's error message from a body: the distribution spec's `errors[].message`
/// when it is one, else the first 200 characters of printable text.
fn registry_message(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        message: String,
    }
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(body) {
        let text: Vec<String> = envelope
            .errors
            .into_iter()
            .map(|e| e.message)
            .filter(|m| !m.is_empty())
            .collect();
        return (!text.is_empty()).then(|| text.join("; "));
    }
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// An error with its causes, on one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `sha256:` and the hex digest of `bytes`.
pub(crate) fn sha256_text(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
