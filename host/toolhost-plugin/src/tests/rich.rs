//! 0.3.0 rich results end to end through the registry: the `rich` plugin (built by
//! `toolhost-tests`).

use toolhost::registry::{ContentBlock, EmbeddedResource, Media, ResourceBody, ResourceLink};

use super::*;

/// The 1x1 PNG the `rich` plugin draws.
const PIXEL_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53,
    0xde, 0x00, 0x00, 0x00, 0x0c, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A registry with the `rich` plugin loaded (and the directory holding it).
pub(super) fn rich_registry(config: PluginHostConfig) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["rich"]).unwrap();
    let registry = load_one(dir.path(), "rich", config);
    (dir, registry)
}

#[tokio::test]
async fn a_0_3_0_tool_returns_a_png_image() {
    let (dir, registry) = rich_registry(config());
    let info = PluginHost::new(config())
        .unwrap()
        .inspect(&dir.path().join("rich.wasm"))
        .unwrap();
    assert!(
        info.exports
            .contains(&"toolhost:plugin/tools@0.3.0".to_owned()),
        "{:?}",
        info.exports
    );
    let result = call(&registry, "pixel", "{}").await.unwrap();
    assert_eq!(
        result.blocks,
        vec![
            ContentBlock::text("one red pixel"),
            ContentBlock::Image(Media {
                data: PIXEL_PNG.to_vec(),
                mime_type: "image/png".into()
            }),
        ]
    );
    assert_eq!(result.content, serde_json::Value::Null);
    assert!(!result.structured);
}

#[tokio::test]
async fn every_block_kind_arrives_in_order_with_structured_json() {
    let (_dir, registry) = rich_registry(config());
    let result = call(&registry, "mixed", "{}").await.unwrap();
    assert_eq!(
        result.blocks,
        vec![
            ContentBlock::text("five parts"),
            ContentBlock::Audio(Media {
                data: b"RIFF".to_vec(),
                mime_type: "audio/wav".into()
            }),
            ContentBlock::ResourceLink(ResourceLink {
                uri: "plugin://rich/notes/a.txt".into(),
                name: "a.txt".into(),
                mime_type: Some("text/plain".into()),
                description: Some("A note.".into()),
            }),
            ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://rich/notes/b.txt".into(),
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text("bee".into()),
            }),
            ContentBlock::Resource(EmbeddedResource {
                uri: "plugin://rich/data/c.bin".into(),
                mime_type: Some("application/octet-stream".into()),
                body: ResourceBody::Blob(vec![0, 1, 255]),
            }),
        ]
    );
    assert_eq!(result.content, serde_json::json!({"parts": 5}));
    // No output schema declared: not structured for the client.
    assert!(!result.structured);
    let counted = call(&registry, "counted", "{}").await.unwrap();
    assert!(counted.structured);
    assert_eq!(counted.content, serde_json::json!({"count": 2}));
    assert_eq!(counted.blocks, vec![ContentBlock::text("two")]);
}

#[tokio::test]
async fn media_types_off_the_allow_list_fail_the_call_by_name() {
    let (_dir, registry) = rich_registry(config());
    for mime in ["text/html", "image/svg+xml"] {
        let err = call(&registry, "picture", &format!(r#"{{"mime":"{mime}"}}"#))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::Failed {
                tool: "picture".into(),
                message: format!("the plugin returned an image of type `{mime}`, which the host does not pass on; allowed: image/png, image/jpeg, image/gif, image/webp; this is a fault in the plugin, not in your call"),
            }
        );
    }
    let jpeg = call(&registry, "picture", r#"{"mime":"image/jpeg"}"#)
        .await
        .unwrap();
    assert!(matches!(&jpeg.blocks[..], [ContentBlock::Image(m)] if m.mime_type == "image/jpeg"));
}

#[tokio::test]
async fn a_huge_image_is_a_limit_error_and_the_plugin_keeps_answering() {
    let (_dir, registry) = rich_registry(config());
    // 100 MiB cannot even be built under the plugin's 64 MiB of memory.
    let err = call(&registry, "big_picture", r#"{"mib":100}"#)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ToolError::LimitExceeded {
                limit: Limit::Memory { .. },
                ..
            }
        ),
        "{err:?}"
    );
    // 2 MiB is built, and refused at the 1 MiB output cap before it reaches anyone.
    let err = call(&registry, "big_picture", r#"{"mib":2}"#)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::LimitExceeded { limit: Limit::Output { bytes }, message, .. }
            if *bytes == 1 << 20 && message.starts_with("the plugin returned 2.0 MiB of result, over its limit of 1 MiB; ask for less")),
        "{err:?}"
    );
    // The next call gets a fresh instance and answers.
    let pixel = call(&registry, "pixel", "{}").await.unwrap();
    assert_eq!(pixel.blocks.len(), 2);
}
