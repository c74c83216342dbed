//! File names this store makes and recognises: splitting a path into directory and
//! name, temporary file names (`.<name>.tmp-<hex>`), staging directory names
//! (`.stage-<hex>`) and the names it reserves.

use super::{TMP_MARK, TMP_RANDOM_LEN};
use crate::vfs::MAX_SEGMENT_LEN;

/// Splits `path` into its directory part (with the trailing `/`, or empty) and file name.
pub(super) fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => path.split_at(i + 1),
        None => ("", path),
    }
}

/// A fresh temporary name for a file called `name`: `.<name>.tmp-<32 hex digits>`, with
/// `name` shortened (at a character boundary) so the result fits in [`MAX_SEGMENT_LEN`].
pub(super) fn tmp_name(name: &str) -> String {
    let room = MAX_SEGMENT_LEN - 1 - TMP_MARK.len() - TMP_RANDOM_LEN;
    format!(
        ".{}{TMP_MARK}{}",
        &name[..name.floor_char_boundary(room)],
        uuid::Uuid::new_v4().simple()
    )
}

/// Whether `name` is reserved for the store itself: a temporary file ([`tmp_name`]) or a
/// staging directory ([`stage_name`]).
pub(super) fn is_reserved_name(name: &str) -> bool {
    is_tmp_name(name) || is_stage_name(name)
}

/// Whether `name` has the form [`tmp_name`] produces.
pub(super) fn is_tmp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(split) = rest.len().checked_sub(TMP_MARK.len() + TMP_RANDOM_LEN) else {
        return false;
    };
    // strip_prefix, not split_at: the mark's length may fall inside a character of a name
    // such as ".．．xxx…" (split_at panicked there; found by the path_scope fuzz target).
    let Some(random) = rest
        .get(split..)
        .and_then(|tail| tail.strip_prefix(TMP_MARK))
    else {
        return false;
    };
    random.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Marks a staging directory: `.stage-<32 hex digits>`.
pub(super) const STAGE_MARK: &str = ".stage-";

/// A fresh staging directory name: `.stage-<32 hex digits>`.
pub(super) fn stage_name() -> String {
    format!("{STAGE_MARK}{}", uuid::Uuid::new_v4().simple())
}

/// Whether `name` has the form [`stage_name`] produces.
pub(super) fn is_stage_name(name: &str) -> bool {
    name.strip_prefix(STAGE_MARK).is_some_and(|random| {
        random.len() == TMP_RANDOM_LEN && random.bytes().all(|b| b.is_ascii_hexdigit())
    })
}
