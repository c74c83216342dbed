//! A 0.3.0 plugin's `resources` and `prompts` as catalog sources: registered at load
//! under the plugin's name, every URI confined to its namespace, pages capped, prompt
//! names unique (the `rich` and `hostile_resources` plugins, built by `toolhost-tests`).

use std::collections::BTreeMap;

use toolhost::catalog::{ResourceContents, ResourceError, Role};
use toolhost::registry::ResourceBody;
use toolhost::registry::{ContentBlock, Media};

use super::rich::rich_registry;
use super::*;

/// `hostile_resources` loaded into `registry` (from a directory kept in the result).
fn load_hostile(registry: &Registry) -> (tempfile::TempDir, Result<LoadedPlugin, PluginError>) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["hostile_resources"]).unwrap();
    let host = PluginHost::new(config()).unwrap();
    let loaded = host.load_file(&dir.path().join("hostile_resources.wasm"), registry);
    (dir, loaded)
}

#[tokio::test]
async fn a_plugins_resources_and_prompts_are_served_from_its_namespace() {
    let (_dir, registry) = rich_registry(config());
    let catalog = registry.catalog();
    let templates: Vec<String> = catalog
        .resource_templates()
        .into_iter()
        .map(|t| t.uri_template)
        .collect();
    assert_eq!(templates, ["plugin://rich/items/{id}"]);
    let sources = catalog.resource_sources();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].0, "plugin://rich/");
    let page = sources[0]
        .1
        .list(CallContext::new(), None, Environment::default())
        .await
        .unwrap();
    let uris: Vec<&str> = page.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        ["plugin://rich/notes/b.txt", "plugin://rich/data/c.bin"]
    );
    assert_eq!(page.next_cursor, None);
    let source = catalog
        .resource_source_for("plugin://rich/items/7")
        .unwrap();
    assert_eq!(
        source
            .read(
                CallContext::new(),
                "plugin://rich/items/7".into(),
                Environment::default()
            )
            .await
            .unwrap(),
        vec![ResourceContents {
            uri: "plugin://rich/items/7".into(),
            mime_type: Some("text/plain".into()),
            body: ResourceBody::Text("item 7".into()),
        }]
    );
    let blob = source
        .read(
            CallContext::new(),
            "plugin://rich/data/c.bin".into(),
            Environment::default(),
        )
        .await
        .unwrap();
    assert_eq!(blob[0].body, ResourceBody::Blob(vec![0, 1, 255]));

    let prompts: Vec<String> = catalog.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(prompts, ["rich_summary"]);
    let (definition, prompt) = catalog.prompt("rich_summary").unwrap();
    assert!(definition.arguments[0].required);
    let filled = prompt
        .get(
            CallContext::new(),
            "rich_summary".into(),
            BTreeMap::from([("topic".to_owned(), "tides".to_owned())]),
            Environment::default(),
        )
        .await
        .unwrap();
    assert_eq!(filled.description.as_deref(), Some("Summarize a topic."));
    assert_eq!(filled.messages.len(), 2);
    assert_eq!(filled.messages[0].role, Role::User);
    assert_eq!(
        filled.messages[0].content,
        ContentBlock::text("Summarize tides.")
    );
    assert!(
        matches!(&filled.messages[1].content, ContentBlock::Image(Media { mime_type, .. }) if mime_type == "image/png")
    );
}

#[tokio::test]
async fn a_plugin_without_resources_or_prompts_registers_no_source() {
    let (_dir, registry) = loaded(config(), None);
    assert!(registry.catalog().resource_sources().is_empty());
    assert!(registry.catalog().prompts().is_empty());
    // Nor does an SDK plugin that declares none (it exports both, empty).
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["greet"]).unwrap();
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&dir.path().join("greet.wasm"), &registry)
        .unwrap();
    assert!(registry.catalog().resource_sources().is_empty());
    assert!(registry.catalog().prompts().is_empty());
}

#[tokio::test]
async fn a_resource_outside_the_namespace_is_refused() {
    let registry = Registry::new();
    let (_dir, loaded) = load_hostile(&registry);
    loaded.unwrap();
    let source = registry
        .catalog()
        .resource_source_for("plugin://hostile_resources/escape")
        .unwrap();
    let listed = source
        .list(
            CallContext::new(),
            Some("escape".into()),
            Environment::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        listed,
        ResourceError::Failed("plugin hostile_resources listed `file:///etc/passwd`, outside its namespace plugin://hostile_resources/; the host refuses it (a fault in the plugin)".into())
    );
    let read = source
        .read(
            CallContext::new(),
            "plugin://hostile_resources/escape".into(),
            Environment::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        read,
        ResourceError::Failed("plugin hostile_resources answered with `file:///etc/passwd`, outside its namespace plugin://hostile_resources/; the host refuses it (a fault in the plugin)".into())
    );
    // Asked directly (past the catalog's own check) for a URI outside it: refused
    // before the plugin runs.
    let asked = source
        .read(
            CallContext::new(),
            "file:///etc/passwd".into(),
            Environment::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(asked, ResourceError::Failed(ref m) if m.contains("was asked for `file:///etc/passwd`")),
        "{asked:?}"
    );
}

#[tokio::test]
async fn a_million_resources_are_paged_at_most_1000_a_page() {
    let registry = Registry::new();
    let (_dir, loaded) = load_hostile(&registry);
    loaded.unwrap();
    let source = registry
        .catalog()
        .resource_source_for("plugin://hostile_resources/r/0")
        .unwrap();
    let (mut cursor, mut pages, mut listed) = (None, 0u32, 0usize);
    loop {
        let page = source
            .list(CallContext::new(), cursor, Environment::default())
            .await
            .unwrap();
        assert_eq!(page.resources.len(), 1000, "page {pages}");
        pages += 1;
        listed += page.resources.len();
        cursor = page.next_cursor;
        if cursor.is_none() || pages >= 600 {
            break;
        }
    }
    // The plugin answers 2,000 a page: the host keeps 1,000 of each, and the plugin's
    // cursor walks the million in 500 pages.
    assert_eq!((pages, listed, cursor), (500, 500_000, None));
}

#[tokio::test]
async fn a_prompt_name_another_plugin_offers_is_refused_at_load() {
    let (_dir, registry) = rich_registry(config());
    let (_hostile_dir, loaded) = load_hostile(&registry);
    let err = loaded.unwrap_err();
    assert_eq!(err.kind().name(), "catalog");
    assert!(
        err.to_string().ends_with("the plugin's prompts or resources cannot be offered: prompt \"rich_summary\" is already offered by rich; rename one of them"),
        "{err}"
    );
    // Nothing of it was registered; the first plugin's prompt still serves.
    assert!(!registry.has("hostile_resources_noop"));
    assert_eq!(
        registry
            .catalog()
            .prompt("rich_summary")
            .map(|(d, _)| d.name),
        Some("rich_summary".to_owned())
    );
    assert!(registry
        .catalog()
        .resource_source_for("plugin://hostile_resources/r/0")
        .is_none());
}

#[tokio::test]
async fn the_conformance_plugin_offers_what_the_suite_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["conformance"]).unwrap();
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&dir.path().join("conformance.wasm"), &registry)
        .unwrap();
    let catalog = registry.catalog();
    let prompts: Vec<String> = catalog.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(
        prompts,
        [
            "test_simple_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image"
        ]
    );
    let templates: Vec<String> = catalog
        .resource_templates()
        .into_iter()
        .map(|t| t.uri_template)
        .collect();
    assert_eq!(templates, ["test://template/{id}/data"]);
    let read = |uri: &'static str| {
        let source = catalog.resource_source_for(uri).unwrap();
        async move {
            source
                .read(CallContext::new(), uri.into(), Environment::default())
                .await
                .unwrap()
        }
    };
    assert_eq!(
        read("test://static-text").await[0].body,
        ResourceBody::Text("This is the content of the static text resource.".into())
    );
    assert!(
        matches!(&read("test://static-binary").await[0].body, ResourceBody::Blob(b) if b.starts_with(b"\x89PNG"))
    );
    assert_eq!(
        read("test://template/123/data").await[0].body,
        ResourceBody::Text(r#"{"data":"Data for ID: 123","id":"123","templateTest":true}"#.into())
    );
    let (_, prompt) = catalog.prompt("test_prompt_with_arguments").unwrap();
    let filled = prompt
        .get(
            CallContext::new(),
            "test_prompt_with_arguments".into(),
            BTreeMap::from([
                ("arg1".to_owned(), "hello".to_owned()),
                ("arg2".to_owned(), "world".to_owned()),
            ]),
            Environment::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        filled.messages[0].content,
        ContentBlock::text("Prompt with arguments: arg1='hello', arg2='world'")
    );
    let audio = call(&registry, "test_audio_content", "{}").await.unwrap();
    assert!(
        matches!(&audio.blocks[..], [ContentBlock::Audio(m)] if m.mime_type == "audio/wav" && m.data.starts_with(b"RIFF"))
    );
    let mixed = call(&registry, "test_multiple_content_types", "{}")
        .await
        .unwrap();
    assert_eq!(mixed.blocks.len(), 3);
    // Without --plugin-ask the elicitation tools fail, saying why.
    let err = call(&registry, "test_elicitation", r#"{"message":"hi"}"#)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("could not ask the user: plugin conformance may not ask the user"),
        "{err}"
    );
}
