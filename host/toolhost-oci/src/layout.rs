//! The artifact layout: what a plugin looks like in a registry.
//!
//! A plugin is a Wasm OCI artifact, as `wkg oci push` writes it and the CNCF
//! "Wasm OCI Artifact" layout describes: an OCI image manifest
//! (`application/vnd.oci.image.manifest.v1+json`) whose config is
//! `application/vnd.wasm.config.v0+json` ([`oci_wasm::WasmConfig`]: architecture `wasm`,
//! os `wasip2`, the component's worlds, the layers' digests) and whose first layer is the
//! component, `application/wasm`.
//!
//! The plugin's manifest (`NAME.toml`: grants and limits), when it has one, travels as a
//! second layer of media type [`MANIFEST_MEDIA_TYPE`],
//! `application/vnd.wasm-toolhost.manifest.v1+toml`: the TOML text, UTF-8, at most
//! [`MAX_MANIFEST_LAYER_BYTES`]. Each layer carries an `org.opencontainers.image.title`
//! annotation (`greet.wasm`, `greet.toml`), so generic clients such as `oras pull` write
//! them under those names. A tool that insists on exactly one layer (wkg) ignores or
//! refuses the second one; a plugin without a manifest is pushed with one layer only.
//!
//! On pull, the manifest must hold exactly one `application/wasm` layer and at most one
//! manifest layer; other layers are ignored. An image index is followed to its entry
//! for architecture `wasm` (or its only entry).

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageIndex, OciImageManifest};

/// The component layer's media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = oci_wasm::WASM_LAYER_MEDIA_TYPE;

/// The config's media type.
pub const WASM_CONFIG_MEDIA_TYPE: &str = oci_wasm::WASM_MANIFEST_CONFIG_MEDIA_TYPE;

/// The plugin manifest layer's media type (ours): the `NAME.toml` text.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.wasm-toolhost.manifest.v1+toml";

/// The OCI image manifest's media type.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = oci_wasm::WASM_MANIFEST_MEDIA_TYPE;

/// Largest plugin manifest layer (64 KiB, the plugin host's cap on a manifest file).
pub const MAX_MANIFEST_LAYER_BYTES: u64 = 64 * 1024;

/// Largest OCI manifest or index read (4 MiB, the distribution spec's suggested limit
/// registries must accept); reading stops there.
pub const MAX_OCI_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// Largest config blob read (1 MiB; a Wasm config is a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The annotation generic clients name a layer's file by.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";

/// The media types a manifest GET accepts.
pub(crate) const ACCEPTED_MANIFESTS: &[&str] = &[
    oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
    oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

/// The layers of a plugin artifact.
#[derive(Debug, Clone)]
pub(crate) struct PluginLayers {
    pub component: OciDescriptor,
    pub manifest: Option<OciDescriptor>,
    pub config: OciDescriptor,
}

/// What a manifest GET returned, parsed.
pub(crate) enum Fetched {
    Image(Box<OciImageManifest>),
    Index(OciImageIndex),
}

/// Parses a manifest body: an image manifest or an index, by its `mediaType` (or its
/// shape when absent).
pub(crate) fn parse_manifest(body: &[u8], content_type: Option<&str>) -> Result<Fetched, String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        schema_version: Option<u64>,
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
    }
    let probe: Probe =
        serde_json::from_slice(body).map_err(|err| format!("it is not JSON ({err})"))?;
    if probe.schema_version != Some(2) {
        return Err(format!(
            "schemaVersion is {:?}, not 2",
            probe.schema_version
        ));
    }
    let media_type = probe
        .media_type
        .as_deref()
        .or(content_type)
        .unwrap_or_default();
    let is_index = media_type == oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE
        || media_type == oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE
        || (probe.media_type.is_none() && probe.manifests.is_some());
    if is_index {
        serde_json::from_slice(body)
            .map(Fetched::Index)
            .map_err(|err| format!("it is not a valid image index ({err})"))
    } else {
        serde_json::from_slice(body)
            .map(|image| Fetched::Image(Box::new(image)))
            .map_err(|err| format!("it is not a valid image manifest ({err})"))
    }
}

/// The entry of an index to follow: the one for architecture `wasm`, else the only one.
pub(crate) fn pick_from_index(index: &OciImageIndex) -> Result<String, String> {
    let wasm: Vec<_> = index
        .manifests
        .iter()
        .filter(|entry| {
            entry
                .platform
                .as_ref()
                .is_some_and(|p| p.architecture.to_string() == oci_wasm::WASM_ARCHITECTURE)
        })
        .collect();
    match (&wasm[..], &index.manifests[..]) {
        ([entry], _) => Ok(entry.digest.clone()),
        ([], [entry]) => Ok(entry.digest.clone()),
        ([], []) => Err("it is an empty image index".into()),
        ([], entries) => Err(format!(
            "it is an image index of {} entries, none for architecture wasm; is it a container image rather than a plugin?",
            entries.len()
        )),
        (many, _) => Err(format!(
            "it is an image index with {} entries for architecture wasm; pull one of them by digest",
            many.len()
        )),
    }
}

/// The component (exactly one `application/wasm` layer) and the optional plugin
/// manifest layer of an image manifest.
pub(crate) fn plugin_layers(manifest: &OciImageManifest) -> Result<PluginLayers, String> {
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|layer| layer.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    let manifests: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|layer| layer.media_type == MANIFEST_MEDIA_TYPE)
        .collect();
    let component = match &wasm[..] {
        [one] => (*one).clone(),
        [] => {
            let found: Vec<&str> = manifest
                .layers
                .iter()
                .map(|layer| layer.media_type.as_str())
                .collect();
            return Err(format!(
                "it has no {WASM_LAYER_MEDIA_TYPE} layer (its layers: {}); a plugin is a WebAssembly component pushed with `host push` (or `wkg oci push`, or oras with the media type {WASM_LAYER_MEDIA_TYPE})",
                if found.is_empty() { "none".to_owned() } else { found.join(", ") }
            ));
        }
        many => {
            return Err(format!(
                "it has {} {WASM_LAYER_MEDIA_TYPE} layers; a plugin artifact has exactly one",
                many.len()
            ))
        }
    };
    let plugin_manifest = match &manifests[..] {
        [] => None,
        [one] => Some((*one).clone()),
        many => {
            return Err(format!(
                "it has {} {MANIFEST_MEDIA_TYPE} layers; a plugin artifact has at most one",
                many.len()
            ))
        }
    };
    Ok(PluginLayers {
        component,
        manifest: plugin_manifest,
        config: manifest.config.clone(),
    })
}

/// A descriptor's size as a count of bytes (a negative size is invalid).
pub(crate) fn size_of(descriptor: &OciDescriptor) -> Result<u64, String> {
    u64::try_from(descriptor.size).map_err(|_| {
        format!(
            "the layer {} declares a negative size ({})",
            descriptor.digest, descriptor.size
        )
    })
}

/// Checks the WebAssembly header: a component, not a core module.
///
/// # Errors
/// What the bytes are instead, and how to build a component.
pub fn check_component(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err("its application/wasm layer is not WebAssembly (no \\0asm header)".into());
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err("its application/wasm layer is a core WebAssembly module, not a component; plugins are components: build for wasm32-wasip2 (cargo build --target wasm32-wasip2 --release)".into()),
        _ => Err("its application/wasm layer has an unknown WebAssembly version or layer; build it with a current toolchain for wasm32-wasip2".into()),
    }
}

/// The title annotation of a layer named `file`.
pub(crate) fn title(file: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(TITLE_ANNOTATION.to_owned(), file.to_owned())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(media_type: &str) -> OciDescriptor {
        OciDescriptor {
            media_type: media_type.into(),
            digest: format!("sha256:{}", "0".repeat(64)),
            size: 1,
            ..Default::default()
        }
    }

    fn image(layers: Vec<OciDescriptor>) -> OciImageManifest {
        OciImageManifest {
            layers,
            ..Default::default()
        }
    }

    #[test]
    fn a_plugin_has_one_wasm_layer_and_at_most_one_manifest() {
        let found = plugin_layers(&image(vec![
            layer(WASM_LAYER_MEDIA_TYPE),
            layer(MANIFEST_MEDIA_TYPE),
            layer("application/vnd.example.other"),
        ]))
        .unwrap();
        assert_eq!(found.component.media_type, WASM_LAYER_MEDIA_TYPE);
        assert!(found.manifest.is_some());
        let err = plugin_layers(&image(vec![layer(
            "application/vnd.oci.image.layer.v1.tar+gzip",
        )]))
        .unwrap_err();
        assert!(
            err.starts_with("it has no application/wasm layer (its layers: application/vnd.oci.image.layer.v1.tar+gzip)"),
            "{err}"
        );
        assert!(plugin_layers(&image(vec![]))
            .unwrap_err()
            .contains("(its layers: none)"));
        assert!(plugin_layers(&image(vec![
            layer(WASM_LAYER_MEDIA_TYPE),
            layer(WASM_LAYER_MEDIA_TYPE)
        ]))
        .unwrap_err()
        .contains("has 2 application/wasm layers"));
        assert!(plugin_layers(&image(vec![
            layer(WASM_LAYER_MEDIA_TYPE),
            layer(MANIFEST_MEDIA_TYPE),
            layer(MANIFEST_MEDIA_TYPE)
        ]))
        .unwrap_err()
        .contains("at most one"));
    }

    #[test]
    fn component_headers() {
        assert_eq!(check_component(b"\0asm\x0d\0\x01\0rest"), Ok(()));
        assert!(check_component(b"\0asm\x01\0\0\0")
            .unwrap_err()
            .contains("is a core WebAssembly module, not a component"));
        assert!(check_component(b"<html>")
            .unwrap_err()
            .contains("not WebAssembly"));
        assert!(check_component(b"\0asm\x0e\0\x01\0")
            .unwrap_err()
            .contains("unknown WebAssembly version"));
    }

    #[test]
    fn indexes_lead_to_their_wasm_entry() {
        let index: OciImageIndex = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:a", "size": 1,
                 "platform": {"architecture": "amd64", "os": "linux"}},
                {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:w", "size": 1,
                 "platform": {"architecture": "wasm", "os": "wasip2"}}
            ]
        }))
        .unwrap();
        assert_eq!(pick_from_index(&index).unwrap(), "sha256:w");
        let mut containers = index;
        containers.manifests.remove(1);
        containers.manifests.push(containers.manifests[0].clone());
        assert!(pick_from_index(&containers)
            .unwrap_err()
            .contains("none for architecture wasm"));
        containers.manifests.truncate(1);
        assert_eq!(pick_from_index(&containers).unwrap(), "sha256:a");
    }

    #[test]
    fn manifests_are_told_apart_from_indexes() {
        let body = br#"{"schemaVersion":2,"manifests":[]}"#;
        assert!(matches!(parse_manifest(body, None), Ok(Fetched::Index(_))));
        let body = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"a","digest":"sha256:0","size":1},"layers":[]}"#;
        assert!(matches!(parse_manifest(body, None), Ok(Fetched::Image(_))));
        assert!(parse_manifest(br#"{"schemaVersion":1}"#, None)
            .err()
            .unwrap()
            .contains("not 2"));
        assert!(parse_manifest(b"<html>", None)
            .err()
            .unwrap()
            .contains("not JSON"));
    }
}
