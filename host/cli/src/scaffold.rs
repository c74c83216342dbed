//! `host new NAME [--lang rust|python|js]`: a plugin project outside this repository that
//! builds with one command (`./build`, which puts `dist/NAME.wasm` and its manifest
//! `dist/NAME.toml` where `host run --plugins dist` loads them), with a test runnable
//! without the host (`cargo test`, `python3 -m unittest`, `node --test`) and a README.
//!
//! Each language is a list of template files ([`templates`]); a template's text has
//! `{{name}}` (the plugin, tool and manifest name), `{{sdk}}` (Rust: the SDK's path) and
//! `{{toolchain}}` (Python, JavaScript: the checkout's `scripts/pyjs-toolchain`, which
//! installs componentize-py or ComponentizeJS once into the same user cache as
//! `scripts/build-pyjs-plugins`) filled in. A Python or JavaScript project carries a copy
//! of the WIT it targets, `toolhost:plugin@0.3.0` (`wit/plugin.wit`), as `wit/plugin.wit`:
//! ComponentizeJS reads WIT only inside the folder it runs in. Every project has two
//! tools: `NAME` returns a text and a PNG image (a rich result), `NAME_confirmed` asks the
//! user to confirm first (the `interaction` import; the manifest says `[grants] ask =
//! true`). Their modules have fixed names (`app.py`/`tool.py`,
//! `plugin.js`/`tool.js`), so no plugin name can shadow a module or be a keyword there;
//! only `NAME.toml` and `dist/NAME.wasm` carry the name. The examples they follow are
//! `plugins/python/textstats` and `plugins/javascript/greeting`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::args::{Lang, NewArgs};

/// The SDK of the checkout this binary was built from (`sdk/`), the default for `--sdk`.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk");

/// The checkout's toolchain installer for Python and JavaScript projects.
const BUILT_FROM_TOOLCHAIN: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pyjs-toolchain");

/// The WIT Python and JavaScript projects target (0.3.0), copied into them as
/// `wit/plugin.wit`.
const PLUGIN_WIT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/plugin.wit"));

/// Creates the project `args.dir/NAME` (or `./NAME`) and returns its path.
///
/// # Errors
/// When `--sdk` is given for Python or JavaScript, the directory already exists (nothing
/// is overwritten), the SDK (Rust) or `scripts/pyjs-toolchain` (Python, JavaScript) cannot
/// be found, or a file cannot be written (what was created is removed).
pub(crate) fn create(args: &NewArgs) -> anyhow::Result<PathBuf> {
    if let Err(problem) = check_flags(args) {
        bail!("{problem}");
    }
    let fill = match args.lang {
        Lang::Rust => vec![("{{sdk}}", toml_string(&sdk_dir(args.sdk.as_deref())?))],
        Lang::Python | Lang::Js => vec![("{{toolchain}}", shell_quoted(&toolchain()?))],
    };
    let parent = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let project = parent.join(&args.name);
    if std::fs::symlink_metadata(&project).is_ok() {
        bail!(
            "{} already exists; nothing was written. Choose another name, or another folder with --dir",
            project.display()
        );
    }
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create the folder {}", parent.display()))?;
    std::fs::create_dir(&project)
        .with_context(|| format!("cannot create the project folder {}", project.display()))?;
    let written = write_all(&project, &templates(args.lang), &args.name, &fill);
    if let Err(err) = written {
        // Leave nothing half made.
        let _ = std::fs::remove_dir_all(&project);
        return Err(err);
    }
    Ok(project)
}

/// Flags that do not go together, as a bad command line (exit 2).
///
/// # Errors
/// `--sdk` with another language than Rust.
pub(crate) fn check_flags(args: &NewArgs) -> Result<(), String> {
    if args.sdk.is_some() && args.lang != Lang::Rust {
        return Err(format!(
            "--sdk is for --lang rust; a {} project does not use the Rust SDK (leave --sdk out)",
            language_name(args.lang)
        ));
    }
    Ok(())
}

fn language_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "Rust",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
    }
}

/// The checkout's `scripts/pyjs-toolchain`, absolute, which the project's `./build` runs.
fn toolchain() -> anyhow::Result<PathBuf> {
    let script = Path::new(BUILT_FROM_TOOLCHAIN);
    if !script.is_file() {
        bail!(
            "this host was built away from its source tree, so scripts/pyjs-toolchain (which installs the Python and JavaScript plugin toolchains) is not at {}; use a host built from a wasm-toolhost checkout",
            script.display()
        );
    }
    std::fs::canonicalize(script).with_context(|| format!("cannot resolve {}", script.display()))
}

/// A path as TOML basic-string content: backslashes and quotes escaped.
fn toml_string(path: &Path) -> String {
    path.to_string_lossy()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

/// A path as one single-quoted shell word: nothing in it is expanded.
fn shell_quoted(path: &Path) -> String {
    format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"))
}

/// The SDK folder the project depends on: `--sdk`, or the checkout this host was built
/// from; absolute, and holding the `toolhost-sdk` crate.
fn sdk_dir(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let (dir, flag) = match given {
        Some(dir) => (dir.to_owned(), true),
        None => (PathBuf::from(BUILT_FROM_SDK), false),
    };
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"toolhost-sdk\"") {
        if flag {
            bail!(
                "--sdk {} is not the toolhost-sdk crate (no Cargo.toml naming toolhost-sdk there); pass the sdk/ folder of a wasm-toolhost checkout",
                dir.display()
            );
        }
        bail!(
            "this host was built away from its source tree, so the plugin SDK is not at {}; pass --sdk PATH, the sdk/ folder of a wasm-toolhost checkout",
            dir.display()
        );
    }
    std::fs::canonicalize(&dir).with_context(|| format!("cannot resolve --sdk {}", dir.display()))
}

/// One file of a template: its path in the project, its text, and whether it is a script.
struct Template {
    path: &'static str,
    text: &'static str,
    executable: bool,
}

fn write_all(
    project: &Path,
    files: &[Template],
    name: &str,
    fill: &[(&str, String)],
) -> anyhow::Result<()> {
    for file in files {
        let path = project.join(file.path.replace("{{name}}", name));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = fill
            .iter()
            .fold(file.text.replace("{{name}}", name), |text, (key, value)| {
                text.replace(key, value)
            });
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        out.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        if file.executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(())
}

/// A file of every language's project.
const MANIFEST: Template = Template {
    path: "{{name}}.toml",
    text: include_str!("scaffold/manifest.toml.in"),
    executable: false,
};

/// The files of a project in `lang`.
fn templates(lang: Lang) -> Vec<Template> {
    let file = |path, text| Template {
        path,
        text,
        executable: false,
    };
    let build = |text| Template {
        path: "build",
        text,
        executable: true,
    };
    match lang {
        Lang::Rust => vec![
            file("Cargo.toml", include_str!("scaffold/rust/Cargo.toml.in")),
            file("src/lib.rs", include_str!("scaffold/rust/lib.rs.in")),
            MANIFEST,
            build(include_str!("scaffold/rust/build.in")),
            file("README.md", include_str!("scaffold/rust/README.md.in")),
            file(".gitignore", "/target\n/dist\n"),
        ],
        Lang::Python => vec![
            file("app.py", include_str!("scaffold/python/app.py.in")),
            file("tool.py", include_str!("scaffold/python/tool.py.in")),
            file(
                "test_tool.py",
                include_str!("scaffold/python/test_tool.py.in"),
            ),
            MANIFEST,
            file("wit/plugin.wit", PLUGIN_WIT),
            build(include_str!("scaffold/python/build.in")),
            file("README.md", include_str!("scaffold/python/README.md.in")),
            file(".gitignore", "/dist\n__pycache__/\n"),
        ],
        Lang::Js => vec![
            file(
                "plugin.js",
                include_str!("scaffold/javascript/plugin.js.in"),
            ),
            file("tool.js", include_str!("scaffold/javascript/tool.js.in")),
            file(
                "tool.test.js",
                include_str!("scaffold/javascript/tool.test.js.in"),
            ),
            file(
                "package.json",
                include_str!("scaffold/javascript/package.json.in"),
            ),
            MANIFEST,
            file("wit/plugin.wit", PLUGIN_WIT),
            build(include_str!("scaffold/javascript/build.in")),
            file(
                "README.md",
                include_str!("scaffold/javascript/README.md.in"),
            ),
            file(".gitignore", "/dist\n/node_modules\n"),
        ],
    }
}

/// What `host new` prints when the project is made: where it is and the next commands.
pub(crate) fn next_steps(project: &Path, name: &str, lang: Lang) -> String {
    let (test, build_time) = match lang {
        Lang::Rust => ("cargo test        # the tool's unit tests, natively", ""),
        Lang::Python => (
            "python3 -m unittest   # the tool's tests, natively",
            " (componentize-py: ~40 s; installed once)",
        ),
        Lang::Js => (
            "node --test       # the tool's tests, natively",
            " (ComponentizeJS: ~40 s; installed once)",
        ),
    };
    format!(
        "created {dir}: a {language} plugin with two tools, `{name}` (a text and an image) and `{name}_confirmed` (asks the user first)\n\
         \n\
         next:\n  \
           cd {dir}\n  \
           {test}\n  \
           ./build           # dist/{name}.wasm and dist/{name}.toml{build_time}\n  \
           host call --plugins dist {name} '{{\"text\":\"hello plugin world\"}}'\n  \
           host run --plugins dist     # serve it to an MCP client\n\
         \n\
         README.md says how to add tools, return images, ask the user, offer resources and\n\
         prompts, ask for file access and set limits.\n",
        dir = project.display(),
        language = language_name(lang),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_args(name: &str, dir: &Path, sdk: Option<&Path>) -> NewArgs {
        lang_args(Lang::Rust, name, dir, sdk)
    }

    fn lang_args(lang: Lang, name: &str, dir: &Path, sdk: Option<&Path>) -> NewArgs {
        NewArgs {
            name: name.to_owned(),
            lang,
            dir: Some(dir.to_owned()),
            sdk: sdk.map(Path::to_owned),
        }
    }

    #[test]
    fn creates_the_project_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let project = create(&new_args("word_tools", dir.path(), None)).unwrap();
        assert_eq!(project, dir.path().join("word_tools"));
        let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        let sdk = std::fs::canonicalize(BUILT_FROM_SDK).unwrap();
        assert!(
            cargo.contains(&format!(
                "toolhost-sdk = {{ path = \"{}\" }}",
                sdk.display()
            )),
            "{cargo}"
        );
        assert!(cargo.contains("name = \"word_tools\""), "{cargo}");
        assert!(cargo.contains(r#"serde = { version = "1", features = ["derive"] }"#));
        for file in [
            "src/lib.rs",
            "word_tools.toml",
            "build",
            "README.md",
            ".gitignore",
        ] {
            let text = std::fs::read_to_string(project.join(file)).unwrap();
            assert!(!text.contains("{{"), "{file} has an unfilled placeholder");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(project.join("build"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111);
        }
        // Again: refused, and the first project is untouched.
        std::fs::write(project.join("src/lib.rs"), "// mine").unwrap();
        let err = create(&new_args("word_tools", dir.path(), None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} already exists; nothing was written. Choose another name, or another folder with --dir",
                project.display()
            )
        );
        assert_eq!(
            std::fs::read_to_string(project.join("src/lib.rs")).unwrap(),
            "// mine"
        );
    }

    #[test]
    fn a_wrong_sdk_is_refused_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let err = create(&new_args("x", dir.path(), Some(dir.path()))).unwrap_err();
        assert!(
            err.to_string().ends_with("is not the toolhost-sdk crate (no Cargo.toml naming toolhost-sdk there); pass the sdk/ folder of a wasm-toolhost checkout"),
            "{err}"
        );
        assert!(!dir.path().join("x").exists());
    }

    #[test]
    fn python_and_js_projects_carry_the_wit_and_the_toolchain_and_never_overwrite() {
        let toolchain = std::fs::canonicalize(BUILT_FROM_TOOLCHAIN).unwrap();
        for (lang, files) in [
            (
                Lang::Python,
                &[
                    "app.py",
                    "tool.py",
                    "test_tool.py",
                    "README.md",
                    ".gitignore",
                ][..],
            ),
            (
                Lang::Js,
                &[
                    "plugin.js",
                    "tool.js",
                    "tool.test.js",
                    "package.json",
                    "README.md",
                    ".gitignore",
                ],
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let project = create(&lang_args(lang, "word_tools", dir.path(), None)).unwrap();
            for file in files.iter().chain(&["word_tools.toml", "build"]) {
                let text = std::fs::read_to_string(project.join(file)).unwrap();
                assert!(!text.contains("{{"), "{file} has an unfilled placeholder");
            }
            assert_eq!(
                std::fs::read_to_string(project.join("wit/plugin.wit")).unwrap(),
                PLUGIN_WIT
            );
            assert!(PLUGIN_WIT.contains("package toolhost:plugin@0.3.0;"));
            let build = std::fs::read_to_string(project.join("build")).unwrap();
            assert!(
                build.contains(&format!("default_toolchain='{}'\n", toolchain.display())),
                "{build}"
            );
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(project.join("build"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o111, 0o111);
            }
            // Again: refused, and the first project is untouched.
            std::fs::write(project.join(files[0]), "mine").unwrap();
            let err = create(&lang_args(lang, "word_tools", dir.path(), None)).unwrap_err();
            assert!(err.to_string().ends_with("already exists; nothing was written. Choose another name, or another folder with --dir"), "{err}");
            assert_eq!(
                std::fs::read_to_string(project.join(files[0])).unwrap(),
                "mine"
            );
            // --sdk is Rust's: refused before anything is made.
            let other = tempfile::tempdir().unwrap();
            let err = create(&lang_args(lang, "x", other.path(), Some(other.path()))).unwrap_err();
            assert!(
                err.to_string().starts_with("--sdk is for --lang rust; a "),
                "{err}"
            );
            assert!(!other.path().join("x").exists());
        }
    }

    #[test]
    fn paths_are_quoted_for_toml_and_the_shell() {
        assert_eq!(toml_string(Path::new(r#"/a "b"\c"#)), r#"/a \"b\"\\c"#);
        let path = Path::new("/it's $HOME/`x` \"y\"");
        let quoted = shell_quoted(path);
        assert_eq!(quoted, r#"'/it'\''s $HOME/`x` "y"'"#);
        // The shell reads it back as the very path, expanding nothing.
        let echoed = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {quoted}"))
            .output()
            .unwrap();
        assert_eq!(echoed.stdout, path.to_string_lossy().as_bytes());
    }
}
