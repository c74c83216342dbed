//! Human approval by policy: before a call of a tool the [`ApprovalPolicy`] names runs,
//! the server asks the client's user (elicitation), showing the tool's name, its
//! arguments (cut to [`MAX_SHOWN_ARGUMENT_BYTES`]) and the tool's note (a plugin's
//! grants, when the embedder set one). Only an explicit accept runs the call: a decline,
//! a dismissal, no answer within the confirm timeout, or a client that cannot ask leave
//! it unrun, and the model gets a tool error saying why (an `isError` result, not a
//! protocol error).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use toolhost::registry::{
    CallContext, CallGate, Interaction, InteractionError, Registry, ToolCall, ToolError,
};
use tracing::info;

/// The most of a call's arguments (their JSON text) shown in an approval prompt: 1 KiB;
/// longer arguments are cut, with a note saying how long they were.
pub const MAX_SHOWN_ARGUMENT_BYTES: usize = 1024;

/// The longest note shown per tool: 1 KiB (cut past that).
pub const MAX_NOTE_BYTES: usize = 1024;

/// Which tool calls need the user's approval before they run.
///
/// - [`ApprovalPolicy::confirm_tool`]: calls of that tool (`--confirm NAME`);
/// - [`ApprovalPolicy::confirm_destructive`]: calls of every tool that may change
///   anything (`--confirm destructive`), built-in tools included: every tool whose
///   annotations do not say `readOnlyHint: true`, and every one that says
///   `destructiveHint: true`. This follows MCP's defaults, where a tool that says
///   nothing is assumed to write and to be destructive; a tool that only adds
///   (`destructiveHint: false`) still changes things, so it is asked about too. A
///   plugin's hints are its own claims: name its tools, or set `confirm = true` in its
///   manifest, to be sure they are asked about.
///
/// ```
/// use toolhost_mcp::ApprovalPolicy;
/// use toolhost::registry::Registry;
///
/// let policy = ApprovalPolicy::new()
///     .confirm_tool("deploy")
///     .with_note("deploy", "grants: network to api.example.com");
/// let registry = Registry::new();
/// assert!(policy.needs_approval(&registry, "deploy"));
/// assert!(!policy.needs_approval(&registry, "read_file"));
/// assert!(ApprovalPolicy::new().is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    tools: BTreeSet<String>,
    destructive: bool,
    notes: BTreeMap<String, String>,
}

impl ApprovalPolicy {
    /// A policy that asks about nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// This policy, also asking before every call of the tool `name`.
    #[must_use]
    pub fn confirm_tool(mut self, name: impl Into<String>) -> Self {
        self.tools.insert(name.into());
        self
    }

    /// This policy, also asking before every call of a tool that may change anything
    /// (see the type's docs for how that is read from the annotations).
    #[must_use]
    pub fn confirm_destructive(mut self) -> Self {
        self.destructive = true;
        self
    }

    /// This policy showing `note` (e.g. the plugin's declared grants) in the prompt for
    /// `tool`; cut to [`MAX_NOTE_BYTES`].
    #[must_use]
    pub fn with_note(mut self, tool: impl Into<String>, note: impl Into<String>) -> Self {
        self.notes.insert(tool.into(), note.into());
        self
    }

    /// Whether the policy asks about no call.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && !self.destructive
    }

    /// Whether a call of `tool` in `registry` needs approval: the policy names it, or
    /// asks about destructive tools and it may be one, or its definition asks for it
    /// ([`ToolDefinition::needs_approval`](toolhost::registry::ToolDefinition::needs_approval),
    /// a plugin manifest's `confirm = true`).
    pub fn needs_approval(&self, registry: &Registry, tool: &str) -> bool {
        if self.tools.contains(tool) {
            return true;
        }
        // An unknown tool is not run anyway (dispatch answers it).
        registry
            .with_definition(tool, |definition| {
                let hints = definition.annotations;
                definition.needs_approval
                    || self.destructive
                        && (hints.destructive_hint == Some(true)
                            || hints.read_only_hint != Some(true))
            })
            .unwrap_or(false)
    }

    /// The prompt shown for a call of `tool` with `arguments` (JSON text): the arguments
    /// as compact JSON (so the layout the client sent, line breaks included, cannot
    /// dress them up as part of the prompt), cut to [`MAX_SHOWN_ARGUMENT_BYTES`].
    pub fn prompt(&self, tool: &str, arguments: &str) -> String {
        Self::prompt_noted(tool, arguments, self.notes.get(tool).map(String::as_str))
    }

    /// [`ApprovalPolicy::prompt`] with `note` (the policy's own, or the tool's
    /// definition's) below the arguments.
    fn prompt_noted(tool: &str, arguments: &str, note: Option<&str>) -> String {
        let compact = serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .map(|value| value.to_string());
        let arguments = match &compact {
            Some(compact) => compact.as_str(),
            None if arguments.trim().is_empty() => "{}",
            None => arguments,
        };
        let mut prompt = format!("Allow the tool \"{tool}\" to run?\nArguments: ");
        let (shown, was_cut) = cut(arguments, MAX_SHOWN_ARGUMENT_BYTES);
        prompt.push_str(shown);
        if was_cut {
            prompt.push_str(&format!(
                " … (cut: the arguments are {} bytes in all, only the first {MAX_SHOWN_ARGUMENT_BYTES} are shown)",
                arguments.len()
            ));
        }
        if let Some(note) = note {
            let (note, cut_note) = cut(note, MAX_NOTE_BYTES);
            prompt.push('\n');
            prompt.push_str(note);
            if cut_note {
                prompt.push_str(" …");
            }
        }
        prompt
    }

    /// The gate a composing tool's nested calls pass ([`CallGate`]): this policy, so a
    /// tool that needs approval when called directly needs it when a composing tool
    /// (a code tool) calls it; asked through the composing call's interaction.
    pub(crate) fn gate(self: &Arc<Self>) -> Arc<dyn CallGate> {
        Arc::clone(self) as Arc<dyn CallGate>
    }

    /// Asks for approval of a call of `tool` with `arguments` through `interaction`
    /// (`None`: the client cannot ask its user). `Ok` only when the user accepted.
    ///
    /// # Errors
    /// The tool error the model gets when the call is not run, saying why.
    pub(crate) async fn approve(
        &self,
        registry: &Registry,
        tool: &str,
        arguments: &str,
        interaction: Option<&Arc<dyn Interaction>>,
    ) -> Result<(), ToolError> {
        let refused = |message: String| ToolError::Failed {
            tool: tool.to_owned(),
            message,
        };
        let Some(interaction) = interaction else {
            info!(
                tool,
                "a call that needs approval was not run: the client cannot ask its user"
            );
            return Err(refused(
                "not run: this tool needs the user's approval, and this client cannot ask its user (it did not declare the elicitation capability, or this request cannot carry a question). Tell the user the call needs their approval in a client that supports elicitation".to_owned(),
            ));
        };
        let note = match self.notes.get(tool) {
            Some(note) => Some(note.clone()),
            None => registry
                .with_definition(tool, |definition| definition.approval_note.clone())
                .flatten(),
        };
        let prompt = Self::prompt_noted(tool, arguments, note.as_deref());
        let answer = interaction.confirm(prompt).await;
        info!(
            tool,
            approved = matches!(answer, Ok(true)),
            "asked the user to approve a call"
        );
        match answer {
            Ok(true) => Ok(()),
            Ok(false) => Err(refused(
                "not run: the user declined this call. Do not retry it; ask the user what to do instead".to_owned(),
            )),
            Err(InteractionError::TimedOut(why)) => Err(refused(format!(
                "not run: no approval from the user ({why}). Ask the user before trying again"
            ))),
            Err(err) => Err(refused(format!(
                "not run: this tool needs the user's approval, which could not be asked for ({err})"
            ))),
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, and whether it was cut.
fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

impl CallGate for ApprovalPolicy {
    fn check<'a>(
        &'a self,
        registry: &'a Registry,
        _parent: &'a str,
        call: &'a ToolCall,
        ctx: &'a CallContext,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ToolError>> + Send + 'a>>
    {
        Box::pin(async move {
            if !self.needs_approval(registry, &call.name) {
                return Ok(());
            }
            self.approve(registry, &call.name, &call.arguments, ctx.interaction())
                .await
        })
    }
}

#[cfg(test)]
mod tests;
