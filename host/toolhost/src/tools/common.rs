//! Helpers shared by the file tools: storage errors as tool errors, checked path
//! arguments, and timestamps as the model sees them.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::ErrorChain;
use crate::registry::{Arguments, ToolAnnotations, ToolError};
use crate::vfs::{FilePolicy, PolicyError, StorageError};

/// [`changes_files`]: calling the tool twice with the same arguments leaves the store as
/// the first call did (write the same content, delete or move the same file).
pub(crate) const IDEMPOTENT: bool = true;
/// [`changes_files`]: a second call may change the store again (an edit whose new text
/// holds its old text applies again).
pub(crate) const NOT_IDEMPOTENT: bool = false;

/// The MCP hints of a file tool that changes the store: not read-only, destructive (it
/// overwrites, edits or removes what was there), within the host (closed world).
pub(crate) fn changes_files(idempotent: bool) -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(true),
        idempotent_hint: Some(idempotent),
        open_world_hint: Some(false),
    }
}

/// The tool error for a failed storage call, naming `tool`.
///
/// - `InvalidPath` and `InvalidQuery` are the caller's argument: [`ToolError::InvalidArguments`].
/// - `FileTooLarge` is [`ToolError::FileTooLarge`], the error callers match for the size
///   caps (of writes, and of reads).
/// - `Io` is [`ToolError::Failed`] with the error and its OS cause, and what the model
///   can do about it (try again, or another path): that hint is for a model only, so it
///   is added here and not in the storage's own text.
/// - Everything else (`NotFound`, `Denied`, `IsDirectory`, `ParentIsFile`, `Changed`,
///   `AlreadyExists`, ...) is [`ToolError::Failed`] with the storage's own message,
///   which already says what to do.
pub(crate) fn storage_error(tool: &str, err: StorageError) -> ToolError {
    match err {
        StorageError::InvalidPath(_) | StorageError::InvalidQuery { .. } => {
            ToolError::InvalidArguments {
                tool: tool.to_owned(),
                message: err.to_string(),
            }
        }
        StorageError::FileTooLarge { path, size, limit } => ToolError::FileTooLarge {
            tool: tool.to_owned(),
            path,
            size,
            limit,
        },
        StorageError::Io { .. } => ToolError::Failed {
            tool: tool.to_owned(),
            message: format!("{}; try again, or try another path", ErrorChain(&err)),
        },
        other => ToolError::Failed {
            tool: tool.to_owned(),
            message: other.to_string(),
        },
    }
}

/// The tool error for a path or size the [`FilePolicy`] refused, naming `tool`: path
/// refusals are [`ToolError::InvalidArguments`], the size cap is
/// [`ToolError::FileTooLarge`].
pub(crate) fn policy_error(tool: &str, err: PolicyError) -> ToolError {
    match err {
        PolicyError::TooLarge { path, size, limit } => ToolError::FileTooLarge {
            tool: tool.to_owned(),
            path,
            size,
            limit,
        },
        other => ToolError::InvalidArguments {
            tool: tool.to_owned(),
            message: other.to_string(),
        },
    }
}

/// The required string argument `argument`, checked by `policy` (path rules, hidden paths,
/// allowed extensions).
///
/// # Errors
/// [`ToolError::InvalidArguments`] naming the tool and the argument.
pub(crate) fn checked_path(
    policy: &FilePolicy,
    args: &Arguments,
    argument: &str,
) -> Result<String, ToolError> {
    let path = args.required_str(argument)?;
    policy
        .check(argument, path)
        .map_err(|err| policy_error(args.tool(), err))?;
    Ok(path.to_owned())
}

/// How many leading bytes [`is_binary`] looks at (8 KiB, as ripgrep's first buffer).
pub(crate) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// Whether `content` looks binary: a NUL byte in its first [`BINARY_SNIFF_BYTES`] bytes.
/// read_file refuses such files; grep skips them.
pub(crate) fn is_binary(content: &[u8]) -> bool {
    memchr::memchr(0, &content[..content.len().min(BINARY_SNIFF_BYTES)]).is_some()
}

/// `time` as RFC 3339 in UTC, to the second: `2026-12-02T16:14:54Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let seconds: i64 = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        // Before 1970: round down to the whole second.
        Err(before) => {
            let before = before.duration();
            let whole = i64::try_from(before.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(before.subsec_nanos() > 0)
        }
    };
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Year, month, day of the proleptic Gregorian calendar for `days` since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The `path` argument as the model named it, when the call has a record (else `None`,
/// with nothing allocated): what [`recorded`] lists.
pub(crate) fn named_path(ctx: &crate::registry::CallContext, args: &Arguments) -> Option<String> {
    ctx.record()?;
    args.optional_str("path").ok().flatten().map(str::to_owned)
}

/// Runs a file tool's `run` future and, when the call has a record (a traced or audited
/// call) and `path` (from [`named_path`]), records that path as read or `written`, with
/// the `size` its result gives; a failed call records a failed step. A call without a
/// record pays a `None` check.
pub(crate) async fn recorded(
    ctx: &crate::registry::CallContext,
    path: Option<String>,
    written: bool,
    run: impl std::future::Future<Output = Result<crate::registry::ToolResult, ToolError>>,
) -> Result<crate::registry::ToolResult, ToolError> {
    let (Some(record), Some(path)) = (ctx.record(), path) else {
        return run.await;
    };
    let start = record.now();
    let result = run.await;
    let bytes = result.as_ref().map_or(0, |done| {
        done.content
            .get("size")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    });
    if written {
        record.file_written(&path, bytes, start, result.is_ok());
    } else {
        record.file_read(&path, bytes, start, result.is_ok());
    }
    result
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::vfs::{PathError, PathErrorReason};

    #[test]
    fn rfc3339_known_instants() {
        let at = |secs: u64| rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(1_796_228_094), "2026-12-02T16:14:54Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_999)),
            "1970-01-01T00:00:01Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(500)),
            "1969-12-31T23:59:59Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(86_400)),
            "1969-12-31T00:00:00Z"
        );
    }

    #[test]
    fn storage_errors_map_to_tool_errors() {
        let not_found = storage_error(
            "read_file",
            StorageError::NotFound {
                path: "a.md".into(),
            },
        );
        assert_eq!(
            not_found,
            ToolError::Failed {
                tool: "read_file".into(),
                message: "no file at \"a.md\"; call list_files to see what exists".into()
            }
        );
        let invalid = storage_error(
            "read_file",
            PathError::new("path", "../x", PathErrorReason::DotDot).into(),
        );
        assert!(matches!(invalid, ToolError::InvalidArguments { tool, .. } if tool == "read_file"));
        assert_eq!(
            storage_error(
                "edit_file",
                StorageError::Changed {
                    path: "a.md".into()
                }
            ),
            ToolError::Failed {
                tool: "edit_file".into(),
                message: "\"a.md\" changed while it was being edited (another writer changed or deleted it after it was read), so nothing was written and the other change is kept; read the file again and redo the edit".into()
            }
        );
        assert_eq!(
            storage_error(
                "read_file",
                StorageError::io("a.md", std::io::Error::other("disk on fire"))
            ),
            ToolError::Failed {
                tool: "read_file".into(),
                message:
                    "input/output error on \"a.md\": disk on fire; try again, or try another path"
                        .into()
            }
        );
        let too_large = storage_error(
            "write_file",
            StorageError::FileTooLarge {
                path: "a".into(),
                size: 2,
                limit: 1,
            },
        );
        assert_eq!(
            too_large,
            ToolError::FileTooLarge {
                tool: "write_file".into(),
                path: "a".into(),
                size: 2,
                limit: 1
            }
        );
    }

    #[test]
    fn binary_means_nul_in_the_first_8_kib() {
        assert!(!is_binary(b""));
        assert!(!is_binary("héllo\u{1}\n".as_bytes()));
        assert!(is_binary(b"\x89PNG\r\n\x1a\n\0\0"));
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES];
        late.push(0);
        assert!(!is_binary(&late));
        late[BINARY_SNIFF_BYTES - 1] = 0;
        assert!(is_binary(&late));
    }

    #[test]
    fn policy_errors_map_to_tool_errors() {
        let policy = FilePolicy {
            max_file_bytes: 10,
            hide_hidden_paths: true,
            ..FilePolicy::default()
        };
        let too_large = policy.check_size("a", 11).unwrap_err();
        assert_eq!(
            policy_error("write_file", too_large),
            ToolError::FileTooLarge {
                tool: "write_file".into(),
                path: "a".into(),
                size: 11,
                limit: 10
            }
        );
        let hidden = policy.check("path", ".env").unwrap_err();
        let message = hidden.to_string();
        assert_eq!(
            policy_error("read_file", hidden),
            ToolError::InvalidArguments {
                tool: "read_file".into(),
                message
            }
        );
    }

    #[test]
    fn checked_path_names_tool_and_argument() {
        let policy = FilePolicy {
            hide_hidden_paths: true,
            ..FilePolicy::default()
        };
        let args = Arguments::parse("move_file", r#"{"source":".env","destination":"a.md"}"#)
            .expect("object");
        assert_eq!(checked_path(&policy, &args, "destination").unwrap(), "a.md");
        match checked_path(&policy, &args, "source") {
            Err(ToolError::InvalidArguments { tool, message }) => {
                assert_eq!(tool, "move_file");
                assert!(message.starts_with("argument \"source\" is \".env\", a hidden path"));
            }
            other => panic!("{other:?}"),
        }
    }
}
