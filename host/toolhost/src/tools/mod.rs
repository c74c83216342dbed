//! The built-in tools: file tools over a [`Storage`], and the plan tool.
//!
//! [`register_vfs_tools`] registers, with every option at its default and in this order:
//! `read_file`, `list_files`, `write_file`, `delete_file`, `grep`, `glob`, `edit_file`,
//! `multi_edit`, `move_file`, and `search` when the storage is
//! [`Searchable`](crate::vfs::Searchable). [`register_plan_tool`] adds `todo_write`.
//!
//! Each tool's rules (result shape, windows and caps, error kinds, and the choices made
//! where the tools reference is silent) are the docs of its module below: [`read_file`],
//! [`list_files`], [`write_file`], [`delete_file`], [`grep`], [`glob`], [`edit_file`],
//! [`multi_edit`], [`move_file`], [`search`], [`todo_write`]. The modules hold no API of
//! their own: the tools are reached through the [`Registry`].
//!
//! ```
//! use std::sync::Arc;
//! use toolhost::registry::Registry;
//! use toolhost::tools::{register_vfs_tools, VfsToolOptions};
//! use toolhost::vfs::MemoryStorage;
//!
//! let registry = Registry::new();
//! let options = VfsToolOptions::builder(Arc::new(MemoryStorage::new()))
//!     .read_only(true)
//!     .build();
//! register_vfs_tools(&registry, options)?;
//! assert_eq!(registry.names(), ["read_file", "list_files", "grep", "glob", "search"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use std::future::Future;

use crate::registry::{
    Arguments, CallContext, Environment, RegisterError, Registry, ToolDefinition, ToolError,
    ToolResult,
};
use crate::vfs::{FilePolicy, Storage, DEFAULT_MAX_FILE_BYTES};

mod common;
pub mod delete_file;
pub mod edit_file;
pub mod glob;
pub mod grep;
pub mod list_files;
pub mod move_file;
pub mod multi_edit;
mod pattern;
pub mod read_file;
pub mod search;
#[cfg(test)]
pub(crate) mod testutil;
pub mod todo_write;
pub mod walks;
pub mod write_file;

pub use pattern::{GLOB_SIZE_LIMIT, MAX_PATTERN_BYTES, REGEX_DFA_SIZE_LIMIT, REGEX_SIZE_LIMIT};
pub use read_file::DEFAULT_MAX_READ_BYTES_PER_FILE;
pub use todo_write::register_plan_tool;
pub use walks::WalkBudget;

/// Every tool [`register_vfs_tools`] can register, in registration order (`search` only
/// for a [`Searchable`](crate::vfs::Searchable) store). A host that filters or audits tool
/// names guards this set; `todo_write` comes from [`register_plan_tool`].
pub const DEFAULT_TOOL_NAMES: [&str; 10] = [
    "read_file",
    "list_files",
    "write_file",
    "delete_file",
    "grep",
    "glob",
    "edit_file",
    "multi_edit",
    "move_file",
    "search",
];

/// The v0.3 set, what [`VfsToolOptions::disable_extended`] keeps (in registration order).
pub const V0_3_TOOL_NAMES: [&str; 5] = [
    "read_file",
    "list_files",
    "write_file",
    "delete_file",
    "search",
];

/// How [`register_vfs_tools`] sets up the file tools: [`VfsToolOptions::new`] for every
/// setting at its default, or [`VfsToolOptions::builder`] to change some; read back
/// through the getters. Each setter of [`VfsToolOptionsBuilder`] states its default and
/// its bound.
///
/// ```
/// use std::sync::Arc;
/// use toolhost::tools::VfsToolOptions;
/// use toolhost::vfs::MemoryStorage;
///
/// let options = VfsToolOptions::builder(Arc::new(MemoryStorage::new()))
///     .read_only(true)
///     .max_read_bytes(1 << 20)
///     .build();
/// assert!(options.read_only());
/// assert_eq!(options.max_read_bytes(), 1 << 20);
/// assert_eq!(options.max_file_bytes(), 1024 * 1024);
/// ```
#[derive(Clone)]
pub struct VfsToolOptions {
    /// [`VfsToolOptions::builder`].
    pub(crate) storage: Arc<dyn Storage>,
    /// [`VfsToolOptionsBuilder::read_only`].
    pub(crate) read_only: bool,
    /// [`VfsToolOptionsBuilder::disable_extended`].
    pub(crate) disable_extended: bool,
    /// [`VfsToolOptionsBuilder::hide_hidden_paths`].
    pub(crate) hide_hidden_paths: bool,
    /// [`VfsToolOptionsBuilder::allowed_extensions`].
    pub(crate) allowed_extensions: Option<Vec<String>>,
    /// [`VfsToolOptionsBuilder::max_file_bytes`].
    pub(crate) max_file_bytes: u64,
    /// [`VfsToolOptionsBuilder::max_read_bytes`].
    pub(crate) max_read_bytes: u64,
    /// [`VfsToolOptionsBuilder::walk_budget`].
    pub(crate) walk_budget: Arc<WalkBudget>,
}

impl VfsToolOptions {
    /// Options with every setting at its default over `storage`.
    pub fn new(storage: Arc<dyn Storage>) -> Self {
        Self {
            storage,
            read_only: false,
            disable_extended: false,
            hide_hidden_paths: false,
            allowed_extensions: None,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_read_bytes: DEFAULT_MAX_READ_BYTES_PER_FILE,
            walk_budget: WalkBudget::shared(),
        }
    }

    /// A builder over `storage`, the store the tools work on, with every other setting at
    /// its default. Multi-tenant callers pass a store bound with
    /// [`scope`](crate::vfs::scope).
    pub fn builder(storage: Arc<dyn Storage>) -> VfsToolOptionsBuilder {
        VfsToolOptionsBuilder {
            options: Self::new(storage),
        }
    }

    /// A builder that starts from these options, to change some of them.
    pub fn to_builder(&self) -> VfsToolOptionsBuilder {
        VfsToolOptionsBuilder {
            options: self.clone(),
        }
    }

    /// The store the tools work on.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Whether the writing tools are left out ([`VfsToolOptionsBuilder::read_only`]).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Whether only the v0.3 set is registered
    /// ([`VfsToolOptionsBuilder::disable_extended`]).
    pub fn disable_extended(&self) -> bool {
        self.disable_extended
    }

    /// Whether hidden paths are hidden and refused
    /// ([`VfsToolOptionsBuilder::hide_hidden_paths`]).
    pub fn hide_hidden_paths(&self) -> bool {
        self.hide_hidden_paths
    }

    /// The allowed extensions, `None` for all
    /// ([`VfsToolOptionsBuilder::allowed_extensions`]).
    pub fn allowed_extensions(&self) -> Option<&[String]> {
        self.allowed_extensions.as_deref()
    }

    /// Cap for written and moved files, in bytes
    /// ([`VfsToolOptionsBuilder::max_file_bytes`]).
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// Largest file read_file and grep read, in bytes
    /// ([`VfsToolOptionsBuilder::max_read_bytes`]).
    pub fn max_read_bytes(&self) -> u64 {
        self.max_read_bytes
    }

    /// The walk budget the tools share ([`VfsToolOptionsBuilder::walk_budget`]).
    pub fn walk_budget(&self) -> &Arc<WalkBudget> {
        &self.walk_budget
    }

    /// The path policy these options describe.
    pub fn policy(&self) -> FilePolicy {
        FilePolicy {
            hide_hidden_paths: self.hide_hidden_paths,
            allowed_extensions: self.allowed_extensions.clone(),
            max_file_bytes: self.max_file_bytes,
            read_only: self.read_only,
        }
    }
}

/// Builds [`VfsToolOptions`] (shape of ripgrep's `SearcherBuilder`): start from
/// [`VfsToolOptions::builder`], call the setters, then [`build`](Self::build). A setting
/// added later gets a setter and a default, so code written against this builder keeps
/// compiling. No setter clamps its value: each says what a value does at its bound.
#[derive(Clone)]
pub struct VfsToolOptionsBuilder {
    options: VfsToolOptions,
}

impl VfsToolOptionsBuilder {
    /// Drops write_file, delete_file, edit_file, multi_edit and move_file. Default:
    /// `false`.
    pub fn read_only(&mut self, read_only: bool) -> &mut Self {
        self.options.read_only = read_only;
        self
    }

    /// Drops grep, glob, edit_file, multi_edit and move_file: the v0.3 set
    /// ([`V0_3_TOOL_NAMES`]: read_file, list_files, write_file, delete_file, search).
    /// Default: `false`.
    pub fn disable_extended(&mut self, disable: bool) -> &mut Self {
        self.options.disable_extended = disable;
        self
    }

    /// Paths with a segment starting with `_` or `.` disappear from listings and are
    /// refused as arguments. Default: `false`.
    pub fn hide_hidden_paths(&mut self, hide: bool) -> &mut Self {
        self.options.hide_hidden_paths = hide;
        self
    }

    /// Extensions such as `".md"`, compared case-insensitively; other files disappear from
    /// listings and are refused as arguments of every tool, reads included. Default:
    /// `None`, which allows all.
    pub fn allowed_extensions(&mut self, extensions: Option<Vec<String>>) -> &mut Self {
        self.options.allowed_extensions = extensions;
        self
    }

    /// Cap for written and moved files, in bytes. Default: 1 MiB. A larger file fails
    /// with [`ToolError::FileTooLarge`] (nothing is written). Also the most the tools
    /// that edit or move a file read of it.
    pub fn max_file_bytes(&mut self, bytes: u64) -> &mut Self {
        self.options.max_file_bytes = bytes;
        self
    }

    /// Largest file read_file and grep read, in bytes. Default: 64 MiB
    /// ([`DEFAULT_MAX_READ_BYTES_PER_FILE`]). read_file fails on a larger one with
    /// [`ToolError::FileTooLarge`], grep skips it (and says `truncated`). No upper
    /// bound: every call reads the whole file into host memory, so a higher value lets
    /// one call hold that much.
    pub fn max_read_bytes(&mut self, bytes: u64) -> &mut Self {
        self.options.max_read_bytes = bytes;
        self
    }

    /// How many walks of the store (`list_files`, `glob`, `grep`) run at once, and how
    /// many calls may wait for one ([`walks`]). Default: [`WalkBudget::shared`], the
    /// process-wide budget every registry shares (as many walkers as cores, at least 2;
    /// 4 waiting calls per walker; 5 s of waiting at most).
    pub fn walk_budget(&mut self, budget: Arc<WalkBudget>) -> &mut Self {
        self.options.walk_budget = budget;
        self
    }

    /// The options as set so far.
    pub fn build(&self) -> VfsToolOptions {
        self.options.clone()
    }
}

/// What every file tool's handler captures: the store, the policy and the read cap.
pub(crate) struct FileTools {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) policy: FilePolicy,
    /// [`VfsToolOptions::max_read_bytes`].
    pub(crate) max_read_bytes: u64,
    /// [`VfsToolOptions::walk_budget`].
    pub(crate) walks: Arc<WalkBudget>,
}

/// Registers the file tools over `options.storage`, in the spec's order.
///
/// # Errors
/// [`RegisterError::DuplicateTool`] when a tool of the same name is already registered.
pub fn register_vfs_tools(
    registry: &Registry,
    options: VfsToolOptions,
) -> Result<(), RegisterError> {
    let policy = options.policy();
    let VfsToolOptions {
        storage,
        read_only,
        disable_extended,
        max_read_bytes,
        walk_budget,
        ..
    } = options;
    let searchable = storage.searchable().is_some();
    let tools = Arc::new(FileTools {
        policy,
        storage,
        max_read_bytes,
        walks: walk_budget,
    });
    let writes = !read_only;
    let extended = !disable_extended;
    read_file::register(registry, &tools)?;
    list_files::register(registry, &tools)?;
    if writes {
        write_file::register(registry, &tools)?;
        delete_file::register(registry, &tools)?;
    }
    if extended {
        grep::register(registry, &tools)?;
        glob::register(registry, &tools)?;
    }
    if writes && extended {
        edit_file::register(registry, &tools)?;
        multi_edit::register(registry, &tools)?;
        move_file::register(registry, &tools)?;
    }
    if searchable {
        search::register(registry, &tools)?;
    }
    Ok(())
}

/// Registers one file tool whose handler is `run(tools, ctx, args)`: every file tool
/// captures the same [`FileTools`] and none reads the [`Environment`].
pub(crate) fn register_file_tool<F, Fut>(
    registry: &Registry,
    tools: &Arc<FileTools>,
    definition: ToolDefinition,
    run: F,
) -> Result<(), RegisterError>
where
    F: Fn(Arc<FileTools>, CallContext, Arguments) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    let tools = Arc::clone(tools);
    registry.register_builtin(
        definition,
        move |ctx: CallContext, args: Arguments, _env: Environment| {
            run(Arc::clone(&tools), ctx, args)
        },
    )
}

/// Runs blocking storage work off the async workers. A panic inside it is re-raised in
/// the calling task, so dispatch reports it as [`ToolError::ToolPanicked`].
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
        Err(err) => Err(ToolError::failed(format!(
            "the tool's worker was stopped: {err}"
        ))),
    }
}

/// Runs one walk of the store (`list_files`, `glob`, `grep`): takes a walker of
/// `budget` (or answers the budget's busy error), then runs `work` on the blocking pool,
/// holding the walker until `work` returns.
///
/// `work` gets `ctx` with a cancellation of its own that also fires when this future is
/// dropped (the registry answered the call at its deadline, or its caller went away):
/// `work` checks [`CallContext::expired`] between files and stops, so no walk goes on
/// after its call was answered, holding its walker and its memory.
pub(crate) async fn walk<T, F>(
    budget: &Arc<WalkBudget>,
    tool: &str,
    ctx: CallContext,
    work: F,
) -> Result<T, ToolError>
where
    F: FnOnce(&CallContext) -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    let permit = budget.admit(tool).await?;
    let stop = ctx.cancellation().child_token();
    let _stop_when_dropped = stop.clone().drop_guard();
    let ctx = ctx.with_cancellation(stop);
    blocking(move || {
        let _walker = permit;
        work(&ctx)
    })
    .await
}

/// Visits the paths of `tools`' store that its policy shows and `wanted` accepts, in
/// path order, until `visit` breaks or the call expires (checked before each path).
/// True when the call expired on the way (the listing is then incomplete).
pub(crate) fn visit_shown(
    tools: &FileTools,
    ctx: &CallContext,
    tool: &str,
    wanted: impl Fn(&str) -> bool,
    mut visit: impl FnMut(String) -> std::ops::ControlFlow<()>,
) -> Result<bool, ToolError> {
    use std::ops::ControlFlow;
    let mut expired = false;
    tools
        .storage
        .visit_paths(&mut |path| {
            if ctx.expired() {
                expired = true;
                return ControlFlow::Break(());
            }
            if !(tools.policy.visible(&path) && wanted(&path)) {
                return ControlFlow::Continue(());
            }
            visit(path)
        })
        .map_err(|err| common::storage_error(tool, err))?;
    Ok(expired)
}

/// The error of a walk that stopped because its call expired: the registry has answered
/// the call already (with its own time-out or cancellation), so this only ends the work.
pub(crate) fn stopped(ctx: &CallContext, tool: &str) -> ToolError {
    if ctx.cancellation().is_cancelled() {
        ToolError::Cancelled {
            tool: tool.to_owned(),
        }
    } else {
        // Dispatch puts its configured limit in place of this one.
        ToolError::TimedOut {
            tool: tool.to_owned(),
            limit: std::time::Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{MemoryStorage, OsStorage};

    fn names(
        storage: Arc<dyn Storage>,
        configure: impl FnOnce(&mut VfsToolOptions),
    ) -> Vec<String> {
        let registry = Registry::new();
        let mut options = VfsToolOptions::new(storage);
        configure(&mut options);
        register_vfs_tools(&registry, options).expect("register");
        registry.names()
    }

    #[test]
    fn default_sets_match_the_guarded_names() {
        let memory = || -> Arc<dyn Storage> { Arc::new(MemoryStorage::new()) };
        assert_eq!(names(memory(), |_| {}), DEFAULT_TOOL_NAMES);
        assert_eq!(
            names(memory(), |o| o.disable_extended = true),
            V0_3_TOOL_NAMES
        );
        assert_eq!(
            names(memory(), |o| o.read_only = true),
            ["read_file", "list_files", "grep", "glob", "search"]
        );
        assert_eq!(
            names(memory(), |o| {
                o.read_only = true;
                o.disable_extended = true;
            }),
            ["read_file", "list_files", "search"]
        );
        // osfs is not searchable: no search tool.
        let dir = tempfile::tempdir().expect("dir");
        let os: Arc<dyn Storage> = Arc::new(OsStorage::open(dir.path()).expect("open"));
        assert_eq!(names(os, |_| {}), DEFAULT_TOOL_NAMES[..9]);
    }

    #[test]
    fn every_builtin_name_is_reserved() {
        let registry = Registry::new();
        register_vfs_tools(
            &registry,
            VfsToolOptions::new(Arc::new(MemoryStorage::new())),
        )
        .expect("file tools");
        register_plan_tool(&registry).expect("plan tool");
        let mut names = registry.names();
        names.extend(DEFAULT_TOOL_NAMES.map(str::to_owned));
        for name in names {
            assert!(
                crate::registry::RESERVED_TOOL_NAMES.contains(&name.as_str()),
                "{name} is not reserved"
            );
        }
    }

    #[test]
    fn a_disabled_builtins_name_stays_reserved() {
        let registry = Registry::new();
        let mut options = VfsToolOptions::new(Arc::new(MemoryStorage::new()));
        options.read_only = true;
        register_vfs_tools(&registry, options).expect("register");
        assert!(!registry.has("write_file"));
        let noop =
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) };
        for name in [
            "write_file",
            "WRITE_FILE",
            "write-file",
            "read_file",
            "Read-File",
        ] {
            let err = registry
                .register(ToolDefinition::new(name, "", serde_json::Value::Null), noop)
                .unwrap_err();
            assert!(
                matches!(&err, RegisterError::Reserved { name: refused, .. } if refused == name),
                "{name}: {err:?}"
            );
        }
        assert!(!registry.has("write_file"));
    }

    #[test]
    fn builtins_carry_titles_and_the_right_hints() {
        use crate::registry::{ToolAnnotations, RESERVED_TOOL_NAMES, RESERVED_TOOL_TITLES};

        let registry = Registry::new();
        register_vfs_tools(
            &registry,
            VfsToolOptions::new(Arc::new(MemoryStorage::new())),
        )
        .expect("file tools");
        register_plan_tool(&registry).expect("plan tool");
        // (name, read-only, destructive, idempotent); every built-in stays in the host's
        // store (closed world).
        let expected = [
            ("read_file", true, false, true),
            ("list_files", true, false, true),
            ("write_file", false, true, true),
            ("delete_file", false, true, true),
            ("grep", true, false, true),
            ("glob", true, false, true),
            ("edit_file", false, true, false),
            ("multi_edit", false, true, false),
            ("move_file", false, true, true),
            ("search", true, false, true),
            ("todo_write", true, false, true),
        ];
        let definitions = registry.definitions();
        assert_eq!(definitions.len(), expected.len());
        for (definition, (name, read_only, destructive, idempotent)) in
            definitions.iter().zip(expected)
        {
            assert_eq!(definition.name, name);
            assert_eq!(
                definition.annotations,
                ToolAnnotations {
                    read_only_hint: Some(read_only),
                    destructive_hint: Some(destructive),
                    idempotent_hint: Some(idempotent),
                    open_world_hint: Some(false),
                },
                "{name}"
            );
            let index = RESERVED_TOOL_NAMES.iter().position(|n| *n == name);
            let reserved_title = index.map(|index| RESERVED_TOOL_TITLES[index]);
            assert_eq!(definition.title.as_deref(), reserved_title, "{name}");
            // Only the plan tool's result is worth sending twice (text and structured):
            // the file tools' results are read by the model, and can be 40 KiB.
            assert_eq!(
                definition.output_schema.is_some(),
                name == "todo_write",
                "{name}"
            );
        }
    }

    #[test]
    fn registering_twice_is_a_duplicate() {
        let registry = Registry::new();
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        register_vfs_tools(&registry, VfsToolOptions::new(Arc::clone(&storage))).expect("first");
        assert_eq!(
            register_vfs_tools(&registry, VfsToolOptions::new(storage)),
            Err(RegisterError::DuplicateTool {
                name: "read_file".into()
            })
        );
    }
}
