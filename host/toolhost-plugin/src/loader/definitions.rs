//! Asking compiled plugins for their tool definitions: all of a directory's at once on a
//! private tokio runtime, each within [`DefinitionLimits::timeout`], and what went
//! wrong told to the operator.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Semaphore;

use toolhost::registry::ToolError;

use super::compile::{Compiled, Offer};
use super::pins::Pins;
use super::validate::validate;
use super::Prepared;
use crate::limits::DefinitionLimits;
use crate::{PluginError, PluginErrorKind, PluginHost};

impl PluginHost {
    /// Prepares every file of `files`, keeping the order: the manifest and compile (or
    /// cache) on up to one thread per core, since compiling is the slow part of a cold
    /// start; then the definitions of all of them at once ([`PluginHost::ask_all`]).
    pub(super) fn prepare_all(
        &self,
        files: &[PathBuf],
        pins: Option<Pins<'_>>,
    ) -> Vec<Result<Prepared, PluginError>> {
        let compiled = self.compile_all(files, pins);
        self.ask_all(files.iter().cloned().zip(compiled).collect())
    }

    pub(super) fn prepare(&self, path: &Path) -> Result<Prepared, PluginError> {
        self.prepare_with(path, false, None)
    }

    /// One plugin compiled (checked against `pins` first, when given) and asked for its
    /// definitions; `any_grant` resolves its manifest for inspection.
    pub(super) fn prepare_with(
        &self,
        path: &Path,
        any_grant: bool,
        pins: Option<Pins<'_>>,
    ) -> Result<Prepared, PluginError> {
        let compiled = self.compile_with(path, any_grant, pins, None)?;
        self.ask_one(path.to_owned(), compiled)
    }

    /// [`ask_all`](Self::ask_all) for one plugin.
    fn ask_one(&self, path: PathBuf, compiled: Compiled) -> Result<Prepared, PluginError> {
        let caps = self.config.definition_limits.clone();
        let gate = Arc::new(Semaphore::new(1));
        let asked = path.clone();
        block_on(1, async move {
            tokio::spawn(ask_definitions(asked.clone(), compiled, caps, gate))
                .await
                .unwrap_or_else(|_| Err(crashed(&asked)))
        })
        .unwrap_or_else(|err| Err(no_runtime(&path, &err)))
    }

    /// Asks every compiled plugin of `plugins` for its definitions, all at once (up to
    /// the pool's concurrent calls), each within [`DefinitionLimits::timeout`], and
    /// checks them. Keeps the order; a failed compile is passed through.
    fn ask_all(
        &self,
        plugins: Vec<(PathBuf, Result<Compiled, PluginError>)>,
    ) -> Vec<Result<Prepared, PluginError>> {
        let caps = self.config.definition_limits.clone();
        let gate = Arc::new(Semaphore::new(self.pool.concurrent_calls.max(1) as usize));
        let asking = plugins.iter().filter(|(_, c)| c.is_ok()).count();
        let paths: Vec<PathBuf> = plugins.iter().map(|(path, _)| path.clone()).collect();
        let answers = block_on(asking, async move {
            let tasks: Vec<_> = plugins
                .into_iter()
                .map(|(path, compiled)| {
                    let task = compiled.map(|compiled| {
                        tokio::spawn(ask_definitions(
                            path.clone(),
                            compiled,
                            caps.clone(),
                            Arc::clone(&gate),
                        ))
                    });
                    (path, task)
                })
                .collect();
            let mut answers = Vec::with_capacity(tasks.len());
            for (path, task) in tasks {
                answers.push(match task {
                    Ok(task) => task.await.unwrap_or_else(|_| Err(crashed(&path))),
                    Err(err) => Err(err),
                });
            }
            answers
        });
        answers.unwrap_or_else(|err| {
            paths
                .iter()
                .map(|path| Err(no_runtime(path, &err)))
                .collect()
        })
    }
}

/// The error of a loader task that panicked asking the plugin at `path`.
fn crashed(path: &Path) -> PluginError {
    PluginError::from(PluginErrorKind::Host {
        message: format!(
            "asking {} for its definitions crashed the loader task",
            path.display()
        ),
    })
}

/// The error of loading the plugin at `path` when no tokio runtime could be started.
fn no_runtime(path: &Path, err: &std::io::Error) -> PluginError {
    PluginError::from(PluginErrorKind::Host {
        message: format!(
            "cannot start a tokio runtime to load {}: {err}",
            path.display()
        ),
    })
}

/// Asks a compiled plugin for its definitions (once one of `gate`'s permits is free, so
/// the deadline does not run while it waits for others) within `caps.timeout`, and
/// checks them against `caps`.
async fn ask_definitions(
    path: PathBuf,
    compiled: Compiled,
    caps: DefinitionLimits,
    gate: Arc<Semaphore>,
) -> Result<Prepared, PluginError> {
    // The gate is never closed.
    let _permit = gate.acquire_owned().await.ok();
    // The guest yields to the runtime at every epoch tick, so this timeout fires even
    // for a `loop {}`; dropping the call drops its store.
    let raw = match tokio::time::timeout(caps.timeout, compiled.runtime.definitions()).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(err)) => {
            return Err(PluginErrorKind::Definitions {
                message: definitions_failure(err),
            }
            .at(path))
        }
        Err(_elapsed) => {
            return Err(PluginErrorKind::Definitions {
                message: format!(
                "it did not answer within {} (the definitions deadline, DefinitionLimits::timeout)",
                toolhost::registry::format_duration(caps.timeout)
            ),
            }
            .at(path))
        }
    };
    let definitions = validate(&path, raw, &caps)?;
    let offer = ask_offer(&compiled, &caps)
        .await
        .map_err(|message| PluginErrorKind::Catalog { message }.at(path.clone()))?;
    compiled.with(&path, definitions, offer)
}

/// Checks that `template` is an RFC 6570 level 1 URI template: at most 1 KiB, no space
/// or control character, and every `{` closed by a `}` around a name of letters, digits
/// and `_` (no operator, no nesting). Its namespace is checked by the catalog.
pub(crate) fn check_template(template: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "resource template `{}` is not an RFC 6570 level 1 template: {why}",
            template.escape_debug()
        ))
    };
    if template.len() > 1024 {
        return bad("it is longer than 1024 bytes");
    }
    if template
        .chars()
        .any(|c| c.is_control() || c.is_whitespace())
    {
        return bad("it holds a space or a control character");
    }
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return bad("a `}` closes nothing");
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return bad("a `{` is never closed");
        };
        let name = &after[..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return bad("a variable name must be letters, digits or `_`");
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// Most prompts, and most resource templates, one plugin may offer.
const MAX_OFFERED: usize = 1000;

/// Asks a 0.3.0 plugin that exports `prompts` or `resources` what it offers, each
/// within `caps.timeout`: its prompt definitions, its resource templates, and (when it
/// has no template) whether its first page of resources holds any. Empty lists are
/// "none": every plugin built with the SDK exports both interfaces.
async fn ask_offer(compiled: &Compiled, caps: &DefinitionLimits) -> Result<Offer, String> {
    let runtime = &compiled.runtime;
    let deadline = |what: &str| {
        format!(
            "asking for its {what} did not finish within {} (the definitions deadline)",
            toolhost::registry::format_duration(caps.timeout)
        )
    };
    let mut offer = Offer::default();
    if compiled.exports(crate::v0_3::PROMPTS_EXPORT) {
        let prompts = tokio::time::timeout(caps.timeout, runtime.prompt_definitions())
            .await
            .map_err(|_| deadline("prompts"))?
            .map_err(|err| {
                format!(
                    "asking for its prompts failed: {}",
                    definitions_failure(err)
                )
            })?;
        if prompts.len() > MAX_OFFERED {
            return Err(format!(
                "it declares {} prompts, more than {MAX_OFFERED}",
                prompts.len()
            ));
        }
        if !prompts.is_empty() {
            offer.prompts = Some(
                prompts
                    .into_iter()
                    .map(crate::sources::prompt_definition)
                    .collect(),
            );
        }
    }
    if compiled.exports(crate::v0_3::RESOURCES_EXPORT) {
        let templates = tokio::time::timeout(caps.timeout, runtime.resource_templates())
            .await
            .map_err(|_| deadline("resource templates"))?
            .map_err(|err| {
                format!(
                    "asking for its resource templates failed: {}",
                    definitions_failure(err)
                )
            })?;
        if templates.len() > MAX_OFFERED {
            return Err(format!(
                "it declares {} resource templates, more than {MAX_OFFERED}",
                templates.len()
            ));
        }
        for template in &templates {
            check_template(&template.uri_template)?;
        }
        let (ctx, env) = (
            toolhost::registry::CallContext::new(),
            toolhost::registry::Environment::default(),
        );
        let has_resources = !templates.is_empty() || {
            let first = runtime.resource_list(&ctx, None, &env);
            match tokio::time::timeout(caps.timeout, first).await {
                Ok(Ok(Ok(page))) => !page.resources.is_empty(),
                // A failing first page still offers resources: each list says why.
                Ok(Ok(Err(_))) => true,
                Ok(Err(err)) => {
                    return Err(format!(
                        "asking for its resources failed: {}",
                        definitions_failure(err)
                    ))
                }
                Err(_) => return Err(deadline("resources")),
            }
        };
        if has_resources {
            offer.resources = Some(
                templates
                    .into_iter()
                    .map(crate::sources::template)
                    .collect(),
            );
        }
    }
    Ok(offer)
}

/// What went wrong asking for the definitions, for the operator (the [`ToolError`]
/// texts are written for a model and name a tool).
fn definitions_failure(err: ToolError) -> String {
    match err {
        ToolError::ToolPanicked { message, .. } => format!("it crashed: {message}"),
        ToolError::TimedOut { limit, .. } => format!(
            "it did not answer within {} (its timeout)",
            toolhost::registry::format_duration(limit)
        ),
        ToolError::LimitExceeded { limit, message, .. } => {
            format!("it hit its {limit} limit: {message}")
        }
        other => other.to_string(),
    }
}

/// Runs `future` to completion on a private runtime (up to one worker per core, at most
/// `tasks`) in a scoped thread, so loading works from plain code and from inside a tokio
/// runtime alike (a guest waiting on a WASI clock needs a tokio timer).
fn block_on<F: Future + Send>(tasks: usize, future: F) -> std::io::Result<F::Output>
where
    F::Output: Send,
{
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, tasks.max(1));
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("plugin-load")
                    .enable_time()
                    .build()
                    .map(|runtime| runtime.block_on(future))
            })
            .join()
    })
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

#[cfg(test)]
mod tests {
    use super::check_template;

    #[test]
    fn templates_must_be_level_1() {
        for good in [
            "plugin://p/items/{id}",
            "test://template/{id}/data",
            "plugin://p/fixed",
            "plugin://p/{a}/{b_2}",
        ] {
            assert_eq!(check_template(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("plugin://p/{id", "a `{` is never closed"),
            ("plugin://p/id}", "a `}` closes nothing"),
            (
                "plugin://p/{}",
                "a variable name must be letters, digits or `_`",
            ),
            (
                "plugin://p/{+path}",
                "a variable name must be letters, digits or `_`",
            ),
            (
                "plugin://p/{a{b}}",
                "a variable name must be letters, digits or `_`",
            ),
            ("plugin://p/a b", "it holds a space or a control character"),
        ] {
            assert_eq!(
                check_template(bad),
                Err(format!(
                    "resource template `{bad}` is not an RFC 6570 level 1 template: {why}"
                )),
                "{bad}"
            );
        }
    }
}
