//! A reference model of the path rules (`toolhost::vfs::validate_path`) and of the
//! hidden-path and extension filters (`FilePolicy`), written independently of them (one
//! pass over the characters, flags instead of early returns) for the `path_scope` target.

use toolhost::vfs::PathErrorReason;

/// The model's verdict on `path`: `None` when valid, else the first broken rule in the
/// documented order (empty, too long, NUL, control character, backslash, absolute, drive
/// letter, trailing slash, then per segment: empty, `.`, `..`, too long).
pub fn model_reason(path: &str) -> Option<PathErrorReason> {
    let (mut nul, mut control, mut backslash) = (false, false, false);
    for c in path.chars() {
        nul |= c == '\u{0}';
        control |= c.is_control();
        backslash |= c == '\\';
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    let whole = [
        (path.is_empty(), PathErrorReason::Empty),
        (path.len() > 1024, PathErrorReason::TooLong),
        (nul, PathErrorReason::Nul),
        (control, PathErrorReason::Control),
        (backslash, PathErrorReason::Backslash),
        (bytes.first() == Some(&b'/'), PathErrorReason::Absolute),
        (drive, PathErrorReason::Drive),
        (bytes.last() == Some(&b'/'), PathErrorReason::TrailingSlash),
    ];
    if let Some((_, reason)) = whole.into_iter().find(|(broken, _)| *broken) {
        return Some(reason);
    }
    path.split('/').find_map(|segment| match segment {
        "" => Some(PathErrorReason::EmptySegment),
        "." => Some(PathErrorReason::DotSegment),
        ".." => Some(PathErrorReason::DotDot),
        s if s.len() > 255 => Some(PathErrorReason::SegmentTooLong),
        _ => None,
    })
}

/// Whether a segment of `path` starts with `.` or `_`.
pub fn model_hidden(path: &str) -> bool {
    path.split('/')
        .any(|s| matches!(s.as_bytes().first(), Some(b'.' | b'_')))
}

/// Whether the last segment of `path` has an extension in `allowed` (leading dot
/// optional, ASCII case ignored).
pub fn model_extension_allowed(allowed: &[String], path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    match name.rfind('.') {
        None => false,
        Some(dot) => {
            let extension = name[dot + 1..].to_ascii_lowercase();
            allowed
                .iter()
                .any(|want| want.trim_start_matches('.').to_ascii_lowercase() == extension)
        }
    }
}
