//! The walk budget under a storm of concurrent walks: the walkers at once never pass the
//! budget, every call is answered with its exact result or the exact busy error, and a
//! walk whose call was answered early (timed out, cancelled, dropped) stops and gives its
//! walker back.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::registry::{CallContext, Environment, Limit, Registry, ToolCall, ToolError};
use crate::tools::{register_vfs_tools, VfsToolOptions, WalkBudget};
use crate::vfs::{FileContent, FileEntry, MemoryStorage, Storage, StorageError};

/// A store that counts the listings running at once, each taking `pause` per file: as
/// an outside backend written against the listing methods only (`list`, `list_paths`).
struct Counting {
    inner: MemoryStorage,
    pause: Duration,
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Counting {
    fn new(files: usize, pause: Duration) -> Self {
        let inner = MemoryStorage::new();
        for i in 0..files {
            inner
                .write(&format!("d{}/f{i:02}.md", i % 2), b"needle\n", "")
                .unwrap();
        }
        Counting {
            inner,
            pause,
            running: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    fn listing<T>(&self, list: impl FnOnce() -> Vec<T>) -> Vec<T> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let listed = list();
        std::thread::sleep(self.pause * listed.len() as u32);
        self.running.fetch_sub(1, Ordering::SeqCst);
        listed
    }
}

impl Storage for Counting {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        self.inner.read(path)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.inner.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.inner.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        Ok(self.listing(|| self.inner.list().unwrap()))
    }
    fn list_paths(&self) -> Result<Vec<String>, StorageError> {
        Ok(self.listing(|| self.inner.list_paths().unwrap()))
    }
}

fn registry(storage: Arc<dyn Storage>, configure: impl FnOnce(&mut VfsToolOptions)) -> Registry {
    let registry = Registry::new();
    let mut options = VfsToolOptions::new(storage);
    configure(&mut options);
    register_vfs_tools(&registry, options).unwrap();
    registry
}

/// The three walking tools, a call of each, and its exact answer over `Counting::new(6, _)`.
fn calls() -> [(&'static str, Value, Value); 3] {
    let paths = [
        "d0/f00.md",
        "d0/f02.md",
        "d0/f04.md",
        "d1/f01.md",
        "d1/f03.md",
        "d1/f05.md",
    ];
    [
        (
            "grep",
            json!({"pattern": "needle", "output_mode": "files_with_matches"}),
            json!({"files": paths, "truncated": false}),
        ),
        (
            "glob",
            json!({"pattern": "**/*.md"}),
            json!({"paths": paths, "truncated": false}),
        ),
        ("list_files", json!({}), Value::Null),
    ]
}

/// Fires `rounds` calls of each walking tool at once; returns (answered with the exact
/// result, refused with the exact busy error).
async fn storm(registry: &Arc<Registry>, rounds: usize, walkers: usize) -> (usize, usize) {
    let mut tasks = Vec::new();
    for _ in 0..rounds {
        for (tool, arguments, expected) in calls() {
            let registry = Arc::clone(registry);
            tasks.push(tokio::spawn(async move {
                let call = ToolCall::new(tool, arguments.to_string());
                let outcome = registry
                    .dispatch(&CallContext::new(), &call, &Environment::default())
                    .await;
                (tool, expected, outcome)
            }));
        }
    }
    let (mut answered, mut refused) = (0, 0);
    for task in tasks {
        let (tool, expected, outcome) = task.await.unwrap();
        match outcome {
            Ok(result) if tool == "list_files" => {
                assert_eq!(result.content["files"].as_array().unwrap().len(), 6);
                answered += 1;
            }
            Ok(result) => {
                assert_eq!(result.content, expected, "{tool}");
                answered += 1;
            }
            Err(ToolError::LimitExceeded {
                tool: refused_tool,
                limit,
                message,
            }) => {
                assert_eq!(refused_tool, tool);
                assert_eq!(
                    limit,
                    Limit::ConcurrentWalks {
                        walkers: walkers as u64
                    }
                );
                let start = format!("the host is running {walkers} file walks (list_files, glob, grep) at once and ");
                assert!(message.starts_with(&start), "{message}");
                assert!(
                    message.ends_with(
                        "; retry in a few seconds, or call fewer of these tools at a time"
                    ),
                    "{message}"
                );
                refused += 1;
            }
            Err(other) => panic!("{tool}: {other:?}"),
        }
    }
    (answered, refused)
}

/// Embedders get the budget by default: 60 concurrent walks of a registry built with
/// every option at its default run at most as many at once as the default budget's
/// walkers (as many as cores, at least 2), whatever else in the process walks too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn by_default_concurrent_walks_stay_within_the_process_budget() {
    let storage = Arc::new(Counting::new(6, Duration::from_millis(10)));
    let registry = Arc::new(registry(Arc::clone(&storage) as Arc<dyn Storage>, |_| {}));
    let walkers = WalkBudget::default_walkers();
    let (answered, refused) = storm(&registry, 20, walkers).await;
    assert_eq!(answered + refused, 60);
    assert!(answered >= 1, "none answered");
    let peak = storage.peak.load(Ordering::SeqCst);
    assert!(
        peak <= walkers,
        "{peak} listings ran at once, over the budget of {walkers}"
    );
}

/// A budget of 2 walkers and 3 waiting calls: never more than 2 at once, every call
/// exact or refused with the busy error, and the budget idle afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_small_budget_bounds_the_walkers_and_refuses_the_rest_at_once() {
    let storage = Arc::new(Counting::new(6, Duration::from_millis(5)));
    let budget = Arc::new(WalkBudget::new(2, 3, Duration::from_secs(20)));
    let registry = Arc::new(registry(
        Arc::clone(&storage) as Arc<dyn Storage>,
        |options| {
            options.walk_budget = Arc::clone(&budget);
        },
    ));
    let started = Instant::now();
    let (answered, refused) = storm(&registry, 30, 2).await;
    assert_eq!(answered + refused, 90);
    // The first two run, three wait: at least five are answered; a full queue refuses.
    assert!(answered >= 5, "{answered} answered");
    assert!(refused >= 1, "none refused");
    // A refused call waits for nothing: the storm takes about the answered walks' time
    // (each 30 ms), far from 90 of them one after the other.
    assert!(
        started.elapsed() < Duration::from_millis(30) * 90 / 2,
        "{:?}",
        started.elapsed()
    );
    assert!(storage.peak.load(Ordering::SeqCst) <= 2);
    assert!(budget.peak_walking() <= 2);
    assert_eq!(budget.peak_walking(), 2);
    assert_eq!((budget.walking(), budget.waiting()), (0, 0));
}

/// A call that waits longer than the budget's `max_wait` is refused, naming the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_waits_too_long_is_refused() {
    let storage = Arc::new(Counting::new(6, Duration::from_millis(200)));
    let budget = Arc::new(WalkBudget::new(1, 4, Duration::from_millis(100)));
    let registry = Arc::new(registry(storage, |options| {
        options.walk_budget = Arc::clone(&budget);
    }));
    let first = {
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            registry
                .dispatch(
                    &CallContext::new(),
                    &ToolCall::new("glob", r#"{"pattern":"**"}"#),
                    &Environment::default(),
                )
                .await
        })
    };
    let started = Instant::now();
    while budget.walking() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the first walk never took a walker"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new("grep", r#"{"pattern":"x"}"#),
            &Environment::default(),
        )
        .await;
    assert_eq!(
        second,
        Err(ToolError::LimitExceeded {
            tool: "grep".into(),
            limit: Limit::ConcurrentWalks { walkers: 1 },
            message: "the host is running 1 file walks (list_files, glob, grep) at once and this call waited 100ms without one coming free, so it was not started; retry in a few seconds, or call fewer of these tools at a time".into(),
        })
    );
    assert_eq!(
        first.await.unwrap().unwrap().content["paths"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
}

/// A store whose walk takes 10 ms per file over 3,000 files (30 s), counting the files
/// it has handed out.
struct Slow {
    visited: AtomicUsize,
}

impl Storage for Slow {
    fn read(&self, path: &str) -> Result<FileContent, StorageError> {
        Err(StorageError::NotFound { path: path.into() })
    }
    fn write(&self, _: &str, _: &[u8], _: &str) -> Result<(), StorageError> {
        Ok(())
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        Err(StorageError::NotFound { path: path.into() })
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        unreachable!("the tools walk with visit_files")
    }
    fn visit_paths(
        &self,
        visit: &mut dyn FnMut(String) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        self.visit_files(&mut |entry| visit(entry.path))
    }
    fn visit_files(
        &self,
        visit: &mut dyn FnMut(FileEntry) -> ControlFlow<()>,
    ) -> Result<(), StorageError> {
        for i in 0..3000 {
            std::thread::sleep(Duration::from_millis(10));
            self.visited.fetch_add(1, Ordering::SeqCst);
            let entry = FileEntry {
                path: format!("f{i:04}.md"),
                size: 0,
                updated_at: std::time::SystemTime::UNIX_EPOCH,
            };
            if visit(entry).is_break() {
                break;
            }
        }
        Ok(())
    }
}

/// How a call ends early.
#[derive(Debug, Clone, Copy)]
enum End {
    /// The registry's call timeout (300 ms).
    TimedOut,
    /// The caller cancels it after 300 ms.
    Cancelled,
    /// The caller drops the call after 300 ms, without cancelling.
    Dropped,
}

/// Whichever way a walking call ends early, its walk stops within a short bound (not the
/// 30 s it would take) and its walker comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_stops_when_its_call_ends_early() {
    for tool in ["list_files", "glob", "grep"] {
        for end in [End::TimedOut, End::Cancelled, End::Dropped] {
            let storage = Arc::new(Slow {
                visited: AtomicUsize::new(0),
            });
            let budget = Arc::new(WalkBudget::new(1, 0, Duration::ZERO));
            let registry = Registry::new().with_call_timeout(match end {
                End::TimedOut => Duration::from_millis(300),
                _ => Duration::from_secs(60),
            });
            let mut options = VfsToolOptions::new(Arc::clone(&storage) as Arc<dyn Storage>);
            options.walk_budget = Arc::clone(&budget);
            register_vfs_tools(&registry, options).unwrap();
            let token = CancellationToken::new();
            let ctx = CallContext::new().with_cancellation(token.clone());
            let arguments = match tool {
                "list_files" => "{}",
                _ => r#"{"pattern":"x"}"#,
            };
            let call = ToolCall::new(tool, arguments);
            let env = Environment::default();
            let dispatch = registry.dispatch(&ctx, &call, &env);
            let outcome = match end {
                End::TimedOut => Some(dispatch.await),
                End::Cancelled => {
                    let canceller = tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        token.cancel();
                    });
                    let outcome = dispatch.await;
                    canceller.await.unwrap();
                    Some(outcome)
                }
                End::Dropped => tokio::time::timeout(Duration::from_millis(300), dispatch)
                    .await
                    .ok(),
            };
            match (end, outcome) {
                (End::TimedOut, Some(Err(ToolError::TimedOut { .. })))
                | (End::Cancelled, Some(Err(ToolError::Cancelled { .. })))
                | (End::Dropped, None) => {}
                (end, other) => panic!("{tool} {end:?}: {other:?}"),
            }
            let answered = Instant::now();
            while budget.walking() > 0 {
                assert!(
                    answered.elapsed() < Duration::from_secs(2),
                    "{tool} {end:?}: the walk went on after its call ended"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let visited = storage.visited.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(
                storage.visited.load(Ordering::SeqCst),
                visited,
                "{tool} {end:?}"
            );
            assert!(visited < 300, "{tool} {end:?}: {visited} files visited");
        }
    }
}
