//! `path_scope`: arbitrary path strings through path validation, a scoped store, the disk
//! store and the hidden/extension filters.
//!
//! Invariants: `validate_path` agrees with the reference model in `toolhost_fuzz::paths`
//! (verdict and reason); a path is either refused or resolves inside the root: a scoped
//! store writes exactly `prefix/path` in the store it wraps and nothing else, the disk
//! store writes exactly `root/path` and nothing beside the root; under `--hide-hidden`
//! a hidden path is refused by the policy and by every file tool, and never shows in
//! `list_files`, `glob` or `grep` even when the store holds it.
#![no_main]

use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolhost::registry::ToolError;
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{
    scope, validate_path, MemoryStorage, OsStorage, PathErrorReason, Storage, StorageError,
};
use toolhost::vfs::{FilePolicy, PolicyError};
use toolhost_fuzz::paths::{model_extension_allowed, model_hidden, model_reason};
use toolhost_fuzz::{dispatch, file_registry};

#[derive(Debug)]
struct Input {
    path: String,
    prefix: String,
    extensions: Option<Vec<String>>,
}

fn piece(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    const PIECES: &[&str] = &[
        "a",
        "b.md",
        "/",
        "/",
        "/",
        ".",
        "..",
        "_",
        ".git",
        "\\",
        "C:",
        ":",
        "\u{0}",
        "\n",
        "\u{85}",
        "\u{200b}",
        "é",
        "%2e%2e",
        "~",
        " ",
        "\u{ff0e}\u{ff0e}",
        "a.MD",
        "x.txt",
    ];
    if u.ratio(1, 6)? {
        String::arbitrary(u)
    } else {
        Ok((*u.choose(PIECES)?).to_owned())
    }
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut path = String::new();
        for _ in 0..u.int_in_range(0..=8)? {
            path.push_str(&piece(u)?);
        }
        // Long paths and segments, at and around the limits, now and then.
        if u.ratio(1, 16)? {
            let n = u.int_in_range(250..=260)?;
            let segment = "s".repeat(n);
            for _ in 0..u.int_in_range(1..=5)? {
                path.push('/');
                path.push_str(&segment);
            }
        }
        let prefix = if u.arbitrary()? {
            "tenant".to_owned()
        } else {
            piece(u)?
        };
        let extensions = if u.arbitrary()? {
            Some(vec![(*u.choose(&[".md", "MD", "txt", "", "."])?).to_owned()])
        } else {
            None
        };
        Ok(Self {
            path,
            prefix,
            extensions,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let input = match toolhost_fuzz::text_mode(data) {
        // A seed: the path itself, under prefix `tenant`, every extension allowed.
        Some(text) => Input {
            path: text.to_owned(),
            prefix: "tenant".to_owned(),
            extensions: None,
        },
        None => match Input::arbitrary_take_rest(Unstructured::new(data)) {
            Ok(input) => input,
            Err(_) => return,
        },
    };
    let Input {
        path,
        prefix,
        extensions,
    } = input;
    let path = path.as_str();

    // 1. The rules agree with the model.
    let verdict = validate_path("path", path).err().map(|err| err.reason);
    assert_eq!(
        verdict,
        model_reason(path),
        "validate_path vs model on {path:?}"
    );
    let valid = verdict.is_none();

    // 2. A scoped store: refused, or exactly prefix/path in the wrapped store.
    let inner = Arc::new(MemoryStorage::new());
    match scope(Arc::clone(&inner) as Arc<dyn Storage>, &prefix) {
        Err(StorageError::InvalidPath(err)) => {
            assert_eq!(Some(err.reason), model_reason(&prefix), "prefix {prefix:?}")
        }
        Err(other) => panic!("scope({prefix:?}): unexpected error {other:?}"),
        Ok(scoped) => {
            assert_eq!(model_reason(&prefix), None, "scope accepted {prefix:?}");
            match scoped.write(path, b"x", "") {
                Ok(()) => {
                    assert!(valid, "scoped write accepted invalid {path:?}");
                    let stored: Vec<String> = inner
                        .list()
                        .expect("list")
                        .into_iter()
                        .map(|f| f.path)
                        .collect();
                    assert_eq!(stored, [format!("{prefix}/{path}")]);
                    let seen: Vec<String> = scoped
                        .list()
                        .expect("list")
                        .into_iter()
                        .map(|f| f.path)
                        .collect();
                    assert_eq!(seen, [path]);
                }
                Err(StorageError::InvalidPath(err)) => {
                    // The prefix counts towards the length limit (finding 2, docs/testing.md):
                    // a valid path may be too long once prefixed; the error names the
                    // caller's path, never the prefixed one.
                    let prefixed_too_long =
                        prefix.len() + 1 + path.len() > toolhost::vfs::MAX_PATH_LEN;
                    let expected = match verdict {
                        None if prefixed_too_long => Some(PathErrorReason::TooLong),
                        other => other,
                    };
                    assert_eq!(Some(err.reason), expected, "scoped write of {path:?}");
                    assert_eq!(err.path, path, "the error names the caller's path");
                    assert!(inner.list().expect("list").is_empty());
                }
                Err(other) => panic!("scoped write of {path:?}: {other:?}"),
            }
        }
    }

    // 3. The disk store: refused, or exactly root/path and nothing beside the root.
    let outer = tempfile::tempdir().expect("a temp dir");
    let root = outer.path().join("root");
    std::fs::create_dir(&root).expect("root");
    let disk = OsStorage::open(&root).expect("open");
    match disk.write(path, b"x", "") {
        Ok(()) => {
            assert!(valid, "disk write accepted invalid {path:?}");
            assert_eq!(
                std::fs::read(root.join(path)).expect("written under the root"),
                b"x"
            );
            let beside: Vec<_> = std::fs::read_dir(outer.path()).expect("outer").collect();
            assert_eq!(
                beside.len(),
                1,
                "only the root beside it after writing {path:?}"
            );
            let listed: Vec<String> = disk
                .list()
                .expect("list")
                .into_iter()
                .map(|f| f.path)
                .collect();
            assert_eq!(listed, [path]);
        }
        Err(StorageError::InvalidPath(err)) => {
            assert_eq!(Some(err.reason), verdict, "disk write of {path:?}")
        }
        // Valid by the rules, refused by the OS (a name too long for the file system).
        Err(StorageError::Io { .. }) => assert!(valid),
        Err(other) => panic!("disk write of {path:?}: {other:?}"),
    }

    // 4. The policy: hidden paths and extensions.
    let policy = FilePolicy::default()
        .with_hide_hidden_paths(true)
        .with_allowed_extensions(extensions.clone());
    let hidden = model_hidden(path);
    let extension_ok = extensions
        .as_deref()
        .is_none_or(|allowed| model_extension_allowed(allowed, path));
    match policy.check("path", path) {
        Ok(()) => assert!(valid && !hidden && extension_ok, "policy accepted {path:?}"),
        Err(PolicyError::InvalidPath(err)) => assert_eq!(Some(err.reason), verdict),
        Err(PolicyError::Hidden { .. }) => assert!(valid && hidden),
        Err(PolicyError::ExtensionNotAllowed { .. }) => assert!(valid && !hidden && !extension_ok),
        Err(other) => panic!("policy on {path:?}: {other:?}"),
    }
    assert_eq!(
        policy.visible(path),
        !hidden && extension_ok,
        "visible({path:?})"
    );

    // 5. The tools under --hide-hidden, over a store that holds the path anyway.
    if valid {
        let store = Arc::new(MemoryStorage::new());
        store
            .write(path, b"secret\n", "")
            .expect("a valid path is stored");
        let options = VfsToolOptions::builder(store as Arc<dyn Storage>)
            .hide_hidden_paths(true)
            .allowed_extensions(extensions)
            .build();
        let registry = file_registry(options);
        let arguments = serde_json::json!({ "path": path }).to_string();
        let read = dispatch(&registry, "read_file", &arguments);
        if hidden || !extension_ok {
            assert!(
                matches!(read, Err(ToolError::InvalidArguments { .. })),
                "read_file {path:?}: {read:?}"
            );
        } else {
            assert!(read.is_ok(), "read_file {path:?}: {read:?}");
        }
        for (tool, arguments) in [
            ("list_files", "{}"),
            ("glob", r#"{"pattern":"**"}"#),
            (
                "grep",
                r#"{"pattern":"secret","output_mode":"files_with_matches"}"#,
            ),
            ("search", r#"{"query":"secret"}"#),
        ] {
            let result =
                dispatch(&registry, tool, arguments).unwrap_or_else(|err| panic!("{tool}: {err}"));
            let text = result.content.to_string();
            let named = text.contains(&serde_json::to_string(path).expect("json"));
            if tool == "search" {
                // The query syntax is the store's own: only the hidden side is checked.
                assert!(
                    !named || (!hidden && extension_ok),
                    "search with {path:?}: {text}"
                );
                continue;
            }
            assert_eq!(
                named,
                !hidden && extension_ok,
                "{tool} with {path:?}: {text}"
            );
        }
    }
});
