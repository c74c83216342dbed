//! The path rules: [`validate_path`], its limits and its error, [`PathError`].

use super::shown::Shown;

/// The longest path accepted, in bytes.
///
/// 1024 is macOS's `PATH_MAX` and a quarter of Linux's (4096, which counts the root
/// directory the store lives in too), so the root plus any valid path stays openable on
/// Linux; no real project needs longer paths, and a short limit keeps listings and
/// error messages small.
pub const MAX_PATH_LEN: usize = 1024;

/// The longest segment (file or directory name) accepted, in bytes: `NAME_MAX` on Linux
/// and macOS and the limit of most file systems.
pub const MAX_SEGMENT_LEN: usize = 255;

/// Checks `path` against the one rule set for every path a caller gives a
/// [`Storage`](super::Storage); `argument` is the name of the argument that held it, and
/// the error names it so the caller (usually a model) can correct the call.
///
/// A valid path is relative to the store root, uses forward slashes, and names a file:
/// no leading `/`, no drive letter, no backslash, no `..`, `.` or empty segments, no
/// trailing `/`, no NUL or other control characters, at most [`MAX_PATH_LEN`] bytes and
/// [`MAX_SEGMENT_LEN`] bytes per segment. Nothing is normalised: a path that would need
/// fixing is refused, so the caller learns the rule and the stores never disagree about
/// which file a path means. Hidden paths and extensions are not path rules but policy:
/// see [`FilePolicy`](super::FilePolicy).
///
/// Rules are checked in a fixed order, and the first one broken is reported: empty, too
/// long, NUL, other control character, backslash, absolute, drive letter, trailing slash,
/// then per segment: empty, `.`, `..`, too long.
///
/// ```
/// use toolhost::vfs::{validate_path, PathErrorReason};
///
/// validate_path("path", "notes/2024/todo.md")?;
/// let err = validate_path("path", "notes/../../etc/passwd").unwrap_err();
/// assert_eq!(err.reason, PathErrorReason::DotDot);
/// assert_eq!(
///     err.to_string(),
///     "argument \"path\" contains a \"..\" segment in \"notes/../../etc/passwd\"; paths cannot leave the store, name the file from the store root instead"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// A [`PathError`] whose [`reason`](PathError::reason) says which rule was broken.
pub fn validate_path(argument: &str, path: &str) -> Result<(), PathError> {
    let fail = |reason| Err(PathError::new(argument, path, reason));
    if path.is_empty() {
        return fail(PathErrorReason::Empty);
    }
    if path.len() > MAX_PATH_LEN {
        return fail(PathErrorReason::TooLong);
    }
    if path.contains('\0') {
        return fail(PathErrorReason::Nul);
    }
    if path.chars().any(char::is_control) {
        return fail(PathErrorReason::Control);
    }
    if path.contains('\\') {
        return fail(PathErrorReason::Backslash);
    }
    if path.starts_with('/') {
        return fail(PathErrorReason::Absolute);
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return fail(PathErrorReason::Drive);
    }
    if path.ends_with('/') {
        return fail(PathErrorReason::TrailingSlash);
    }
    for segment in path.split('/') {
        match segment {
            "" => return fail(PathErrorReason::EmptySegment),
            "." => return fail(PathErrorReason::DotSegment),
            ".." => return fail(PathErrorReason::DotDot),
            s if s.len() > MAX_SEGMENT_LEN => return fail(PathErrorReason::SegmentTooLong),
            _ => {}
        }
    }
    Ok(())
}

/// A path argument that breaks the rules of [`validate_path`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument \"{argument}\" {}", self.describe())]
pub struct PathError {
    /// The name of the argument that held the path (e.g. `"path"`, `"destination"`).
    pub argument: String,
    /// The path as given (shown shortened and escaped in the message).
    pub path: String,
    /// Which rule it breaks.
    pub reason: PathErrorReason,
}

/// Which path rule a [`PathError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathErrorReason {
    /// The path is empty.
    Empty,
    /// The path is longer than [`MAX_PATH_LEN`] bytes.
    TooLong,
    /// A segment is longer than [`MAX_SEGMENT_LEN`] bytes.
    SegmentTooLong,
    /// The path holds a NUL byte.
    Nul,
    /// The path holds another control character (newline, tab, DEL, ...).
    Control,
    /// The path holds a backslash.
    Backslash,
    /// The path starts with `/`.
    Absolute,
    /// The path starts with a drive letter such as `C:`.
    Drive,
    /// The path ends with `/`.
    TrailingSlash,
    /// The path holds an empty segment (`a//b`).
    EmptySegment,
    /// The path holds a `.` segment.
    DotSegment,
    /// The path holds a `..` segment.
    DotDot,
}

impl PathError {
    /// Builds a [`PathError`].
    pub fn new(argument: &str, path: &str, reason: PathErrorReason) -> Self {
        PathError {
            argument: argument.to_owned(),
            path: path.to_owned(),
            reason,
        }
    }

    fn describe(&self) -> String {
        let p = Shown(&self.path);
        match self.reason {
            PathErrorReason::Empty => {
                "is empty; give a relative path such as \"notes/todo.md\"".to_owned()
            }
            PathErrorReason::TooLong => format!(
                "is {} bytes long, over the limit of {MAX_PATH_LEN} bytes; use a shorter path",
                self.path.len()
            ),
            PathErrorReason::SegmentTooLong => {
                let longest = self.path.split('/').map(str::len).max().unwrap_or(0);
                format!(
                    "has a name of {longest} bytes in \"{p}\", over the limit of {MAX_SEGMENT_LEN} bytes per name; use shorter names"
                )
            }
            PathErrorReason::Nul => {
                format!("contains a NUL byte (\"{p}\"); remove it")
            }
            PathErrorReason::Control => {
                format!("contains a control character (\"{p}\"); use printable characters only")
            }
            PathErrorReason::Backslash => format!(
                "contains a backslash (\"{p}\"); separate names with forward slashes, e.g. \"notes/todo.md\""
            ),
            PathErrorReason::Absolute => format!(
                "must be relative to the store root, got \"{p}\"; drop the leading \"/\", e.g. \"notes/todo.md\""
            ),
            PathErrorReason::Drive => format!(
                "must be relative to the store root, got the drive path \"{p}\"; drop the drive letter, e.g. \"notes/todo.md\""
            ),
            PathErrorReason::TrailingSlash => format!(
                "ends with \"/\" (\"{p}\"); name a file, not a directory"
            ),
            PathErrorReason::EmptySegment => format!(
                "contains an empty name (\"//\") in \"{p}\"; put exactly one \"/\" between names"
            ),
            PathErrorReason::DotSegment => format!(
                "contains a \".\" segment in \"{p}\"; drop the \"./\", paths are already relative to the store root"
            ),
            PathErrorReason::DotDot => format!(
                "contains a \"..\" segment in \"{p}\"; paths cannot leave the store, name the file from the store root instead"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(path: &str) -> PathErrorReason {
        let err = validate_path("path", path).expect_err(path);
        assert_eq!(err.argument, "path");
        assert_eq!(err.path, path);
        err.reason
    }

    #[test]
    fn accepts_ordinary_paths() {
        for p in [
            "a",
            "a.md",
            "notes/todo.md",
            ".hidden/x",
            "_drafts/a b.txt",
            "a/.b",
            "a/..b/c..",
            "...",
            "1:2",
            "ünïcode/文件.md",
            "~/x",
        ] {
            assert_eq!(validate_path("path", p), Ok(()), "{p}");
        }
    }

    #[test]
    fn limits_at_their_boundaries() {
        let seg = "s".repeat(MAX_SEGMENT_LEN);
        assert_eq!(validate_path("path", &seg), Ok(()));
        assert_eq!(reason(&format!("{seg}s")), PathErrorReason::SegmentTooLong);
        // Three 255-byte names, then two more, to exactly 1024 bytes.
        let exact = format!("{seg}/{seg}/{seg}/{}/{}", "p".repeat(250), "q".repeat(5));
        assert_eq!(exact.len(), MAX_PATH_LEN);
        assert_eq!(validate_path("path", &exact), Ok(()));
        assert_eq!(reason(&format!("{exact}p")), PathErrorReason::TooLong);
        assert_eq!(reason(&"a".repeat(10_000)), PathErrorReason::TooLong);
    }

    #[test]
    fn refuses_each_rule_with_its_reason() {
        let cases = [
            ("", PathErrorReason::Empty),
            ("a\0b", PathErrorReason::Nul),
            ("\0", PathErrorReason::Nul),
            ("a\nb", PathErrorReason::Control),
            ("a\tb", PathErrorReason::Control),
            ("a\u{7f}", PathErrorReason::Control),
            ("a\u{85}", PathErrorReason::Control),
            ("a\\b", PathErrorReason::Backslash),
            ("..\\x", PathErrorReason::Backslash),
            ("/etc/passwd", PathErrorReason::Absolute),
            ("/", PathErrorReason::Absolute),
            ("//server/share", PathErrorReason::Absolute),
            ("C:", PathErrorReason::Drive),
            ("C:/Windows", PathErrorReason::Drive),
            ("c:x", PathErrorReason::Drive),
            ("x:y.md", PathErrorReason::Drive),
            ("a/", PathErrorReason::TrailingSlash),
            ("a//b", PathErrorReason::EmptySegment),
            (".", PathErrorReason::DotSegment),
            ("./a", PathErrorReason::DotSegment),
            ("a/./b", PathErrorReason::DotSegment),
            ("..", PathErrorReason::DotDot),
            ("../x", PathErrorReason::DotDot),
            ("a/../../x", PathErrorReason::DotDot),
            ("a/..", PathErrorReason::DotDot),
        ];
        for (path, want) in cases {
            assert_eq!(reason(path), want, "{path:?}");
        }
    }

    #[test]
    fn nul_is_reported_before_other_rules() {
        assert_eq!(reason("/\0/.."), PathErrorReason::Nul);
    }

    #[test]
    fn error_messages_are_exact() {
        let msg = |path: &str| validate_path("path", path).unwrap_err().to_string();
        assert_eq!(
            msg("../x"),
            "argument \"path\" contains a \"..\" segment in \"../x\"; paths cannot leave the store, name the file from the store root instead"
        );
        assert_eq!(
            msg("a\0b"),
            "argument \"path\" contains a NUL byte (\"a\\u{0}b\"); remove it"
        );
        assert_eq!(
            msg("a\\b"),
            "argument \"path\" contains a backslash (\"a\\\\b\"); separate names with forward slashes, e.g. \"notes/todo.md\""
        );
        assert_eq!(
            msg("C:/x"),
            "argument \"path\" must be relative to the store root, got the drive path \"C:/x\"; drop the drive letter, e.g. \"notes/todo.md\""
        );
        assert_eq!(
            msg("a/"),
            "argument \"path\" ends with \"/\" (\"a/\"); name a file, not a directory"
        );
        assert_eq!(
            msg("a//b"),
            "argument \"path\" contains an empty name (\"//\") in \"a//b\"; put exactly one \"/\" between names"
        );
        assert_eq!(
            msg("./a"),
            "argument \"path\" contains a \".\" segment in \"./a\"; drop the \"./\", paths are already relative to the store root"
        );
        assert_eq!(
            msg(&"n".repeat(256)),
            format!("argument \"path\" has a name of 256 bytes in \"{}...(256 bytes in all)\", over the limit of 255 bytes per name; use shorter names", "n".repeat(120))
        );
        assert_eq!(
            validate_path("source", "a\nb").unwrap_err().to_string(),
            "argument \"source\" contains a control character (\"a\\nb\"); use printable characters only"
        );
    }

    #[test]
    fn path_error_names_the_argument() {
        let err = PathError::new("destination", "/etc/passwd", PathErrorReason::Absolute);
        assert_eq!(
            err.to_string(),
            "argument \"destination\" must be relative to the store root, got \"/etc/passwd\"; drop the leading \"/\", e.g. \"notes/todo.md\""
        );
        let err = PathError::new("path", &"a".repeat(2000), PathErrorReason::TooLong);
        assert_eq!(
            err.to_string(),
            "argument \"path\" is 2000 bytes long, over the limit of 1024 bytes; use a shorter path"
        );
    }
}
