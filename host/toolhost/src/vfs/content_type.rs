//! Content types from file extensions.
//!
//! ```
//! use toolhost::vfs::content_type_for;
//!
//! assert_eq!(content_type_for("src/main.RS"), "text/x-rust");
//! assert_eq!(content_type_for("notes/todo"), "text/markdown");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The MIME type for `path`, from its extension (case-insensitive).
///
/// The extension is everything after the last `.` of the last segment, as Go's `path.Ext`
/// takes it (so `.json` alone counts as a JSON file). A path with no extension or an
/// unknown one is `text/markdown`: the file tools' default document type, as the spec says.
pub fn content_type_for(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some((_, ext)) = name.rsplit_once('.') else {
        return DEFAULT;
    };
    let ext = ext.to_ascii_lowercase();
    TYPES
        .iter()
        .find(|(exts, _)| exts.contains(&ext.as_str()))
        .map_or(DEFAULT, |(_, ty)| ty)
}

/// The type of a file whose extension says nothing.
const DEFAULT: &str = "text/markdown";

/// Extensions (lowercase, without the dot) and their types. Registered IANA types where
/// there are any, the common `text/x-*` names for source code otherwise (so clients treat
/// them as text).
const TYPES: &[(&[&str], &str)] = &[
    (&["md", "markdown"], "text/markdown"),
    (&["txt", "text", "log"], "text/plain"),
    (&["json"], "application/json"),
    (&["jsonl", "ndjson"], "application/x-ndjson"),
    (&["html", "htm"], "text/html"),
    (&["css"], "text/css"),
    (&["js", "mjs", "cjs", "jsx"], "text/javascript"),
    (&["ts", "mts", "cts", "tsx"], "text/x-typescript"),
    (&["rs"], "text/x-rust"),
    (&["go"], "text/x-go"),
    (&["py"], "text/x-python"),
    (&["rb"], "text/x-ruby"),
    (&["java"], "text/x-java"),
    (&["c", "h"], "text/x-c"),
    (&["cc", "cpp", "cxx", "hpp", "hh"], "text/x-c++"),
    (&["sh", "bash"], "text/x-shellscript"),
    (&["sql"], "application/sql"),
    (&["toml"], "application/toml"),
    (&["yaml", "yml"], "application/yaml"),
    (&["csv"], "text/csv"),
    (&["tsv"], "text/tab-separated-values"),
    (&["xml"], "application/xml"),
    (&["svg"], "image/svg+xml"),
    (&["png"], "image/png"),
    (&["jpg", "jpeg"], "image/jpeg"),
    (&["gif"], "image/gif"),
    (&["webp"], "image/webp"),
    (&["ico"], "image/vnd.microsoft.icon"),
    (&["pdf"], "application/pdf"),
    (&["wasm"], "application/wasm"),
    (&["wit"], "text/plain"),
    (&["zip"], "application/zip"),
    (&["gz"], "application/gzip"),
    (&["tar"], "application/x-tar"),
    (&["mp3"], "audio/mpeg"),
    (&["wav"], "audio/wav"),
    (&["mp4"], "video/mp4"),
    (&["woff"], "font/woff"),
    (&["woff2"], "font/woff2"),
    (&["ttf"], "font/ttf"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_extensions() {
        let cases = [
            ("a.md", "text/markdown"),
            ("a.txt", "text/plain"),
            ("a.json", "application/json"),
            ("a.html", "text/html"),
            ("a.css", "text/css"),
            ("a.js", "text/javascript"),
            ("a.ts", "text/x-typescript"),
            ("a.rs", "text/x-rust"),
            ("a.go", "text/x-go"),
            ("a.py", "text/x-python"),
            ("a.toml", "application/toml"),
            ("a.yaml", "application/yaml"),
            ("a.yml", "application/yaml"),
            ("a.csv", "text/csv"),
            ("a.xml", "application/xml"),
            ("a.svg", "image/svg+xml"),
            ("a.png", "image/png"),
            ("a.jpg", "image/jpeg"),
            ("a.jpeg", "image/jpeg"),
            ("a.gif", "image/gif"),
            ("a.pdf", "application/pdf"),
            ("a.wasm", "application/wasm"),
            ("dir.d/archive.tar.gz", "application/gzip"),
            (".json", "application/json"),
        ];
        for (path, want) in cases {
            assert_eq!(content_type_for(path), want, "{path}");
        }
    }

    #[test]
    fn case_insensitive() {
        assert_eq!(content_type_for("README.MD"), "text/markdown");
        assert_eq!(content_type_for("Photo.JpEg"), "image/jpeg");
        assert_eq!(content_type_for("data.Json"), "application/json");
    }

    #[test]
    fn unknown_or_missing_extension_is_markdown() {
        for path in [
            "README",
            "a.unknownext",
            "dir.json/file",
            "a.",
            "Makefile",
            "",
        ] {
            assert_eq!(content_type_for(path), "text/markdown", "{path}");
        }
    }
}
