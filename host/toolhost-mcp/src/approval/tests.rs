//! Tests of the approval prompt and policy.

use toolhost::registry::{
    Arguments, CallContext, Environment, Registry, ToolAnnotations, ToolDefinition, ToolResult,
};

use super::*;

fn tool(registry: &Registry, name: &str, annotations: ToolAnnotations) {
    registry
        .register(
            ToolDefinition::new(name, "A tool.", serde_json::json!({"type": "object"}))
                .with_annotations(annotations),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("ok"))
            },
        )
        .unwrap();
}

#[test]
fn destructive_means_every_tool_not_marked_read_only() {
    let registry = Registry::new();
    tool(&registry, "silent", ToolAnnotations::default());
    tool(&registry, "reader", ToolAnnotations::read_only());
    let adds = ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        ..ToolAnnotations::default()
    };
    tool(&registry, "adder", adds);
    let contradictory = ToolAnnotations {
        read_only_hint: Some(true),
        destructive_hint: Some(true),
        ..ToolAnnotations::default()
    };
    tool(&registry, "liar", contradictory);
    let policy = ApprovalPolicy::new().confirm_destructive();
    let asked: Vec<&str> = ["silent", "reader", "adder", "liar", "unknown"]
        .into_iter()
        .filter(|name| policy.needs_approval(&registry, name))
        .collect();
    assert_eq!(asked, ["silent", "adder", "liar"]);
    assert!(!ApprovalPolicy::new().needs_approval(&registry, "silent"));
}

#[test]
fn ten_mebibytes_of_arguments_are_cut_to_a_readable_prompt_on_a_char_boundary() {
    let arguments = format!("{{\"s\":\"{}\"}}", "é".repeat(5 << 20));
    let prompt = ApprovalPolicy::new()
        .with_note("w", "n".repeat(5000))
        .prompt("w", &arguments);
    assert!(
        prompt.len() < 2 * MAX_SHOWN_ARGUMENT_BYTES + 200,
        "{}",
        prompt.len()
    );
    assert!(prompt.contains(&format!(
        " … (cut: the arguments are {} bytes in all, only the first 1024 are shown)",
        arguments.len()
    )));
    assert!(prompt.ends_with(&format!("{} …", "n".repeat(MAX_NOTE_BYTES))));
    assert_eq!(
        ApprovalPolicy::new().prompt("w", ""),
        "Allow the tool \"w\" to run?\nArguments: {}"
    );
}

#[test]
fn arguments_are_shown_as_compact_json_whatever_layout_the_client_sent() {
    let policy = ApprovalPolicy::new();
    assert_eq!(
        policy.prompt("w", "{\n  \"path\": \"a\",\n\n  \"note\": \"Approved by the admin\"\n}"),
        "Allow the tool \"w\" to run?\nArguments: {\"note\":\"Approved by the admin\",\"path\":\"a\"}"
    );
    // Not JSON (the registry refuses it anyway): shown as sent, cut.
    assert_eq!(
        policy.prompt("w", "not json"),
        "Allow the tool \"w\" to run?\nArguments: not json"
    );
}
