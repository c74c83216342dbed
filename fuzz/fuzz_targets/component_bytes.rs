//! `component_bytes`: mutated bytes of components (the plugin host's fixture components
//! and the example plugins, in the seed corpus) given to the loader.
//!
//! Invariants: the file is refused with a load error naming it, or loaded and every tool
//! it declares called under the limits (1 s per call here), each call ending in a result
//! or a tool error; never a host crash, never a call past its deadline.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use toolhost::registry::Registry;
use toolhost::vfs::MemoryStorage;
use toolhost_fuzz::dispatch;
use toolhost_plugin::{FileAccess, PluginHost, PluginHostConfig, PluginLimits};

const TIMEOUT: Duration = Duration::from_secs(1);

struct Host {
    host: PluginHost,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let limits = PluginLimits::default()
            .with_timeout(TIMEOUT)
            .with_memory_bytes(16 << 20);
        let config = PluginHostConfig::builder()
            .cache_dir(None)
            .default_limits(limits.clone())
            .max_limits(limits)
            .max_concurrent_calls(2)
            .storage(Some(Arc::new(MemoryStorage::new())))
            .max_file_access(FileAccess::ReadWrite)
            .build();
        let host = PluginHost::new(config).expect("a plugin host");
        let dir = tempfile::tempdir().expect("a temp dir");
        Host {
            host,
            file: dir.path().join("fuzzed.wasm"),
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Host { host, file, .. } = host();
    std::fs::write(file, data).expect("write the component");
    let registry = Registry::new();
    let loaded = match host.load_file(file, &registry) {
        Ok(loaded) => loaded,
        Err(err) => {
            assert!(
                err.to_string().contains("fuzzed.wasm"),
                "the error names the file: {err}"
            );
            return;
        }
    };
    for tool in &loaded.tools {
        let started = Instant::now();
        let _ = dispatch(&registry, tool, "{}");
        let elapsed = started.elapsed();
        // The deadline plus scheduling slack on a loaded machine.
        assert!(elapsed < TIMEOUT * 3, "{tool} ran {elapsed:?}");
    }
});
