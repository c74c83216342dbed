//! The resources of the registry's catalog ([`toolhost::catalog::ResourceSource`]s)
//! beside the files under the root.
//!
//! - `resources/list` is one paginated sequence: the files first (their own cursors),
//!   then each source's pages, by owner in registration order. A cursor into a source
//!   is the server's own (`s1.`, naming the source's namespace, the source's cursor and
//!   how many of that page were sent already), so a source's page of any length is
//!   sent in pages of the server's page size, and never more than
//!   [`MAX_CATALOG_RESULT_BYTES`] at once; a cursor naming a source that is gone, or one
//!   the server did not give, is refused (`-32602`). Entries a source lists outside its
//!   namespace are left out (and logged): a client sees no URI a source does not own.
//! - `resources/templates/list` gives [`FILE_TEMPLATE`](super::FILE_TEMPLATE) (with a
//!   root) and every source's templates.
//! - `resources/read` of a URI under a source's namespace goes to that source; every
//!   content it returns must be under that namespace and all together at most
//!   [`MAX_CATALOG_RESULT_BYTES`], else the read is refused (`-32603`). Its `NotFound`
//!   is `-32002` with the `uri`, `Invalid` `-32602`, `Failed` `-32603`.
//!
//! Every source call runs under the registry's call timeout and stops when the client
//! cancels the request.

use serde_json::{json, Value};

use toolhost::catalog::{ResourceContents, ResourceEntry, ResourceError, ResourceTemplate};

use crate::content::resource_contents_json;
use crate::jsonrpc::{RequestId, RpcError, INVALID_PARAMS};
use crate::limits::{MAX_CATALOG_RESULT_BYTES, MAX_SOURCE_CURSOR_BYTES};
use crate::pagination::CursorError;

use super::{shown, RESOURCE_NOT_FOUND};

/// What a cursor into a source's resources starts with.
const SOURCE_PREFIX: &str = "s1.";
/// JSON-RPC's internal error: a source's failure or misbehaviour.
pub(crate) const INTERNAL_ERROR: i64 = -32603;

/// Where a `resources/list` page starts among the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourcePosition {
    /// The source's namespace.
    pub(crate) namespace: String,
    /// The source's own cursor (`None`: its first page).
    pub(crate) cursor: Option<String>,
    /// How many entries of that page were sent already.
    pub(crate) skip: usize,
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str, max: usize) -> Option<String> {
    if !text.len().is_multiple_of(2) || text.len() > 2 * max {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl SourcePosition {
    /// The first page of the source at `namespace`.
    pub(crate) fn start(namespace: String) -> Self {
        Self {
            namespace,
            cursor: None,
            skip: 0,
        }
    }

    /// The cursor the client is given.
    pub(crate) fn encode(&self) -> String {
        let cursor = self.cursor.as_deref().map_or_else(|| "-".to_owned(), hex);
        format!(
            "{SOURCE_PREFIX}{}.{}.{cursor}",
            hex(&self.namespace),
            self.skip
        )
    }

    /// The position a client's cursor names, if it is a source cursor this server gave;
    /// `Ok(None)` when it is not a source cursor at all (a files cursor, say).
    pub(crate) fn decode(text: &str) -> Result<Option<Self>, CursorError> {
        let Some(rest) = text.strip_prefix(SOURCE_PREFIX) else {
            return Ok(None);
        };
        let mut parts = rest.splitn(3, '.');
        let (Some(namespace), Some(skip), Some(cursor)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(CursorError::Unknown);
        };
        let namespace = unhex(namespace, 256)
            .filter(|n| !n.is_empty())
            .ok_or(CursorError::Unknown)?;
        if skip.is_empty() || !skip.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CursorError::Unknown);
        }
        let skip = skip.parse().map_err(|_| CursorError::Unknown)?;
        let cursor = match cursor {
            "-" => None,
            other => Some(unhex(other, MAX_SOURCE_CURSOR_BYTES).ok_or(CursorError::Unknown)?),
        };
        Ok(Some(Self {
            namespace,
            cursor,
            skip,
        }))
    }
}

/// A source's entry as `resources/list` gives it.
fn entry_json(entry: &ResourceEntry) -> Value {
    let mut out = json!({ "uri": entry.uri, "name": entry.name });
    if let Some(title) = &entry.title {
        out["title"] = json!(title);
    }
    if let Some(description) = &entry.description {
        out["description"] = json!(description);
    }
    if let Some(mime_type) = &entry.mime_type {
        out["mimeType"] = json!(mime_type);
    }
    if let Some(size) = entry.size {
        out["size"] = json!(size);
    }
    out
}

fn entry_bytes(entry: &ResourceEntry) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    entry.uri.len()
        + entry.name.len()
        + opt(&entry.title)
        + opt(&entry.description)
        + opt(&entry.mime_type)
}

/// A page of one source, cut to what one answer holds.
#[derive(Debug)]
pub(crate) struct SourcePage {
    /// The entries to send.
    pub(crate) resources: Vec<Value>,
    /// Where the rest of this source's page starts, if some of it was cut.
    pub(crate) rest: Option<SourcePosition>,
    /// Entries left out for being outside the namespace.
    pub(crate) outside: usize,
}

/// The part of `entries` (a source's page at `position`) to send: from `position.skip`,
/// at most `page_size` entries and [`MAX_CATALOG_RESULT_BYTES`], none outside the
/// namespace.
pub(crate) fn cut_page(
    position: &SourcePosition,
    entries: &[ResourceEntry],
    page_size: usize,
) -> SourcePage {
    let mut resources = Vec::new();
    let (mut bytes, mut consumed, mut outside) = (0usize, 0usize, 0usize);
    for entry in entries.iter().skip(position.skip) {
        if resources.len() == page_size.max(1) {
            break;
        }
        let size = entry_bytes(entry);
        if !resources.is_empty() && bytes.saturating_add(size) > MAX_CATALOG_RESULT_BYTES {
            break;
        }
        consumed += 1;
        if !entry.uri.starts_with(&position.namespace) || size > MAX_CATALOG_RESULT_BYTES {
            outside += 1;
            continue;
        }
        bytes += size;
        resources.push(entry_json(entry));
    }
    let next_skip = position.skip.saturating_add(consumed);
    let rest = (next_skip < entries.len()).then(|| SourcePosition {
        skip: next_skip,
        ..position.clone()
    });
    SourcePage {
        resources,
        rest,
        outside,
    }
}

/// A template as `resources/templates/list` gives it.
pub(crate) fn template_json(template: &ResourceTemplate) -> Value {
    let mut out = json!({ "uriTemplate": template.uri_template, "name": template.name });
    if let Some(title) = &template.title {
        out["title"] = json!(title);
    }
    if let Some(description) = &template.description {
        out["description"] = json!(description);
    }
    if let Some(mime_type) = &template.mime_type {
        out["mimeType"] = json!(mime_type);
    }
    out
}

/// A source's read as `resources/read` gives it, or the error when it returned content
/// outside `namespace` or over [`MAX_CATALOG_RESULT_BYTES`].
pub(crate) fn read_result(
    id: &RequestId,
    uri: &str,
    namespace: &str,
    contents: &[ResourceContents],
) -> Result<Value, RpcError> {
    if let Some(stray) = contents.iter().find(|c| !c.uri.starts_with(namespace)) {
        return Err(RpcError::new(
            id.clone(),
            INTERNAL_ERROR,
            format!(
                "Internal error: the source of \"{}\" returned content for \"{}\", outside its namespace {namespace}; nothing of it is sent",
                shown(uri),
                shown(&stray.uri)
            ),
        ));
    }
    let size = contents
        .iter()
        .map(|c| c.uri.len() + c.body.len() + c.mime_type.as_ref().map_or(0, String::len))
        .fold(0usize, usize::saturating_add);
    if size > MAX_CATALOG_RESULT_BYTES {
        return Err(RpcError::new(
            id.clone(),
            INTERNAL_ERROR,
            format!(
                "Internal error: \"{}\" is {size} bytes, over the {MAX_CATALOG_RESULT_BYTES}-byte cap for a resource of a plugin; nothing of it is sent",
                shown(uri)
            ),
        ));
    }
    let contents: Vec<Value> = contents
        .iter()
        .map(|c| resource_contents_json(&c.uri, c.mime_type.as_deref(), &c.body))
        .collect();
    Ok(json!({ "contents": contents }))
}

/// A source's error as the client gets it.
pub(crate) fn source_error(id: &RequestId, uri: Option<&str>, err: ResourceError) -> RpcError {
    match err {
        ResourceError::NotFound(message) => {
            let mut error = RpcError::new(
                id.clone(),
                RESOURCE_NOT_FOUND,
                format!("Resource not found: {message}"),
            );
            if let Some(uri) = uri {
                error = error.with_data(json!({ "uri": uri }));
            }
            error
        }
        ResourceError::Invalid(message) => RpcError::new(
            id.clone(),
            INVALID_PARAMS,
            format!("Invalid params: {message}"),
        ),
        ResourceError::Failed(message) => RpcError::new(
            id.clone(),
            INTERNAL_ERROR,
            format!("Internal error: {message}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_cursors_round_trip_and_forgeries_are_refused() {
        for position in [
            SourcePosition::start("plugin://w/".into()),
            SourcePosition {
                namespace: "test://x/".into(),
                cursor: Some(String::new()),
                skip: 7,
            },
            SourcePosition {
                namespace: "plugin://w/".into(),
                cursor: Some("page 2.é".into()),
                skip: 0,
            },
        ] {
            assert_eq!(
                SourcePosition::decode(&position.encode()),
                Ok(Some(position))
            );
        }
        assert_eq!(SourcePosition::decode("r1.3.6162"), Ok(None));
        for forged in [
            "s1.",
            "s1..0.-",
            "s1.zz.0.-",
            "s1.706c.x.-",
            "s1.706c.0",
            "s1.706c.0.abc",
            "s1.706c.99999999999999999999999.-",
            &format!("s1.706c.0.{}", "61".repeat(MAX_SOURCE_CURSOR_BYTES + 1)),
        ] {
            assert_eq!(
                SourcePosition::decode(forged),
                Err(CursorError::Unknown),
                "{forged}"
            );
        }
    }
}
