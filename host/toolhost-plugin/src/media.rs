//! The media types the host passes on from a plugin, in a result's image and audio
//! blocks and in a sampling request's messages: anything else (`text/html`,
//! `image/svg+xml`, which a client might render as active content) is refused.

/// The image MIME types a plugin's media may have.
pub(crate) const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The audio MIME types a plugin's media may have (the first five are the canonical
/// ones; the rest common aliases of them).
pub(crate) const AUDIO_TYPES: &[&str] = &[
    "audio/wav",
    "audio/mpeg",
    "audio/ogg",
    "audio/webm",
    "audio/flac",
    "audio/x-wav",
    "audio/wave",
    "audio/mp3",
    "audio/x-flac",
];
/// How many of [`AUDIO_TYPES`] are named in error messages.
pub(crate) const AUDIO_CANONICAL: usize = 5;

/// `mime_type` without parameters and case (`Image/PNG; q=1` is `image/png`).
pub(crate) fn essence(mime_type: &str) -> String {
    mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}
