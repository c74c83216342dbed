//! `plugin_output`: arbitrary JSON as a plugin's `definitions()` answer and as a call's
//! return value, through the host's checks (the loader's validation: names, sizes, schema
//! depth, JSON object schemas; registration next to the built-in tools; the output cap
//! and JSON check of a result; the registry's result cap).
//!
//! Invariants: no panic; definitions are refused with a load error naming the file, or
//! registered whole, each a valid name, not a built-in's look-alike, within the caps; a
//! result is the plugin's JSON (under both caps) or one of the errors a model may get.
//! Memory stays bounded (libFuzzer's -rss_limit_mb, set by scripts/fuzz).
#![no_main]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolhost::registry::{
    name_key, Arguments, CallContext, Environment, Handler, Registry, ToolDefinition, ToolError,
    ToolResult, DEFAULT_RESULT_CAP,
};
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::MemoryStorage;
use toolhost_fuzz::{dispatch, file_registry, text, Json};
use toolhost_plugin::fuzzing::{check_definitions, check_result, RawDefinition, RawResult};
use toolhost_plugin::limits::DefinitionLimits;
use toolhost_plugin::{PluginErrorKind, PluginLimits};

/// One character over the 128 MCP clients accept.
const LONG_NAME: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

#[derive(Debug)]
struct Input {
    definitions: Vec<RawDefinition>,
    result: RawResult,
    max_output_bytes: usize,
}

fn schema(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    Ok(match u.int_in_range(0..=5)? {
        0 => r#"{"type":"object","properties":{}}"#.to_owned(),
        1 => {
            // Deep nesting around the depth cap (32).
            let depth = u.int_in_range(0..=40)?;
            format!("{}{{}}{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
        }
        2 => String::arbitrary(u)?,
        _ => Json::arbitrary(u)?.0.to_string(),
    })
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut definitions = Vec::new();
        for _ in 0..u.int_in_range(0..=4)? {
            let name = match u.int_in_range(0..=4)? {
                0 => (*u.choose(&[
                    "read_file",
                    "Read-File",
                    "greet",
                    "greet",
                    "GREET",
                    LONG_NAME,
                ])?)
                .to_owned(),
                1 => String::arbitrary(u)?,
                _ => format!("tool{}", u.int_in_range(0..=3)?),
            };
            definitions.push(RawDefinition {
                name,
                description: text(u)?,
                parameters: schema(u)?,
            });
        }
        let result = match u.int_in_range(0..=4)? {
            0 => RawResult::InvalidArguments(String::arbitrary(u)?),
            1 => RawResult::Failed(String::arbitrary(u)?),
            2 => RawResult::Ok(String::arbitrary(u)?),
            _ => RawResult::Ok(Json::arbitrary(u)?.0.to_string()),
        };
        let max_output_bytes = if u.arbitrary()? {
            u.int_in_range(0..=64)?
        } else {
            1 << 20
        };
        Ok(Self {
            definitions,
            result,
            max_output_bytes,
        })
    }
}

/// A plugin tool's handler, answering what the fuzzer chose.
struct Answer(Result<ToolResult, ToolError>);

impl Handler for Answer {
    fn call(
        &self,
        _: CallContext,
        _: Arguments,
        _: Environment,
    ) -> toolhost::registry::HandlerFuture {
        let answer = self.0.clone();
        Box::pin(async move { answer })
    }
}

fuzz_target!(|data: &[u8]| {
    let input = match toolhost_fuzz::text_mode(data) {
        // A seed: `name`, `parameters` and the call's result text, one per line.
        Some(text) => {
            let mut lines = text.splitn(3, '\n');
            let mut next = || lines.next().unwrap_or_default().to_owned();
            let (name, parameters, result) = (next(), next(), next());
            Input {
                definitions: vec![RawDefinition {
                    name,
                    description: "A tool.".to_owned(),
                    parameters,
                }],
                result: RawResult::Ok(result),
                max_output_bytes: 1 << 20,
            }
        }
        None => match Input::arbitrary_take_rest(Unstructured::new(data)) {
            Ok(input) => input,
            Err(_) => return,
        },
    };
    let path = Path::new("plugins/fuzzed.wasm");
    let caps = DefinitionLimits::default().with_timeout(Duration::from_secs(1));
    let limits = PluginLimits::default().with_max_output_bytes(input.max_output_bytes);
    let result = check_result(input.result.clone(), "tool0", &limits);
    match &result {
        Ok(value) => {
            let RawResult::Ok(text) = &input.result else {
                panic!("a guest error became {value:?}")
            };
            assert!(text.len() <= limits.max_output_bytes());
            assert_eq!(
                value.content,
                serde_json::from_str::<serde_json::Value>(text).expect("valid JSON")
            );
        }
        Err(
            ToolError::InvalidArguments { .. }
            | ToolError::Failed { .. }
            | ToolError::LimitExceeded { .. },
        ) => {}
        Err(other) => panic!("unexpected {other:?}"),
    }

    let registry: Arc<Registry> =
        file_registry(VfsToolOptions::new(Arc::new(MemoryStorage::new())));
    let before = registry.names();
    let definitions = match check_definitions(path, input.definitions.clone(), &caps) {
        Ok(definitions) => definitions,
        Err(err) => {
            assert!(
                matches!(
                    err.kind(),
                    PluginErrorKind::Definitions { .. }
                        | PluginErrorKind::DefinitionsTooLarge { .. }
                        | PluginErrorKind::BadDefinition { .. }
                        | PluginErrorKind::DuplicateTool { .. }
                ),
                "unexpected {err:?}"
            );
            assert!(
                err.to_string().starts_with("plugins/fuzzed.wasm: "),
                "{err}"
            );
            return;
        }
    };
    assert!(!definitions.is_empty() && definitions.len() <= caps.max_tools());
    for definition in &definitions {
        assert!(definition.parameters.is_object(), "{definition:?}");
        assert!(definition.description.len() <= caps.max_description_bytes());
    }
    let batch: Vec<(ToolDefinition, Arc<dyn Handler>)> = definitions
        .iter()
        .map(|d| {
            (
                d.clone(),
                Arc::new(Answer(result.clone())) as Arc<dyn Handler>,
            )
        })
        .collect();
    match registry.register_all(batch) {
        Ok(()) => {
            let names = registry.names();
            assert_eq!(names.len(), before.len() + definitions.len());
            for definition in &definitions {
                let key = name_key(&definition.name);
                let alike = names.iter().filter(|n| name_key(n) == key).count();
                assert_eq!(
                    alike, 1,
                    "{} has a look-alike in {names:?}",
                    definition.name
                );
                // Through the registry: the result cap applies to whatever the plugin said.
                match dispatch(&registry, &definition.name, "{}") {
                    Ok(value) => {
                        let size = serde_json::to_string(&value.content)
                            .expect("encodes")
                            .len();
                        assert!(size <= DEFAULT_RESULT_CAP);
                    }
                    Err(err) => assert!(err.to_string().len() <= DEFAULT_RESULT_CAP),
                }
            }
        }
        // Reserved, look-alike or taken: nothing registered.
        Err(_) => assert_eq!(registry.names(), before),
    }
});
