//! Publishing a component (and its manifest) as a Wasm OCI artifact: the blobs, the
//! config check and the manifest under the reference's tag.

use oci_client::client::ImageLayer;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::RegistryOperation;
use oci_wasm::{ToConfig, WasmConfig};

use super::fetch::retry_once;
use super::token::Authorization;
use super::{sha256_text, Pushed, RegistryClient};
use crate::error::Operation;
use crate::layout::{
    self, check_component, MANIFEST_MEDIA_TYPE, MAX_CONFIG_BYTES, OCI_MANIFEST_MEDIA_TYPE,
    WASM_CONFIG_MEDIA_TYPE,
};
use crate::OciError;

impl RegistryClient {
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
        self.within(
            Operation::Push,
            self.push_now(component, file_name, manifest),
        )
        .await
    }

    async fn push_now(
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
            // The challenge and token exchange are ours (the token response capped); a
            // bearer token is handed to oci-client, which then asks for none itself.
            let auth = match self.authorize(Operation::Push).await? {
                Authorization::Bearer(token) => RegistryAuth::Bearer(token),
                Authorization::Basic(..) | Authorization::None => {
                    self.options.credentials.to_client()
                }
            };
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
                    // Checked when this compiles: a media type that were no valid header
                    // value would fail the build, not a push.
                    const { reqwest::header::HeaderValue::from_static(OCI_MANIFEST_MEDIA_TYPE) },
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

    pub(super) async fn push_blob(&self, data: bytes::Bytes, digest: &str) -> Result<(), OciError> {
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
    pub(super) async fn check_config(&self, config: &OciDescriptor) -> Result<(), OciError> {
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
}
