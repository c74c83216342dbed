//! `tools/list` pagination: pages of at most [`DEFAULT_PAGE_SIZE`](crate::limits::DEFAULT_PAGE_SIZE) tools, and the opaque
//! cursor that asks for the next one.
//!
//! A cursor says where the page it continues began and which tool came just before it.
//! It holds no server state, so any process serving the same tools (several hosts behind
//! a load balancer) reads any other's cursor. When the tools change between two pages,
//! the next page starts after the tool the cursor names, wherever it now is; a cursor
//! naming a tool that is gone is refused with `-32602` (the client lists again from the
//! start), as is anything this server did not hand out.
//!
//! Crate-private (the crate's API is the two servers); in outline (its unit tests run
//! the same):
//!
//! ```text
//! use toolhost_mcp::pagination::{page, Cursor};
//!
//! let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
//! let first = page(&names, None, 2).unwrap();
//! assert_eq!(first.range, 0..2);
//! let next = first.next.unwrap();
//! assert_eq!(page(&names, Some(&next), 2).unwrap().range, 2..3);
//! assert!(page(&names, Some(&Cursor::parse("nonsense")), 2).is_err());
//! ```

use std::ops::Range;

/// What a cursor starts with; a cursor of another version is refused.
const PREFIX: &str = "c1.";
/// What a `resources/list` cursor starts with: the same scheme, another kind, so a
/// cursor of one list is refused by the other.
const RESOURCE_PREFIX: &str = "r1.";
/// The longest tool name a `tools/list` cursor names.
const MAX_TOOL_NAME: usize = 128;

/// A cursor as a client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor(String);

impl Cursor {
    /// A cursor from the client's text (checked when used).
    pub(crate) fn parse(text: &str) -> Self {
        Self(text.to_owned())
    }

    /// The cursor's text, as sent to the client.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A cursor for the page starting at `start`, right after the tool `previous`.
    fn new(start: usize, previous: &str) -> Self {
        Self::of_kind(PREFIX, start, previous)
    }

    /// A `resources/list` cursor for the page after the file `previous`, the
    /// `listed`-th listed.
    pub(crate) fn for_resources(listed: usize, previous: &str) -> Self {
        Self::of_kind(RESOURCE_PREFIX, listed, previous)
    }

    fn of_kind(prefix: &str, start: usize, previous: &str) -> Self {
        let mut text = format!("{prefix}{start}.");
        for byte in previous.bytes() {
            text.push_str(&format!("{byte:02x}"));
        }
        Self(text)
    }

    /// Where the page starts and the tool before it, if this is a cursor of ours.
    fn read(&self) -> Option<(usize, String)> {
        self.read_kind(PREFIX, MAX_TOOL_NAME)
    }

    /// Where the page starts and the name before it (at most `max_name` bytes), if this
    /// is a cursor of ours of the kind `prefix`.
    fn read_kind(&self, prefix: &str, max_name: usize) -> Option<(usize, String)> {
        let rest = self.0.strip_prefix(prefix)?;
        let (start, name) = rest.split_once('.')?;
        if start.is_empty() || !start.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let start: usize = start.parse().ok()?;
        if name.is_empty() || name.len() % 2 != 0 || name.len() > 2 * max_name {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..name.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(name.get(at..at + 2)?, 16).ok())
            .collect();
        Some((start, String::from_utf8(bytes?).ok()?))
    }
}

/// One page: the tools it holds (a range of the list) and the cursor for the next page,
/// if there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Page {
    /// The indexes of the page's tools in the whole list.
    pub range: Range<usize>,
    /// The cursor of the next page; `None` on the last page.
    pub next: Option<Cursor>,
}

/// Why a cursor was refused: the message for the client's `-32602` error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CursorError {
    /// Not a cursor this server hands out.
    #[error("Invalid params: \"cursor\" is not a cursor this server gave; send the nextCursor of the last page as it came, or list from the start without a cursor")]
    Unknown,
    /// The tools changed and the tool the cursor continues after is gone.
    #[error("Invalid params: the tool list changed since this cursor was given (tool \"{0}\" is gone); list again from the start without a cursor")]
    Stale(String),
}

/// Where a `resources/list` cursor goes on: how many files were listed before, and the
/// path of the last (the next page starts after it in path order, so a file removed
/// since does not stop the listing).
///
/// # Errors
/// [`CursorError::Unknown`] for anything but a resource cursor this server gave (a
/// `tools/list` cursor included).
pub(crate) fn resume_after(cursor: &Cursor) -> Result<(usize, String), CursorError> {
    cursor
        .read_kind(RESOURCE_PREFIX, toolhost::vfs::MAX_PATH_LEN)
        .ok_or(CursorError::Unknown)
}

/// The page of `names` (the whole list, in order) that `cursor` asks for (the first page
/// without one), at most `size` tools long (at least 1).
///
/// # Errors
/// [`CursorError`] for a cursor this server did not give, or one continuing after a tool
/// that is no longer listed.
pub(crate) fn page(
    names: &[String],
    cursor: Option<&Cursor>,
    size: usize,
) -> Result<Page, CursorError> {
    let size = size.max(1);
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let (start, previous) = cursor.read().ok_or(CursorError::Unknown)?;
            if start > 0 && names.get(start - 1) == Some(&previous) {
                start
            } else {
                // The tools changed: go on after `previous`, wherever it is now.
                names
                    .iter()
                    .position(|name| *name == previous)
                    .map(|at| at + 1)
                    .ok_or(CursorError::Stale(previous))?
            }
        }
    };
    let end = start.saturating_add(size).min(names.len());
    let next = (end < names.len()).then(|| Cursor::new(end, &names[end - 1]));
    Ok(Page {
        range: start..end,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    #[test]
    fn pages_cover_the_list_once_in_order() {
        for (total, size) in [(0, 3), (1, 3), (3, 3), (7, 3), (250, 100), (5, 1)] {
            let list = names(total);
            let (mut seen, mut cursor, mut pages) = (Vec::new(), None, 0);
            loop {
                let page = page(&list, cursor.as_ref(), size).unwrap();
                assert!(page.range.len() <= size);
                seen.extend(list[page.range.clone()].iter().cloned());
                pages += 1;
                match page.next {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, list, "{total} tools, pages of {size}");
            assert_eq!(pages, total.div_ceil(size).max(1));
        }
    }

    #[test]
    fn a_changed_list_goes_on_after_the_named_tool() {
        let list = names(6);
        let first = page(&list, None, 2).unwrap();
        let cursor = first.next.unwrap();
        // t0 is removed: t1 is now first, and the next page starts after it.
        let changed: Vec<String> = list[1..].to_vec();
        assert_eq!(page(&changed, Some(&cursor), 2).unwrap().range, 1..3);
        // t1 itself is gone: refused, list again.
        let gone: Vec<String> = ["t0", "t2", "t3"].map(String::from).to_vec();
        assert_eq!(
            page(&gone, Some(&cursor), 2),
            Err(CursorError::Stale("t1".into()))
        );
    }

    #[test]
    fn foreign_cursors_are_refused() {
        let list = names(5);
        for text in [
            "",
            "abc",
            "c1.",
            "c1.2",
            "c1.2.",
            "c1.x.7430",
            "c1.2.743",
            "c1.2.zz",
            "c1.-1.7430",
            "c2.2.7431",
            "c1.99999999999999999999999.7431",
        ] {
            assert_eq!(
                page(&list, Some(&Cursor::parse(text)), 2),
                Err(CursorError::Unknown),
                "{text:?}"
            );
        }
        // A well-formed cursor naming a tool that was never listed is stale, not a crash.
        let made_up = Cursor::new(3, "nope");
        assert_eq!(
            page(&list, Some(&made_up), 2),
            Err(CursorError::Stale("nope".into()))
        );
        // A start past the end with a matching name cannot happen; one that claims it is
        // served from the named tool's real place.
        let lying = Cursor::new(400, "t1");
        assert_eq!(page(&list, Some(&lying), 2).unwrap().range, 2..4);
    }
}
