//! Load-time hardening: what a manifest may claim, the pool's
//! memory, host handles, the size of a plugin's definitions, files that are not regular
//! files, and a `definitions` that never answers.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::load_fixture::{self, tool, Fixture};
use super::*;
use crate::engine::PoolPlan;
use crate::limits::{DefinitionCap, DefinitionLimits, DEFAULT_MAX_HANDLES};
use crate::read::{MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES};

/// Loads `bytes` as `p.wasm` (with `manifest` as `p.toml`) under `config`.
fn load_bytes(
    config: PluginHostConfig,
    bytes: &[u8],
    manifest: Option<&str>,
) -> (
    tempfile::TempDir,
    Registry,
    Result<LoadedPlugin, PluginError>,
) {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    std::fs::write(&wasm, bytes).unwrap();
    if let Some(text) = manifest {
        std::fs::write(dir.path().join("p.toml"), text).unwrap();
    }
    let registry = Registry::new();
    let result = PluginHost::new(config).unwrap().load_file(&wasm, &registry);
    (dir, registry, result)
}

// ---- item 6: a manifest may only lower limits unless the operator raises the ceiling ----

#[test]
fn a_manifest_cannot_raise_its_memory_or_timeout_past_the_default() {
    for (manifest, limit, asked, max, flag) in [
        (
            "[limits]\nmemory_mib = 128\n",
            "memory",
            "128 MiB",
            "64 MiB",
            "--plugin-max-memory 128MiB",
        ),
        (
            "[limits]\ntimeout_ms = 20000\n",
            "timeout",
            "20s",
            "10s",
            "--plugin-max-timeout 20s",
        ),
    ] {
        let (dir, registry, result) = load_bytes(config(), standard(), Some(manifest));
        let err = result.unwrap_err();
        match err.kind() {
            PluginErrorKind::LimitTooHigh {
                limit: l,
                asked: a,
                max: m,
            } => assert_eq!(
                (*l, a.to_string().as_str(), m.to_string().as_str()),
                (limit, asked, max)
            ),
            other => panic!("expected LimitTooHigh, got {other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the manifest asks for {limit} {asked}, above the host's maximum of {max}; lower it in the manifest, or have the operator raise the maximum ({flag}, PluginHostConfig::max_limits)",
                dir.path().join("p.toml").display()
            )
        );
        assert!(registry.is_empty());
    }
    // Lowering is always allowed.
    let (_dir, _registry, result) = load_bytes(
        config(),
        standard(),
        Some("[limits]\nmemory_mib = 16\ntimeout_ms = 500\n"),
    );
    let limits = result.unwrap().limits;
    assert_eq!(
        (limits.memory_bytes, limits.timeout),
        (16 << 20, Duration::from_millis(500))
    );
}

#[test]
fn the_operator_can_raise_the_ceiling() {
    let mut raised = config();
    raised.max_limits.memory_bytes = 256 << 20;
    raised.max_limits.timeout = Duration::from_secs(30);
    let (_dir, _registry, result) = load_bytes(
        raised,
        standard(),
        Some("[limits]\nmemory_mib = 128\ntimeout_ms = 20000\n"),
    );
    let limits = result.unwrap().limits;
    assert_eq!(limits.memory_bytes, 128 << 20);
    assert_eq!(limits.timeout, Duration::from_secs(20));
}

#[test]
fn the_default_maximum_is_the_default() {
    let config = PluginHostConfig::default();
    assert_eq!(config.max_limits, config.default_limits);
    assert_eq!(config.max_limits, PluginLimits::default());
}

#[test]
fn the_pool_reservation_is_bounded_and_fits_the_calls_to_it() {
    // The defaults: 64 calls x 64 MiB = 4 GiB, one slot per call (fresh instances).
    let host = PluginHost::new(PluginHostConfig {
        cache_dir: None,
        ..PluginHostConfig::default()
    })
    .unwrap();
    assert_eq!(
        *host.pool(),
        PoolPlan {
            slots: 64,
            slot_memory: 64 << 20,
            total_memory: 4 << 30,
            concurrent_calls: 64,
        }
    );
    // An operator raising the memory ceiling to 256 MiB gets fewer concurrent calls, not
    // 16 GiB of plugin memory.
    let mut raised = PluginHostConfig {
        cache_dir: None,
        ..PluginHostConfig::default()
    };
    raised.max_limits.memory_bytes = 256 << 20;
    let host = PluginHost::new(raised.clone()).unwrap();
    assert_eq!(
        *host.pool(),
        PoolPlan {
            slots: 16,
            slot_memory: 256 << 20,
            total_memory: 4 << 30,
            concurrent_calls: 16,
        }
    );
    // Reuse mode keeps an idle instance per call: two slots per call.
    raised.fresh_instance_per_call = false;
    let host = PluginHost::new(raised.clone()).unwrap();
    assert_eq!((host.pool().slots, host.pool().concurrent_calls), (16, 8));
    // A cap that cannot hold one call is a start-up error naming both.
    raised.max_pool_memory = 128 << 20;
    let err = PluginHost::new(raised).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the plugin host cannot start: one plugin call needs 512 MiB of pooled memory (2 slots of 256 MiB), above the pool's cap of 128 MiB; raise the cap (--plugin-pool-memory, PluginHostConfig::max_pool_memory) or lower the plugins' maximum memory (--plugin-max-memory)"
    );
}

#[test]
fn the_pool_is_stated_in_the_log_at_start() {
    let log = capture_log(|| {
        PluginHost::new(PluginHostConfig {
            cache_dir: None,
            ..PluginHostConfig::default()
        })
        .unwrap();
    });
    assert!(
        log.contains("plugin pool: 64 slots x 64 MiB = 4 GiB of plugin memory at most (cap 4 GiB); 64 calls at once"),
        "{log}"
    );
}

/// Runs `f` with an INFO-level subscriber writing to a buffer, and returns what it wrote.
fn capture_log(f: impl FnOnce()) -> String {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn holding_host_handles_is_a_limit_and_the_next_call_works() {
    let bytes = load_fixture::component(&Fixture::Handles);
    let (_dir, registry, result) = load_bytes(config(), &bytes, None);
    result.unwrap();
    let started = Instant::now();
    let err = call(&registry, "handles", "{}").await.unwrap_err();
    assert_eq!(
        err,
        ToolError::LimitExceeded {
            tool: "handles".into(),
            limit: toolhost::registry::Limit::Handles { count: 1024 },
            message: "the plugin held more than 1024 host handles (pollables, streams) at once and was stopped; drop each handle when done with it".into(),
        }
    );
    // Stopped at the cap, long before the 10 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        call(&registry, "echo", r#"{"ok":1}"#)
            .await
            .unwrap()
            .content,
        serde_json::json!({"ok": 1})
    );
}

#[test]
fn the_handle_cap_is_a_limit_a_manifest_can_lower_only() {
    assert_eq!(PluginLimits::default().max_handles, DEFAULT_MAX_HANDLES);
    let (_dir, _registry, result) =
        load_bytes(config(), standard(), Some("[limits]\nmax_handles = 64\n"));
    assert_eq!(result.unwrap().limits.max_handles, 64);
    let (_dir, _registry, result) = load_bytes(
        config(),
        standard(),
        Some("[limits]\nmax_handles = 100000\n"),
    );
    assert!(
        matches!(
            result.as_ref().map_err(PluginError::kind),
            Err(PluginErrorKind::LimitTooHigh {
                limit: "handles",
                ..
            })
        ),
        "{result:?}"
    );
}

// ---- item 5 (plugin part): a plugin's definitions are capped ----

/// The error loading definitions `definitions` under the default caps.
fn definitions_error(definitions: Vec<load_fixture::Definition>) -> PluginError {
    let bytes = load_fixture::component(&Fixture::Definitions(definitions));
    let (_dir, registry, result) = load_bytes(config(), &bytes, None);
    assert!(registry.is_empty());
    result.unwrap_err()
}

/// A valid object schema of exactly `bytes` bytes (at least 50).
fn schema_of(bytes: usize) -> String {
    let schema = format!(
        r#"{{"type":"object","description":"{}","properties":{{}}}}"#,
        "x".repeat(bytes - 50)
    );
    assert_eq!(schema.len(), bytes);
    schema
}

#[test]
fn definitions_over_a_cap_are_refused_naming_tool_what_and_cap() {
    let limits = DefinitionLimits::default();
    assert_eq!(
        (
            limits.max_tools,
            limits.max_schema_bytes,
            limits.max_description_bytes,
            limits.max_schema_depth,
            limits.max_total_bytes,
            limits.timeout
        ),
        (128, 64 << 10, 4 << 10, 32, 1 << 20, Duration::from_secs(5))
    );

    // A 5 MiB schema (the issue's was 50 MB).
    let err = definitions_error(vec![tool("big", &schema_of(5 << 20))]);
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::DefinitionsTooLarge {
                tool: Some(tool),
                cap: DefinitionCap::Schema,
                limit,
                ..
            } if tool == "big" && *limit == 64 << 10
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.ends_with("p.wasm: tool \"big\": its parameters schema is 5 MiB, over the host's cap of 64 KiB (DefinitionLimits::max_schema_bytes); the plugin was not loaded. Describe the arguments more briefly"),
        "{text}"
    );

    let long = (
        "long".to_owned(),
        "d".repeat(5000),
        fixture::EMPTY_SCHEMA.to_owned(),
    );
    let text = definitions_error(vec![long]).to_string();
    assert!(
        text.ends_with("p.wasm: tool \"long\": its description is 4.9 KiB, over the host's cap of 4 KiB (DefinitionLimits::max_description_bytes); the plugin was not loaded. Shorten the description"),
        "{text}"
    );

    let many: Vec<_> = (0..129)
        .map(|i| tool(&format!("t{i}"), fixture::EMPTY_SCHEMA))
        .collect();
    let err = definitions_error(many);
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::DefinitionsTooLarge {
                tool: None,
                cap: DefinitionCap::Tools,
                actual: 129,
                limit: 128,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().ends_with("p.wasm: the plugin declares 129 tools, over the host's cap of 128 (DefinitionLimits::max_tools); the plugin was not loaded. Split it into several plugins"),
        "{err}"
    );

    let mut deep = String::from(r#"{"type":"object","properties":{"a":"#);
    for _ in 0..40 {
        deep.push_str(r#"{"items":"#);
    }
    deep.push_str("{}");
    deep.push_str(&"}".repeat(40));
    deep.push_str("}}");
    let text = definitions_error(vec![tool("deep", &deep)]).to_string();
    assert!(
        text.ends_with("p.wasm: tool \"deep\": its parameters schema nests 43 levels deep, over the host's cap of 32 (DefinitionLimits::max_schema_depth); the plugin was not loaded. Flatten the schema"),
        "{text}"
    );

    // Each under its cap, together over the plugin's total.
    let total: Vec<_> = (0..20)
        .map(|i| tool(&format!("t{i}"), &schema_of(60 << 10)))
        .collect();
    let text = definitions_error(total).to_string();
    assert!(
        text.ends_with("p.wasm: the plugin's tool definitions total 1.2 MiB, over the host's cap of 1 MiB (DefinitionLimits::max_total_bytes); the plugin was not loaded. Shorten the descriptions and schemas, or split the plugin"),
        "{text}"
    );
}

#[test]
fn definitions_at_the_caps_load() {
    let mut definitions: Vec<_> = (0..127)
        .map(|i| tool(&format!("t{i}"), fixture::EMPTY_SCHEMA))
        .collect();
    definitions.push(("edge".into(), "d".repeat(4 << 10), schema_of(60 << 10)));
    let bytes = load_fixture::component(&Fixture::Definitions(definitions));
    let (_dir, registry, result) = load_bytes(config(), &bytes, None);
    assert_eq!(result.unwrap().tools.len(), 128);
    assert_eq!(registry.len(), 128);
}

// ---- item 9: files that are not regular files, and oversized files ----

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Runs `load` on another thread; fails (after unblocking it by opening `fifo` for
/// writing) if it has not answered within `limit`.
fn answers_within(
    limit: Duration,
    fifo: &Path,
    load: impl FnOnce() -> Result<LoadedPlugin, PluginError> + Send + 'static,
) -> Result<LoadedPlugin, PluginError> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(load());
    });
    match receive.recv_timeout(limit) {
        Ok(result) => result,
        Err(_) => {
            // Unblock the reader so the thread ends, then fail.
            drop(std::fs::OpenOptions::new().write(true).open(fifo));
            panic!("loading hung on the FIFO {}", fifo.display());
        }
    }
}

#[test]
fn a_fifo_manifest_or_component_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    std::fs::write(&wasm, standard()).unwrap();
    let manifest = dir.path().join("p.toml");
    mkfifo(&manifest);
    let host = Arc::new(PluginHost::new(config()).unwrap());
    let started = Instant::now();
    let (h, w) = (Arc::clone(&host), wasm);
    let err = answers_within(Duration::from_secs(5), &manifest, move || {
        h.load_file(&w, &Registry::new())
    })
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        matches!(err.kind(), PluginErrorKind::NotAFile { found: "a FIFO" })
            && err.path() == Some(manifest.as_path()),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: is a FIFO, not a regular file; a plugin's .wasm and its manifest must be regular files",
            manifest.display()
        )
    );

    let fifo = dir.path().join("q.wasm");
    mkfifo(&fifo);
    let (h, f) = (Arc::clone(&host), fifo.clone());
    let err = answers_within(Duration::from_secs(5), &fifo, move || {
        h.load_file(&f, &Registry::new())
    })
    .unwrap_err();
    assert!(
        matches!(err.kind(), PluginErrorKind::NotAFile { found: "a FIFO" })
            && err.path() == Some(fifo.as_path()),
        "{err:?}"
    );
    // A directory named like a plugin is refused the same way.
    let sub = dir.path().join("r.wasm");
    std::fs::create_dir(&sub).unwrap();
    let err = host.load_file(&sub, &Registry::new()).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::NotAFile {
                found: "a directory",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_fifo_in_a_plugin_directory_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wasm"), standard()).unwrap();
    mkfifo(&dir.path().join("a.toml"));
    let other = load_fixture::component(&Fixture::Definitions(vec![tool(
        "other",
        fixture::EMPTY_SCHEMA,
    )]));
    std::fs::write(dir.path().join("b.wasm"), other).unwrap();
    let host = Arc::new(PluginHost::new(config()).unwrap());
    let registry = Arc::new(Registry::new());
    let (h, r, d) = (
        Arc::clone(&host),
        Arc::clone(&registry),
        dir.path().to_owned(),
    );
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(h.load_dir(&d, &r));
    });
    let Ok(report) = receive.recv_timeout(Duration::from_secs(5)) else {
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.path().join("a.toml")),
        );
        panic!("load_dir hung on a FIFO manifest");
    };
    assert_eq!(report.loaded.len(), 1, "{report:?}");
    assert_eq!(report.loaded[0].name, "b");
    assert!(matches!(
        report.failed[0].error.kind(),
        PluginErrorKind::NotAFile {
            found: "a FIFO",
            ..
        }
    ));
    assert_eq!(registry.names(), ["other"]);
}

#[test]
fn oversized_manifests_and_components_are_refused_before_reading() {
    assert_eq!(
        (MAX_MANIFEST_BYTES, MAX_COMPONENT_BYTES),
        (64 << 10, 256 << 20)
    );
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    std::fs::write(&wasm, standard()).unwrap();
    let manifest = dir.path().join("p.toml");
    // Sparse: costs no disk, and reading it whole would take 1 GiB of memory.
    std::fs::File::create(&manifest)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let host = PluginHost::new(config()).unwrap();
    let err = host.load_file(&wasm, &Registry::new()).unwrap_err();
    assert!(
        matches!(err.kind(), PluginErrorKind::FileTooLarge { what: "manifest", size, limit, .. } if *size == 1 << 30 && *limit == 64 << 10),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the manifest is 1 GiB, over the host's cap of 64 KiB; a plugin's manifest is a few lines of TOML",
            manifest.display()
        )
    );
    std::fs::remove_file(&manifest).unwrap();

    let huge = dir.path().join("huge.wasm");
    let file = std::fs::File::create(&huge).unwrap();
    std::io::Write::write_all(&mut &file, &standard()[..8]).unwrap();
    file.set_len(300 << 20).unwrap();
    let err = host.load_file(&huge, &Registry::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the component is 300 MiB, over the host's cap of 256 MiB; is it a plugin built for wasm32-wasip2 (release, stripped)?",
            huge.display()
        )
    );
}

// ---- item 9: a definitions() that never answers ----

#[test]
fn looping_definitions_are_refused_at_the_deadline_concurrently_and_the_rest_load() {
    let mut config = config();
    config.max_concurrent_calls = 16;
    config.definition_limits.timeout = Duration::from_secs(1);
    let dir = tempfile::tempdir().unwrap();
    let looping = load_fixture::component(&Fixture::LoopingDefinitions);
    for i in 0..8 {
        std::fs::write(dir.path().join(format!("loop{i}.wasm")), &looping).unwrap();
    }
    std::fs::write(dir.path().join("good.wasm"), standard()).unwrap();
    let host = PluginHost::new(config).unwrap();
    let registry = Registry::new();
    let started = Instant::now();
    let report = host.load_dir(dir.path(), &registry);
    let elapsed = started.elapsed();
    assert_eq!(report.loaded.len(), 1, "{report:?}");
    assert_eq!(report.loaded[0].name, "good");
    assert_eq!(report.failed.len(), 8);
    for failure in &report.failed {
        assert!(
            matches!(failure.error.kind(), PluginErrorKind::Definitions { .. }),
            "{failure:?}"
        );
        assert_eq!(
            failure.error.to_string(),
            format!(
                "{}: asking the plugin for its tool definitions failed: it did not answer within 1s (the definitions deadline, DefinitionLimits::timeout)",
                failure.path.display()
            )
        );
    }
    // Eight 1 s deadlines run at once, not one after the other (8 s, or 4 s on two
    // threads); compiling the fixtures takes well under a second.
    assert!(elapsed < Duration::from_millis(3500), "{elapsed:?}");
    assert_eq!(registry.names(), fixture::TOOLS);
}

#[test]
fn a_looping_definitions_is_stopped_by_the_default_deadline_not_the_call_timeout() {
    let mut config = config();
    // A plugin call may run 30 s; asking for definitions still stops at 5 s.
    config.default_limits.timeout = Duration::from_secs(30);
    config.max_limits.timeout = Duration::from_secs(30);
    let looping = load_fixture::component(&Fixture::LoopingDefinitions);
    let started = Instant::now();
    let (_dir, _registry, result) = load_bytes(config, &looping, None);
    let elapsed = started.elapsed();
    let err = result.unwrap_err();
    assert!(
        err.to_string().ends_with(
            "it did not answer within 5s (the definitions deadline, DefinitionLimits::timeout)"
        ),
        "{err}"
    );
    assert!(elapsed >= Duration::from_secs(5), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
}
