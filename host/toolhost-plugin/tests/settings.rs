//! The settings as an embedder sees them: built through the builder and the `with_*`
//! setters only (this file is outside the crate, so no field is reachable), read back
//! through the getters, and refused or lowered beyond their bounds exactly as the
//! setters' docs say.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolhost::vfs::{FilePolicy, MemoryStorage, Storage};
use toolhost_plugin::limits::{DefinitionLimits, HttpLimits, ImportLimits};
use toolhost_plugin::{
    CompileTiers, ConfigValues, FileAccess, HttpPolicy, PluginErrorKind, PluginHost,
    PluginHostConfig, PluginLimits,
};

/// The message of a [`PluginErrorKind::Host`] error from `PluginHost::new(config)`.
fn host_error(config: PluginHostConfig) -> String {
    match PluginHost::new(config)
        .map(|_| ())
        .map_err(|err| err.into_kind())
    {
        Err(PluginErrorKind::Host { message }) => message,
        other => panic!("not a Host error: {other:?}"),
    }
}

#[test]
fn every_setting_is_built_through_the_builder_and_read_back_through_its_getter() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let imports = ImportLimits::default()
        .with_max_file_calls(7)
        .with_max_read_bytes_per_call(3 << 20)
        .with_max_write_bytes_per_call(2 << 20)
        .with_max_files_written_per_call(5)
        .with_max_write_bytes_total(9 << 20)
        .with_max_files_written_total(11)
        .with_log_lines_per_second(13)
        .with_log_burst(17);
    let http = HttpLimits::default()
        .with_max_requests(3)
        .with_max_request_bytes(1024)
        .with_max_response_bytes(2048)
        .with_connect_timeout(Duration::from_millis(1500));
    let limits = PluginLimits::default()
        .with_timeout(Duration::from_secs(3))
        .with_memory_bytes(32 << 20)
        .with_fuel(Some(1_000_000))
        .with_max_output_bytes(4096)
        .with_max_stderr_bytes(512)
        .with_max_instances(8)
        .with_max_tables(6)
        .with_max_handles(64)
        .with_imports(imports)
        .with_http(http);
    let definitions = DefinitionLimits::default()
        .with_max_tools(4)
        .with_max_schema_bytes(1000)
        .with_max_title_bytes(40)
        .with_max_description_bytes(200)
        .with_max_schema_depth(5)
        .with_max_total_bytes(5000)
        .with_timeout(Duration::from_secs(2));
    let policy = FilePolicy::default()
        .with_hide_hidden_paths(true)
        .with_allowed_extensions(Some(vec![".md".to_owned()]))
        .with_max_file_bytes(100)
        .with_read_only(true);
    let mut values = ConfigValues::default();
    values.set_assignment("greet.NAME=world").unwrap();
    let allow_http = HttpPolicy::default()
        .with_allow(vec!["api.example.org".parse().unwrap()])
        .with_allow_nets(vec!["127.0.0.1/32".parse().unwrap()]);

    let config = PluginHostConfig::builder()
        .cache_dir(Some(PathBuf::from("/var/cache/toolhost-test")))
        .storage_roots(vec![PathBuf::from("/srv/files")])
        .default_limits(limits.clone())
        .max_limits(limits.clone().with_timeout(Duration::from_secs(30)))
        .max_pool_memory(1 << 30)
        .definition_limits(definitions.clone())
        .storage(Some(Arc::clone(&storage)))
        .file_policy(policy.clone())
        .max_file_access(FileAccess::Read)
        .fresh_instance_per_call(false)
        .max_concurrent_calls(3)
        .http(allow_http)
        .config_values(values)
        .compile_tiers(CompileTiers::QuickFirst)
        .build();

    assert_eq!(
        config.cache_dir(),
        Some(PathBuf::from("/var/cache/toolhost-test").as_path())
    );
    assert_eq!(config.storage_roots(), [PathBuf::from("/srv/files")]);
    assert_eq!(config.default_limits(), &limits);
    assert_eq!(config.max_limits().timeout(), Duration::from_secs(30));
    assert_eq!(config.max_pool_memory(), 1 << 30);
    assert_eq!(config.definition_limits(), &definitions);
    assert!(Arc::ptr_eq(config.storage().unwrap(), &storage));
    assert_eq!(config.file_policy(), &policy);
    assert_eq!(config.max_file_access(), FileAccess::Read);
    assert!(!config.fresh_instance_per_call());
    assert_eq!(config.max_concurrent_calls(), 3);
    assert_eq!(config.http().allow()[0].to_string(), "api.example.org");
    assert_eq!(config.http().allow_nets()[0].to_string(), "127.0.0.1/32");
    assert_eq!(
        config
            .config_values()
            .get("greet", "NAME")
            .map(|value| value.expose().to_owned()),
        Some("world".to_owned())
    );
    assert_eq!(config.compile_tiers(), CompileTiers::QuickFirst);

    // Each limit's getter gives back what its setter was given.
    let limits = config.default_limits();
    assert_eq!(
        (limits.timeout(), limits.memory_bytes(), limits.fuel()),
        (Duration::from_secs(3), 32 << 20, Some(1_000_000))
    );
    assert_eq!(
        (limits.max_output_bytes(), limits.max_stderr_bytes()),
        (4096, 512)
    );
    assert_eq!(
        (
            limits.max_instances(),
            limits.max_tables(),
            limits.max_handles()
        ),
        (8, 6, 64)
    );
    let imports = limits.imports();
    assert_eq!(
        (
            imports.max_file_calls(),
            imports.max_read_bytes_per_call(),
            imports.max_write_bytes_per_call(),
            imports.max_files_written_per_call(),
        ),
        (7, 3 << 20, 2 << 20, 5)
    );
    assert_eq!(
        (
            imports.max_write_bytes_total(),
            imports.max_files_written_total(),
            imports.log_lines_per_second(),
            imports.log_burst(),
        ),
        (9 << 20, 11, 13, 17)
    );
    let http = limits.http();
    assert_eq!(
        (
            http.max_requests(),
            http.max_request_bytes(),
            http.max_response_bytes(),
            http.connect_timeout(),
        ),
        (3, 1024, 2048, Duration::from_millis(1500))
    );
    let definitions = config.definition_limits();
    assert_eq!(
        (
            definitions.max_tools(),
            definitions.max_schema_bytes(),
            definitions.max_title_bytes(),
            definitions.max_description_bytes(),
            definitions.max_schema_depth(),
            definitions.max_total_bytes(),
            definitions.timeout(),
        ),
        (4, 1000, 40, 200, 5, 5000, Duration::from_secs(2))
    );
    let policy = config.file_policy();
    assert!(policy.hide_hidden_paths() && policy.read_only());
    assert_eq!(policy.allowed_extensions(), Some(&[".md".to_owned()][..]));
    assert_eq!(policy.max_file_bytes(), 100);

    // A builder from a config changes only what it is told to.
    let changed = config.to_builder().max_concurrent_calls(9).build();
    assert_eq!(changed.max_concurrent_calls(), 9);
    assert_eq!(changed.default_limits(), config.default_limits());
}

#[test]
fn the_defaults_are_the_ones_the_setters_state() {
    let config = PluginHostConfig::default();
    assert_eq!(config.max_file_access(), FileAccess::None);
    assert!(config.storage().is_none() && config.storage_roots().is_empty());
    assert!(config.fresh_instance_per_call());
    assert_eq!(config.max_concurrent_calls(), 64);
    assert_eq!(config.max_pool_memory(), 4 << 30);
    assert_eq!(config.compile_tiers(), CompileTiers::Optimized);
    assert_eq!(config.default_limits(), config.max_limits());
    assert!(config.http().allow().is_empty() && config.http().allow_nets().is_empty());
    assert!(config.config_values().is_empty());

    let limits = PluginLimits::default();
    assert_eq!(limits.timeout(), Duration::from_secs(10));
    assert_eq!(limits.memory_bytes(), 64 << 20);
    assert_eq!(limits.fuel(), None);
    assert_eq!(limits.max_output_bytes(), 1 << 20);
    assert_eq!(limits.max_stderr_bytes(), 64 << 10);
    assert_eq!((limits.max_instances(), limits.max_tables()), (32, 32));
    assert_eq!(limits.max_handles(), 1024);
    let imports = limits.imports();
    assert_eq!(imports.max_file_calls(), 1000);
    assert_eq!(imports.max_read_bytes_per_call(), 256 << 20);
    assert_eq!(imports.max_write_bytes_per_call(), 16 << 20);
    assert_eq!(imports.max_files_written_per_call(), 100);
    assert_eq!(imports.max_write_bytes_total(), 1 << 30);
    assert_eq!(imports.max_files_written_total(), 10_000);
    assert_eq!(
        (imports.log_lines_per_second(), imports.log_burst()),
        (100, 1000)
    );
    let http = limits.http();
    assert_eq!(http.max_requests(), 16);
    assert_eq!(http.max_request_bytes(), 1 << 20);
    assert_eq!(http.max_response_bytes(), 8 << 20);
    assert_eq!(http.connect_timeout(), Duration::from_secs(5));
    let definitions = DefinitionLimits::default();
    assert_eq!(definitions.max_tools(), 128);
    assert_eq!(definitions.max_schema_bytes(), 64 << 10);
    assert_eq!(definitions.max_title_bytes(), 256);
    assert_eq!(definitions.max_description_bytes(), 4 << 10);
    assert_eq!(definitions.max_schema_depth(), 32);
    assert_eq!(definitions.max_total_bytes(), 1 << 20);
    assert_eq!(definitions.timeout(), Duration::from_secs(5));
}

#[test]
fn default_limits_above_the_maximum_are_refused_when_the_host_starts() {
    let config = PluginHostConfig::builder()
        .cache_dir(None)
        .default_limits(PluginLimits::default().with_memory_bytes(128 << 20))
        .build();
    assert_eq!(
        host_error(config),
        "the default memory limit (128 MiB) is above the maximum (64 MiB); raise max_limits or lower default_limits"
    );
    let config = PluginHostConfig::builder()
        .cache_dir(None)
        .default_limits(PluginLimits::default().with_timeout(Duration::from_secs(11)))
        .build();
    assert_eq!(
        host_error(config),
        "the default timeout limit (11s) is above the maximum (10s); raise max_limits or lower default_limits"
    );
}

#[test]
fn a_pool_too_small_for_one_call_is_refused_and_a_smaller_one_lowers_the_calls() {
    // Below one call's 64 MiB slot: refused.
    let config = PluginHostConfig::builder()
        .cache_dir(None)
        .max_pool_memory(32 << 20)
        .build();
    assert_eq!(
        host_error(config),
        "one plugin call needs 64 MiB of pooled memory (1 slot of 64 MiB), above the pool's cap of 32 MiB; raise the cap (--plugin-pool-memory, PluginHostConfig::max_pool_memory) or lower the plugins' maximum memory (--plugin-max-memory)"
    );
    // Room for 4 calls of 64 MiB: 64 calls asked, 4 run at once; the setting is kept.
    let config = PluginHostConfig::builder()
        .cache_dir(None)
        .max_pool_memory(256 << 20)
        .build();
    let host = PluginHost::new(config).unwrap();
    assert_eq!(host.config().max_concurrent_calls(), 64);
    assert_eq!(host.pool().concurrent_calls, 4);
    assert_eq!(host.pool().total_memory, 256 << 20);
    // 0 calls at once counts as 1.
    let config = PluginHostConfig::builder()
        .cache_dir(None)
        .max_concurrent_calls(0)
        .build();
    assert_eq!(PluginHost::new(config).unwrap().pool().concurrent_calls, 1);
}
