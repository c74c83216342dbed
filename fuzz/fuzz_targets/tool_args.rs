//! `tool_args`: a tool and a JSON argument object chosen by the fuzzer, dispatched through
//! the registry over the memory store, for all ten file tools and `todo_write`.
//!
//! Invariants: no panic (a built-in tool's panic is a `ToolPanicked` result, which is
//! itself a bug here); every failure is one of the four kinds a model should get from a
//! built-in tool (invalid arguments, failed, file too large, result too large) with a
//! message under the result cap; every result fits the cap; the call ends within the
//! time limit (a `TimedOut` is a bug: every input is a few KiB).
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolhost::registry::{Registry, ToolError, DEFAULT_RESULT_CAP};
use toolhost::tools::{register_plan_tool, register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{MemoryStorage, Storage};
use toolhost_fuzz::{json_object, runtime, text, Json, INTERESTING_STRINGS};

/// Every built-in tool (the reserved names are exactly the built-ins).
const TOOLS: [&str; 11] = toolhost::registry::RESERVED_TOOL_NAMES;

#[derive(Debug)]
struct Input {
    hide_hidden: bool,
    extensions: Option<Vec<String>>,
    max_file_bytes: u64,
    files: Vec<(String, String)>,
    calls: Vec<(String, String)>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let hide_hidden = u.arbitrary()?;
        let extensions = if u.ratio(1, 4)? {
            Some(vec![(*u.choose(&[".md", "txt", ".RS", ""])?).to_owned()])
        } else {
            None
        };
        let max_file_bytes = if u.ratio(1, 4)? {
            u.int_in_range(0..=64)?
        } else {
            toolhost::vfs::FilePolicy::default().max_file_bytes()
        };
        let mut files = vec![
            ("a.md".to_owned(), "alpha\nbeta\nalpha beta\n".to_owned()),
            ("dir/b.txt".to_owned(), "one\ntwo\r\nthree".to_owned()),
        ];
        for _ in 0..u.int_in_range(0..=2)? {
            files.push((text(u)?, text(u)?));
        }
        let mut calls = Vec::new();
        for _ in 0..u.int_in_range(1..=3)? {
            let tool = if u.ratio(15, 16)? {
                (*u.choose(&TOOLS)?).to_owned()
            } else {
                (*u.choose(INTERESTING_STRINGS)?).to_owned()
            };
            let arguments = match u.int_in_range(0..=7)? {
                // Not an object: the registry's own checks.
                0 => Json::arbitrary(u)?.0.to_string(),
                1 => String::arbitrary(u)?,
                _ => Value::Object(json_object(u, 0)?).to_string(),
            };
            calls.push((tool, arguments));
        }
        Ok(Self {
            hide_hidden,
            extensions,
            max_file_bytes,
            files,
            calls,
        })
    }
}

const LIMIT: Duration = Duration::from_secs(5);

fuzz_target!(|data: &[u8]| {
    let input = match toolhost_fuzz::text_mode(data) {
        // A seed: `tool {json}` lines over the default options.
        Some(text) => Input {
            hide_hidden: false,
            extensions: None,
            max_file_bytes: toolhost::vfs::FilePolicy::default().max_file_bytes(),
            files: vec![
                ("a.md".to_owned(), "alpha\nbeta\nalpha beta\n".to_owned()),
                ("dir/b.txt".to_owned(), "one\ntwo\r\nthree".to_owned()),
            ],
            calls: toolhost_fuzz::call_lines(text)
                .take(4)
                .map(|(tool, arguments)| (tool.to_owned(), arguments.to_owned()))
                .collect(),
        },
        None => match Input::arbitrary_take_rest(Unstructured::new(data)) {
            Ok(input) => input,
            Err(_) => return,
        },
    };
    let storage = Arc::new(MemoryStorage::new());
    for (path, content) in &input.files {
        // Invalid paths are refused by the store; that is fine for seeding.
        let _ = storage.write(path, content.as_bytes(), "");
    }
    let registry = Registry::new().with_call_timeout(LIMIT);
    let options = VfsToolOptions::builder(storage as Arc<dyn Storage>)
        .hide_hidden_paths(input.hide_hidden)
        .allowed_extensions(input.extensions.clone())
        .max_file_bytes(input.max_file_bytes)
        .build();
    register_vfs_tools(&registry, options).expect("file tools");
    register_plan_tool(&registry).expect("plan tool");
    for (tool, arguments) in &input.calls {
        let started = std::time::Instant::now();
        let result = runtime().block_on(registry.dispatch(
            &toolhost::registry::CallContext::new(),
            &toolhost::registry::ToolCall::new(tool.as_str(), arguments.as_str()),
            &toolhost::registry::Environment::default(),
        ));
        let elapsed = started.elapsed();
        assert!(elapsed < LIMIT, "{tool} took {elapsed:?} on {arguments}");
        match result {
            Ok(result) => {
                let size = serde_json::to_string(&result.content)
                    .expect("encodes")
                    .len();
                assert!(size <= DEFAULT_RESULT_CAP, "{tool}: result of {size} bytes");
            }
            Err(err) => {
                let message = err.to_string();
                assert!(
                    message.len() <= DEFAULT_RESULT_CAP,
                    "{tool}: error of {} bytes",
                    message.len()
                );
                assert!(!message.is_empty());
                match &err {
                    ToolError::UnknownTool { name } => assert_eq!(name, tool),
                    ToolError::InvalidArguments { .. }
                    | ToolError::Failed { .. }
                    | ToolError::FileTooLarge { .. }
                    | ToolError::ResultTooLarge { .. } => {}
                    other => panic!(
                        "{tool} {arguments}: unexpected error kind {}: {other}",
                        other.kind()
                    ),
                }
                assert_eq!(err.tool(), tool.as_str(), "the error names the tool called");
            }
        }
    }
});
