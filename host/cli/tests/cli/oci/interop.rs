//! Interoperability both ways with a second client, `oras` (oras-py from PyPI): an
//! artifact pushed by oras is pulled and run by `host`; one pushed by `host push` is
//! pulled by oras with the expected media types and file names.

use super::registry::{oras, Registry};
use super::support::ok;
use crate::text;

fn call_greet(plugins: &std::path::Path) -> String {
    ok(
        &[
            "call",
            "--no-builtins",
            "--no-cache",
            "--plugins",
            text(plugins),
            "greet",
            r#"{"name":"Ada"}"#,
        ],
        &[],
    )
}

#[test]
fn an_artifact_pushed_by_oras_is_pulled_and_run_by_host() {
    let registry = Registry::start();
    let docker = tempfile::tempdir().unwrap();
    let env = [("DOCKER_CONFIG", text(docker.path()))];
    let dist = tempfile::tempdir().unwrap();
    toolhost_tests::install(dist.path(), &["greet"]).unwrap();
    // The Wasm OCI layout as wkg writes it: a Wasm config, one application/wasm layer.
    let config = serde_json::json!({
        "created": "2026-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [],
        "component": null,
    });
    std::fs::write(dist.path().join("config.json"), config.to_string()).unwrap();
    for (tag, extra) in [
        (
            "1",
            vec![
                "--config",
                "config.json:application/vnd.wasm.config.v0+json",
            ],
        ),
        // oras's own default config, no Wasm config at all: the layer is what counts.
        ("plain", vec![]),
    ] {
        let target = format!("{}/oras/greet:{tag}", registry.address);
        let mut args = vec![
            "push",
            target.as_str(),
            text(dist.path()),
            "greet.wasm:application/wasm",
        ];
        args.extend(extra);
        oras(&args, &[]);
        let plugins = tempfile::tempdir().unwrap();
        let pulled = ok(
            &[
                "pull",
                &registry.oci(&format!("oras/greet:{tag}")),
                "--plugins",
                text(plugins.path()),
            ],
            &env,
        );
        assert!(pulled.contains("greet.wasm  sha256:"), "{pulled}");
        assert_eq!(call_greet(plugins.path()), "\"Hello, Ada!\"\n", "tag {tag}");
    }
}

#[test]
fn an_artifact_pushed_by_host_is_pulled_by_oras_with_the_expected_media_types() {
    let registry = Registry::start();
    let docker = tempfile::tempdir().unwrap();
    let env = [("DOCKER_CONFIG", text(docker.path()))];
    let dist = tempfile::tempdir().unwrap();
    toolhost_tests::install(dist.path(), &["wordcount"]).unwrap();
    ok(
        &[
            "push",
            text(&dist.path().join("wordcount.wasm")),
            &registry.oci("tools/wordcount:1"),
        ],
        &env,
    );
    let out = tempfile::tempdir().unwrap();
    let target = format!("{}/tools/wordcount:1", registry.address);
    let pulled = oras(&["pull", &target, text(out.path())], &[]);
    assert_eq!(
        pulled["files"],
        serde_json::json!(["wordcount.toml", "wordcount.wasm"])
    );
    for file in ["wordcount.wasm", "wordcount.toml"] {
        assert_eq!(
            std::fs::read(out.path().join(file)).unwrap(),
            std::fs::read(dist.path().join(file)).unwrap(),
            "{file}"
        );
    }
    let manifest = &pulled["manifest"];
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2);
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    assert_eq!(
        layers[0]["annotations"]["org.opencontainers.image.title"],
        "wordcount.wasm"
    );
    assert_eq!(
        layers[1]["mediaType"],
        "application/vnd.wasm-toolhost.manifest.v1+toml"
    );
    assert_eq!(
        layers[1]["annotations"]["org.opencontainers.image.title"],
        "wordcount.toml"
    );
}
