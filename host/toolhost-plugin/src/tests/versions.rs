//! Components of older worlds keep loading and answering exactly as before: frozen
//! 0.2.0 builds (`fixtures/`, made before the SDK moved to 0.3.0). 0.1.0 is covered by
//! the fixtures built in code ([`super::fixture`]).

use super::*;

/// A directory holding `name.wasm` with `bytes`.
fn dir_with(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join(format!("{name}.wasm"));
    std::fs::write(&wasm, bytes).unwrap();
    (dir, wasm)
}

const GREET_0_2: &[u8] = include_bytes!("fixtures/greet-0.2.0.wasm");
const METADATA_0_2: &[u8] = include_bytes!("fixtures/metadata-0.2.0.wasm");

#[tokio::test]
async fn a_0_2_0_component_still_loads_and_answers() {
    let (_dir, wasm) = dir_with("greet", GREET_0_2);
    let host = PluginHost::new(config()).unwrap();
    let info = host.inspect(&wasm).unwrap();
    assert_eq!(info.exports, ["toolhost:plugin/tools@0.2.0"]);
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    assert_eq!(
        call(&registry, "greet", r#"{"name":"Ada"}"#).await,
        Ok(ToolResult::new("Hello, Ada!"))
    );
    let err = call(&registry, "greet", r#"{"name":5}"#).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments {
            tool: "greet".into(),
            message: r#"argument "name" must be a string, got number 5"#.into()
        }
    );
}

#[tokio::test]
async fn a_0_2_0_component_keeps_its_metadata_and_structured_result() {
    let (_dir, wasm) = dir_with("metadata", METADATA_0_2);
    let host = PluginHost::new(config()).unwrap();
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    let weather = registry
        .definitions()
        .into_iter()
        .find(|d| d.name == "weather")
        .unwrap();
    assert_eq!(weather.title.as_deref(), Some("Get weather"));
    assert!(weather.output_schema.is_some());
    let result = call(&registry, "weather", "{}").await.unwrap();
    assert_eq!(result.content, serde_json::json!({"celsius": 21.5}));
    assert!(result.structured);
    assert!(result.blocks.is_empty());
    assert_eq!(
        call(&registry, "plain", "{}").await,
        Ok(ToolResult::new("plain"))
    );
}
