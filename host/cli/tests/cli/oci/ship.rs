//! `host push` and `host pull` against a real registry on loopback, then `host call`,
//! `host tools` and the lock; credentials; and a pull that fails changing nothing.

use std::path::Path;

use super::registry::{Registry, PASSWORD, USER};
use super::support::{fails, host, ok, outputs};
use crate::text;

/// A directory like plugins/dist holding copies of the named built plugins (with their
/// manifests).
fn dist(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), names).unwrap();
    dir
}

/// No docker config: an empty DOCKER_CONFIG directory (never the user's own).
fn no_docker() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = text(dir.path()).to_owned();
    (dir, path)
}

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                std::fs::read(entry.path()).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn call_greet(plugins: &Path) -> String {
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
fn push_pull_call_then_a_flipped_byte_an_update_and_the_lock() {
    let registry = Registry::start();
    let (_docker, docker) = no_docker();
    let env = [("DOCKER_CONFIG", docker.as_str())];
    let dist = dist(&["greet", "divide"]);
    let greet = dist.path().join("greet.wasm");
    let reference = registry.oci("tools/greet:1");

    let pushed = ok(&["push", text(&greet), &reference], &env);
    let digest = pushed
        .lines()
        .find_map(|line| line.strip_prefix("digest "))
        .unwrap_or_else(|| panic!("no digest line: {pushed}"))
        .to_owned();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{pushed}"
    );

    let plugins = tempfile::tempdir().unwrap();
    let newdir = plugins.path().join("new");
    let pulled = ok(&["pull", &reference, "--plugins", text(&newdir)], &env);
    assert!(
        pulled.contains(&format!("  digest      {digest}")),
        "{pulled}"
    );
    assert_eq!(call_greet(&newdir), "\"Hello, Ada!\"\n");
    assert_eq!(
        std::fs::read(newdir.join("greet.wasm")).unwrap(),
        std::fs::read(&greet).unwrap()
    );
    let lock = std::fs::read_to_string(newdir.join("plugins.lock")).unwrap();
    assert!(
        lock.contains(&format!("source = \"{reference}\"")),
        "{lock}"
    );
    assert!(
        lock.contains(&format!("source_digest = \"{digest}\"")),
        "{lock}"
    );

    // Pulling the same tag again: nothing to do.
    let again = ok(&["pull", &reference, "--plugins", text(&newdir)], &env);
    assert_eq!(
        again,
        format!("greet.wasm is up to date: {reference} is still {digest}\n")
    );

    // One byte flipped: `host tools` leaves greet out, naming sha256; --require-lock too.
    let wasm = newdir.join("greet.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let third = bytes.len() / 3;
    bytes[third] ^= 1;
    std::fs::write(&wasm, &bytes).unwrap();
    for extra in [&[][..], &["--require-lock"]] {
        let mut args = vec![
            "tools",
            "--no-builtins",
            "--no-cache",
            "--plugins",
            text(&newdir),
        ];
        args.extend(extra);
        let out = host(&args, &[]);
        let (stdout, stderr) = outputs(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(!stdout.contains("greet"), "{stdout}");
        assert!(
            stderr.contains("greet.wasm: refused by") && stderr.contains("its digest is sha256:"),
            "{stderr}"
        );
    }
    // Pulling again repairs it (same digest as pinned: no --update needed).
    let repaired = ok(&["pull", &reference, "--plugins", text(&newdir)], &env);
    assert!(
        repaired.starts_with(&format!("pulled {reference}")),
        "{repaired}"
    );
    assert_eq!(call_greet(&newdir), "\"Hello, Ada!\"\n");

    // The tag moves to another component: refused without --update, nothing changed.
    let moved = ok(
        &["push", text(&dist.path().join("divide.wasm")), &reference],
        &env,
    );
    let new_digest = moved
        .lines()
        .find_map(|line| line.strip_prefix("digest "))
        .unwrap()
        .to_owned();
    assert_ne!(new_digest, digest);
    let before = snapshot(&newdir);
    let refused = fails(&["pull", &reference, "--plugins", text(&newdir)], &env);
    assert_eq!(
        refused,
        format!(
            "error: {reference} now points to {new_digest}, but {} pins {digest} from it; pass --update to take the new version\n",
            newdir.join("plugins.lock").display()
        )
    );
    assert_eq!(snapshot(&newdir), before);
    let updated = ok(
        &["pull", &reference, "--plugins", text(&newdir), "--update"],
        &env,
    );
    assert!(
        updated.contains(&format!("  digest      {new_digest}")),
        "{updated}"
    );
    assert_eq!(
        std::fs::read(newdir.join("greet.wasm")).unwrap(),
        std::fs::read(dist.path().join("divide.wasm")).unwrap()
    );
    let tools = ok(
        &[
            "tools",
            "--no-builtins",
            "--no-cache",
            "--plugins",
            text(&newdir),
            "--require-lock",
        ],
        &[],
    );
    assert!(tools.starts_with("divide"), "{tools}");

    // Pinned by digest: the first version, exactly.
    let pinned = tempfile::tempdir().unwrap();
    let by_digest = registry.oci(&format!("tools/greet@{digest}"));
    ok(
        &["pull", &by_digest, "--plugins", text(pinned.path())],
        &env,
    );
    assert_eq!(call_greet(pinned.path()), "\"Hello, Ada!\"\n");
}

#[test]
fn a_plugin_with_a_manifest_travels_with_it() {
    let registry = Registry::start();
    let (_docker, docker) = no_docker();
    let env = [("DOCKER_CONFIG", docker.as_str())];
    let dist = dist(&["wordcount"]);
    assert!(
        dist.path().join("wordcount.toml").is_file(),
        "wordcount ships a manifest"
    );
    let reference = registry.oci("acme/wordcount:2");
    let pushed = ok(
        &[
            "push",
            text(&dist.path().join("wordcount.wasm")),
            &reference,
        ],
        &env,
    );
    assert!(
        pushed.contains("wordcount.wasm and wordcount.toml to"),
        "{pushed}"
    );
    let plugins = tempfile::tempdir().unwrap();
    let pulled = ok(
        &["pull", &reference, "--plugins", text(plugins.path())],
        &env,
    );
    assert!(pulled.contains("  wordcount.toml  sha256:"), "{pulled}");
    for file in ["wordcount.wasm", "wordcount.toml"] {
        assert_eq!(
            std::fs::read(plugins.path().join(file)).unwrap(),
            std::fs::read(dist.path().join(file)).unwrap(),
            "{file}"
        );
    }
    let lock = std::fs::read_to_string(plugins.path().join("plugins.lock")).unwrap();
    assert!(lock.contains("manifest_digest = \"sha256:"), "{lock}");
    let tools = ok(
        &[
            "tools",
            "--no-builtins",
            "--no-cache",
            "--plugin-files",
            "read",
            "--plugins",
            text(plugins.path()),
            "--require-lock",
        ],
        &[],
    );
    assert!(tools.starts_with("wordcount"), "{tools}");
    // The manifest changed by hand: refused, naming it.
    std::fs::write(
        plugins.path().join("wordcount.toml"),
        "[grants]\nfiles = \"read-write\"\n",
    )
    .unwrap();
    let out = host(
        &[
            "tools",
            "--no-builtins",
            "--no-cache",
            "--plugin-files",
            "read-write",
            "--plugins",
            text(plugins.path()),
        ],
        &[],
    );
    let (stdout, stderr) = outputs(&out);
    assert!(!stdout.contains("wordcount"), "{stdout}");
    assert!(stderr.contains("wordcount.toml: refused by"), "{stderr}");
    assert!(
        stderr.contains("its manifest's digest is sha256:"),
        "{stderr}"
    );

    // The tag moves to a version without a manifest: --update removes the old one, and
    // the lock pins "no manifest".
    let plain = self::dist(&["greet"]);
    ok(
        &["push", text(&plain.path().join("greet.wasm")), &reference],
        &env,
    );
    ok(
        &[
            "pull",
            &reference,
            "--plugins",
            text(plugins.path()),
            "--update",
        ],
        &env,
    );
    assert!(!plugins.path().join("wordcount.toml").exists());
    let lock = std::fs::read_to_string(plugins.path().join("plugins.lock")).unwrap();
    assert!(!lock.contains("manifest_digest"), "{lock}");
    let tools = ok(
        &[
            "tools",
            "--no-builtins",
            "--no-cache",
            "--plugins",
            text(plugins.path()),
            "--require-lock",
        ],
        &[],
    );
    assert!(tools.starts_with("greet"), "{tools}");
    let mut names: Vec<String> = std::fs::read_dir(plugins.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["plugins.lock", "wordcount.wasm"],
        "nothing left aside"
    );
}

#[test]
fn a_failed_pull_changes_nothing() {
    let registry = Registry::start();
    let (_docker, docker) = no_docker();
    let env = [("DOCKER_CONFIG", docker.as_str())];
    let dist = dist(&["greet"]);
    ok(
        &[
            "push",
            text(&dist.path().join("greet.wasm")),
            &registry.oci("tools/greet:1"),
        ],
        &env,
    );
    let plugins = tempfile::tempdir().unwrap();
    let dir = plugins.path();
    ok(
        &[
            "pull",
            &registry.oci("tools/greet:1"),
            "--plugins",
            text(dir),
        ],
        &env,
    );
    let before = snapshot(dir);
    assert_eq!(before.len(), 2);

    // A core module pushed as application/wasm by another client.
    let module_dir = tempfile::tempdir().unwrap();
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.extend([0_u8; 64]);
    std::fs::write(module_dir.path().join("greet.wasm"), &module).unwrap();
    let target = format!("{}/tools/core:1", registry.address);
    super::registry::oras(
        &[
            "push",
            &target,
            text(module_dir.path()),
            "greet.wasm:application/wasm",
        ],
        &[],
    );
    let (core, missing, greet1) = (
        registry.oci("tools/core:1"),
        registry.oci("tools/greet:404"),
        registry.oci("tools/greet:1"),
    );
    let failures = [
        (
            vec!["pull", &core, "--name", "greet", "--update"],
            "is a core WebAssembly module, not a component",
        ),
        (vec!["pull", &missing, "--update"], "(404 Not Found)"),
        (
            vec![
                "pull",
                &greet1,
                "--update",
                "--name",
                "greet",
                "--max-plugin-bytes",
                "1KiB",
            ],
            "over the limit of 1 KiB; raise --max-plugin-bytes",
        ),
        (
            vec!["pull", "docker://127.0.0.1/tools/greet:1"],
            "is not an oci:// reference; write oci://HOST[:PORT]/REPOSITORY:TAG",
        ),
        (
            vec!["pull", &greet1, "--name", "../evil"],
            "--name \"../evil\" is not a plugin name",
        ),
    ];
    for (args, words) in failures {
        let mut args = args.clone();
        args.extend(["--plugins", text(dir)]);
        let stderr = fails(&args, &env);
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        assert_eq!(snapshot(dir), before, "{args:?} changed the directory");
    }
    // The name is pinned from another source: refused without --update.
    let stderr = fails(
        &[
            "pull",
            &registry.oci("tools/core:1"),
            "--name",
            "greet",
            "--plugins",
            text(dir),
        ],
        &env,
    );
    assert!(
        stderr.contains(&format!(
            "is already pinned in {} from {}; pass --update to replace it",
            dir.join("plugins.lock").display(),
            registry.oci("tools/greet:1")
        )),
        "{stderr}"
    );
    assert_eq!(snapshot(dir), before);
    // A file of that name that is not pinned: refused without --update.
    let loose = tempfile::tempdir().unwrap();
    std::fs::write(loose.path().join("hello.wasm"), b"mine").unwrap();
    let stderr = fails(
        &[
            "pull",
            &registry.oci("tools/greet:1"),
            "--name",
            "hello",
            "--plugins",
            text(loose.path()),
        ],
        &env,
    );
    assert!(
        stderr.contains("hello.wasm exists and is not pinned in"),
        "{stderr}"
    );
    assert_eq!(
        snapshot(loose.path()),
        [("hello.wasm".to_owned(), b"mine".to_vec())]
    );
}

/// `docker login`'s config.json with `user:password` for `registry`.
fn docker_config(registry: &str, user: &str, password: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let auth = base64(format!("{user}:{password}").as_bytes());
    std::fs::write(
        dir.path().join("config.json"),
        format!(r#"{{"auths":{{"{registry}":{{"auth":"{auth}"}}}}}}"#),
    )
    .unwrap();
    dir
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0_u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn credentials_from_flags_and_docker_config() {
    assert_eq!(base64(b"ada:s3cret"), "YWRhOnMzY3JldA==");
    let registry = Registry::with_auth();
    let (_docker, docker) = no_docker();
    let anonymous = [("DOCKER_CONFIG", docker.as_str())];
    let dist = dist(&["greet"]);
    let greet = text(&dist.path().join("greet.wasm")).to_owned();
    let reference = registry.oci("private/greet:1");

    let stderr = fails(&["push", &greet, &reference], &anonymous);
    assert!(
        stderr.contains("(401 Unauthorized)") && stderr.contains("docker login"),
        "{stderr}"
    );

    let with_flags = [
        "--registry-user",
        USER,
        "--registry-password-env",
        "TOOLHOST_TEST_REGISTRY_PASSWORD",
    ];
    let mut push = vec!["push", greet.as_str(), reference.as_str()];
    push.extend(with_flags);
    let env = [
        ("DOCKER_CONFIG", docker.as_str()),
        ("TOOLHOST_TEST_REGISTRY_PASSWORD", PASSWORD),
    ];
    let out = ok(&push, &env);
    assert!(!out.contains(PASSWORD));

    let plugins = tempfile::tempdir().unwrap();
    let stderr = fails(
        &["pull", &reference, "--plugins", text(plugins.path())],
        &anonymous,
    );
    assert!(stderr.contains("(401 Unauthorized)"), "{stderr}");
    assert!(std::fs::read_dir(plugins.path()).unwrap().next().is_none());

    // Wrong password: says to check it, and never prints it.
    let wrong = [
        ("DOCKER_CONFIG", docker.as_str()),
        ("TOOLHOST_TEST_REGISTRY_PASSWORD", "not-the-password"),
    ];
    let mut pull = vec![
        "pull",
        reference.as_str(),
        "--plugins",
        text(plugins.path()),
    ];
    pull.extend(with_flags);
    let stderr = fails(&pull, &wrong);
    assert!(
        stderr.contains("check the user name and password"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-password"), "{stderr}");
    // The variable unset: said so.
    let stderr = fails(&pull, &anonymous);
    assert!(
        stderr.contains(
            "--registry-password-env TOOLHOST_TEST_REGISTRY_PASSWORD: the variable is not set"
        ),
        "{stderr}"
    );

    // From ~/.docker/config.json (here $DOCKER_CONFIG), as docker login writes it.
    let config = docker_config(&registry.address, USER, PASSWORD);
    ok(
        &["pull", &reference, "--plugins", text(plugins.path())],
        &[("DOCKER_CONFIG", text(config.path()))],
    );
    assert_eq!(call_greet(plugins.path()), "\"Hello, Ada!\"\n");
}

#[test]
fn push_refuses_what_no_host_would_load() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    // Nothing listens there: these fail before any connection.
    let stderr = fails(&["push", text(&module), "oci://127.0.0.1:9/t/core:1"], &[]);
    assert!(
        stderr.contains("core.wasm: it is a core WebAssembly module, not a component"),
        "{stderr}"
    );
    let stderr = fails(&["push", text(&module), "oci://127.0.0.1:9/t/core"], &[]);
    assert!(stderr.contains("has no tag to publish under"), "{stderr}");
    let stderr = fails(
        &[
            "push",
            text(&dir.path().join("x.txt")),
            "oci://127.0.0.1:9/t/x:1",
        ],
        &[],
    );
    assert!(stderr.contains("is not a .wasm file"), "{stderr}");
    toolhost_tests::install(dir.path(), &["greet"]).unwrap();
    std::fs::write(
        dir.path().join("greet.toml"),
        "[grants]\nfiles = \"everything\"\nextra = 1\n",
    )
    .unwrap();
    let stderr = fails(
        &[
            "push",
            text(&dir.path().join("greet.wasm")),
            "oci://127.0.0.1:9/t/greet:1",
        ],
        &[],
    );
    assert!(
        stderr.contains("greet.toml: invalid plugin manifest"),
        "{stderr}"
    );
}

/// After a pull, the plugin's grants and the exact flags that allow them are printed
/// (not learned from a load error later): the same flags then load it.
#[test]
fn a_pull_says_what_the_plugin_asks_for_and_the_flags_that_allow_it() {
    let registry = Registry::start();
    let (_docker, docker) = no_docker();
    let cache = tempfile::tempdir().unwrap();
    let env = [
        ("DOCKER_CONFIG", docker.as_str()),
        ("XDG_CACHE_HOME", text(cache.path())),
    ];
    let dist = dist(&["greet"]);
    std::fs::write(
        dist.path().join("greet.toml"),
        r#"[grants]
files = "read"
http = ["api.example.com"]

[limits]
timeout_ms = 60000
memory_mib = 128

[config.API_KEY]
description = "The service's key"
secret = true

[config.REGION]
required = false
"#,
    )
    .unwrap();
    let reference = registry.oci("acme/greet:3");
    ok(
        &["push", text(&dist.path().join("greet.wasm")), &reference],
        &env,
    );
    let plugins = tempfile::tempdir().unwrap();
    let dir = text(plugins.path());
    let pulled = ok(&["pull", &reference, "--plugins", dir], &env);
    let asks = pulled
        .split_once("greet asks for:\n")
        .unwrap_or_else(|| panic!("no grants in:\n{pulled}"))
        .1;
    assert_eq!(
        asks,
        format!(
            "  file access: read (the host must allow it: --plugin-files read)
  http: api.example.com (the host must allow each: --plugin-http api.example.com)
  config (2):
    API_KEY (required, secret; not set; --plugin-config-env greet.API_KEY=ENV_VAR)  The service's key
    REGION (optional; not set; --plugin-config greet.REGION=VALUE)
  limits: 60s per call, 128 MiB memory, no fuel limit, 1 MiB output
  tools (1): greet
  to load it: host run --plugins {dir} --plugin-files read --plugin-http api.example.com --plugin-max-timeout 60s --plugin-max-memory 128MiB --plugin-config-env greet.API_KEY=ENV_VAR
"
        )
    );
    // Those flags load it (and without them it does not).
    let flags = "--plugin-files read --plugin-http api.example.com --plugin-max-timeout 60s --plugin-max-memory 128MiB --plugin-config-env greet.API_KEY=TOOLHOST_TEST_KEY";
    let mut args = vec!["tools", "--no-builtins", "--no-cache", "--plugins", dir];
    args.extend(flags.split(' '));
    let tools = ok(&args, &[("TOOLHOST_TEST_KEY", "k")]);
    assert!(tools.starts_with("greet"), "{tools}");
    let out = host(
        &["tools", "--no-builtins", "--no-cache", "--plugins", dir],
        &[],
    );
    let (stdout, stderr) = outputs(&out);
    assert!(!stdout.contains("greet"), "{stdout}");
    assert!(stderr.contains("greet.toml"), "{stderr}");

    // A plugin without a manifest asks for nothing.
    let plain = self::dist(&["greet"]);
    let reference = registry.oci("acme/plain:1");
    ok(
        &["push", text(&plain.path().join("greet.wasm")), &reference],
        &env,
    );
    let pulled = ok(&["pull", &reference, "--plugins", dir], &env);
    assert!(
        pulled.ends_with(&format!(
            "plain asks for:
  file access: none
  http: none
  config: none
  limits: 10s per call, 64 MiB memory, no fuel limit, 1 MiB output
  tools (1): greet
  to load it: no flags beyond the defaults (host run --plugins {dir})
"
        )),
        "{pulled}"
    );
}
