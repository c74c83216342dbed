//! The host's imports under attack (the import-time and import-count attacks): a plugin stuck in a slow
//! storage call stalls no other call and is answered at its own deadline, and its file
//! calls, reads and writes per call are bounded, with an error the plugin can report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{FileContent, FileEntry, MemoryStorage, Storage, StorageError};
use toolhost_plugin::{FileAccess, PluginHost, PluginHostConfig, PluginLimits};

use crate::common::cache_dir;

/// How long a read of a path containing `slow` takes.
const STALL: Duration = Duration::from_secs(5);

/// A store whose reads of paths containing `slow` block their thread for [`STALL`], as
/// a hung network file system does.
struct SlowStorage(Arc<MemoryStorage>);

impl Storage for SlowStorage {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        if path.contains("slow") {
            std::thread::sleep(STALL);
        }
        self.0.read(path)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.0.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.0.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        self.0.list()
    }
}

struct Imports {
    registry: Arc<Registry>,
    plugin_store: Arc<MemoryStorage>,
    _plugins: tempfile::TempDir,
}

/// greet and hostile_imports (read-write grant) over a [`SlowStorage`], and the built-in
/// file tools over a separate store holding `a.txt`.
fn setup(limits: PluginLimits) -> Imports {
    let plugins = tempfile::tempdir().expect("plugins dir");
    toolhost_tests::install(plugins.path(), &["greet", "hostile_imports"]).expect("install");
    let plugin_store = Arc::new(MemoryStorage::new());
    let slow: Arc<dyn Storage> = Arc::new(SlowStorage(Arc::clone(&plugin_store)));
    let builtin_store = MemoryStorage::new();
    builtin_store.write("a.txt", b"hello\n", "").expect("a.txt");
    let registry = Arc::new(Registry::new());
    register_vfs_tools(&registry, VfsToolOptions::new(Arc::new(builtin_store))).expect("built-ins");
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(cache_dir()))
            .default_limits(limits)
            .storage(Some(slow))
            .max_file_access(FileAccess::ReadWrite)
            .build(),
    )
    .expect("plugin host");
    let report = host.load_dir(plugins.path(), &registry);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    Imports {
        registry,
        plugin_store,
        _plugins: plugins,
    }
}

impl Imports {
    async fn call(&self, tool: &str, arguments: Value) -> Result<Value, ToolError> {
        dispatch(&self.registry, CallContext::new(), tool, arguments).await
    }
}

async fn dispatch(
    registry: &Registry,
    ctx: CallContext,
    tool: &str,
    arguments: Value,
) -> Result<Value, ToolError> {
    registry
        .dispatch(
            &ctx,
            &ToolCall::new(tool, arguments.to_string()),
            &Environment::generate(),
        )
        .await
        .map(|result| result.content)
}

/// Two plugin calls stuck in a 5 s storage read on a 2-worker runtime: an unrelated
/// built-in read_file (2 s timeout) and a greet call are answered at once, and each plugin
/// call is answered `TimedOut` at its 1 s deadline, long before the read returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_storage_call_stalls_no_other_call_and_times_out_at_its_deadline() {
    let timeout = Duration::from_secs(1);
    let setup = setup(PluginLimits::default().with_timeout(timeout));
    setup
        .plugin_store
        .write("slow.txt", b"slow", "")
        .expect("slow.txt");
    let started = Instant::now();
    let spawn = |tool: &'static str, arguments: Value, ctx: CallContext| {
        let registry = Arc::clone(&setup.registry);
        tokio::spawn(async move {
            let result = dispatch(&registry, ctx, tool, arguments).await;
            (result, started.elapsed())
        })
    };
    let stuck: Vec<_> = (0..2)
        .map(|_| {
            spawn(
                "imports_read",
                json!({"paths": ["slow.txt"]}),
                CallContext::new(),
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let read = spawn(
        "read_file",
        json!({"path": "a.txt"}),
        CallContext::with_timeout(Duration::from_secs(2)),
    );
    let greet = spawn("greet", json!({"name": "Ada"}), CallContext::new());

    let (result, at) = read.await.expect("read_file task");
    assert_eq!(result.expect("read_file")["content"], "1\thello\n");
    assert!(
        at < Duration::from_millis(1500),
        "read_file answered after {at:?}"
    );
    let (result, at) = greet.await.expect("greet task");
    assert_eq!(result.expect("greet"), Value::from("Hello, Ada!"));
    assert!(
        at < Duration::from_millis(1500),
        "greet answered after {at:?}"
    );
    for call in stuck {
        let (result, at) = call.await.expect("plugin task");
        assert_eq!(
            result,
            Err(ToolError::TimedOut {
                tool: "imports_read".into(),
                limit: timeout
            })
        );
        assert!(at >= timeout, "answered early: {at:?}");
        assert!(
            at < Duration::from_secs(3),
            "answered after {at:?}, not at its deadline"
        );
    }
}

/// The 1001st file call of one tool call is refused with a message the plugin can report.
#[tokio::test]
async fn a_call_gets_a_thousand_file_calls() {
    let setup = setup(PluginLimits::default());
    setup.plugin_store.write("a.md", b"a", "").expect("a.md");
    let result = setup
        .call("imports_calls", json!({"count": 1500}))
        .await
        .expect("imports_calls");
    assert_eq!(
        result,
        json!({"done": 1000, "error": {"kind": "denied", "message":
            "plugin \"hostile_imports\" made 1000 file calls in this tool call, its limit per call (limits.max_file_calls); touch fewer files per call"}})
    );
    // The budget is per call: the next call starts afresh.
    let result = setup.call("imports_calls", json!({"count": 10})).await;
    assert_eq!(
        result.expect("next call"),
        json!({"done": 10, "error": null})
    );
}

/// Per-call write quotas: files written, then bytes written.
#[tokio::test]
async fn writes_per_call_are_bounded_in_files_and_bytes() {
    let setup = setup(PluginLimits::default());
    let result = setup
        .call(
            "imports_write",
            json!({"count": 150, "size": 10, "prefix": "many/f"}),
        )
        .await
        .expect("imports_write");
    assert_eq!(
        result,
        json!({"done": 100, "error": {"kind": "denied", "message":
            "writing \"many/f100.txt\" would be file 101 written in this tool call, over the plugin's limit of 100 files per call (limits.max_files_written_per_call); write fewer files per call"}})
    );
    assert_eq!(setup.plugin_store.list().expect("list").len(), 100);

    let mib = 1024 * 1024;
    let result = setup
        .call(
            "imports_write",
            json!({"count": 20, "size": mib, "prefix": "big/f"}),
        )
        .await
        .expect("imports_write");
    assert_eq!(
        result,
        json!({"done": 16, "error": {"kind": "too-large", "message":
            "writing \"big/f16.txt\" (1 MiB) would bring this tool call's writes to 17 MiB, over the plugin's limit of 16 MiB per call (limits.max_write_bytes_per_call); write less per call"}})
    );
    assert!(setup.plugin_store.read("big/f16.txt").is_err());
}

/// A file larger than the plugin's memory is refused before it is read into the host or
/// copied into the guest, with its size and the cap.
#[tokio::test]
async fn a_read_is_capped_at_the_plugins_memory() {
    let setup = setup(PluginLimits::default().with_memory_bytes(16 * 1024 * 1024));
    let size = 17 * 1024 * 1024;
    setup
        .plugin_store
        .write("big.bin", &vec![b'x'; size], "")
        .expect("big.bin");
    let result = setup
        .call("imports_read", json!({"paths": ["big.bin"]}))
        .await
        .expect("imports_read");
    assert_eq!(
        result,
        json!({"done": 0, "error": {"kind": "too-large", "message":
            "\"big.bin\" is 17 MiB (17825792 bytes), over this plugin's cap of 16 MiB on one read (its memory limit: a file is read into its memory whole); read a smaller file"}})
    );
    assert_eq!(
        setup.call("greet", json!({"name": "Ada"})).await,
        Ok(Value::from("Hello, Ada!"))
    );
}

/// The lifetime quota is the plugin's, across calls: 150 files in total, so a second
/// call of 100 writes gets 50.
#[tokio::test]
async fn the_lifetime_write_quota_spans_calls() {
    let limits = PluginLimits::default();
    let imports = limits.imports().clone().with_max_files_written_total(150);
    let setup = setup(limits.with_imports(imports));
    let first = setup
        .call(
            "imports_write",
            json!({"count": 100, "size": 1, "prefix": "a/f"}),
        )
        .await;
    assert_eq!(
        first.expect("first call"),
        json!({"done": 100, "error": null})
    );
    let second = setup
        .call(
            "imports_write",
            json!({"count": 100, "size": 1, "prefix": "b/f"}),
        )
        .await;
    assert_eq!(
        second.expect("second call"),
        json!({"done": 50, "error": {"kind": "denied", "message":
            "writing \"b/f50.txt\" would be file 151 plugin \"hostile_imports\" has written since the host started, over its limit of 150 (limits.max_files_written_total); the operator can raise it, or restart the host"}})
    );
    assert_eq!(setup.plugin_store.list().expect("list").len(), 150);
}
