//! The optimized compile behind quick code ([`CompileTiers::QuickFirst`]): a plugin
//! loaded on quick code queues a job here once its tools are registered. One background
//! thread (`plugin-optimize`, started when there is work and ending when there is none)
//! takes the jobs in order: it compiles the component with the optimizing engines
//! (through the compile cache, so the entry is stored for the next start), pre-instantiates
//! it and swaps it in ([`PluginRuntime::swap_in_optimized`]).
//!
//! A job holds the plugin's runtime weakly: a plugin unloaded or replaced (hot reload)
//! before its turn is skipped. One thread, not one per plugin, because each compile
//! already runs on every core; the calls being served share those cores meanwhile.
//!
//! [`CompileTiers::QuickFirst`]: crate::CompileTiers::QuickFirst

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::cache::CompileCache;
use crate::engine::Shard;
use crate::runtime::{PluginRuntime, ShardPres};
use crate::world::Version;
use toolhost::error::ErrorChain;

/// One plugin's optimized compile, waiting for its turn.
pub(crate) struct OptimizeJob {
    /// The component file (for the log and the cache's messages).
    pub path: PathBuf,
    /// The component's bytes, as checked against the pins and compiled quickly.
    pub bytes: Vec<u8>,
    /// Their [`crate::cache::content_hash`]: the compile cache's key is made from it.
    pub digest: [u8; 32],
    /// The cache of the engines below.
    pub cache: CompileCache,
    /// The engine of each shard with its linker; the code is compiled for the first.
    pub shards: Arc<[Shard]>,
    /// The world the component targets.
    pub version: Version,
    /// The plugin to swap the code into, while it is still loaded.
    pub runtime: Weak<PluginRuntime>,
}

/// The queue of [`OptimizeJob`]s and its worker thread.
#[derive(Default)]
pub(crate) struct Optimizer {
    state: Mutex<Queue>,
    /// Notified whenever the queue runs empty.
    drained: Condvar,
    /// Optimized builds swapped in so far.
    swapped: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<OptimizeJob>,
    /// Jobs queued or running.
    pending: usize,
    /// Whether the worker thread is running.
    working: bool,
    /// Jobs wait until released (tests hold them to see quick code serve).
    held: bool,
}

impl Optimizer {
    /// Queues `job`, starting the worker thread if none runs. A thread that cannot be
    /// started is logged; the plugin then keeps its quick code.
    pub(crate) fn submit(self: &Arc<Self>, job: OptimizeJob) {
        let mut queue = self.lock();
        queue.jobs.push_back(job);
        queue.pending += 1;
        self.start(queue);
    }

    /// Starts the worker thread for the queued jobs, unless it runs or jobs are held.
    fn start(self: &Arc<Self>, mut queue: MutexGuard<'_, Queue>) {
        if queue.working || queue.held || queue.jobs.is_empty() {
            return;
        }
        let optimizer = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name("plugin-optimize".into())
            .spawn(move || optimizer.work());
        match started {
            Ok(_) => queue.working = true,
            Err(err) => {
                tracing::warn!(target: "plugin", "cannot start the thread that compiles optimized plugin code ({err}); plugins keep their quick code");
                queue.pending -= queue.jobs.len();
                queue.jobs.clear();
                self.drained.notify_all();
            }
        }
    }

    /// Jobs queued or running.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending
    }

    /// Optimized builds swapped in so far.
    #[cfg(test)]
    pub(crate) fn swapped(&self) -> usize {
        self.swapped.load(Ordering::Relaxed)
    }

    /// Holds the jobs queued from now on in the queue, until [`release`](Self::release).
    #[cfg(test)]
    pub(crate) fn hold(&self) {
        self.lock().held = true;
    }

    /// Lets held jobs run.
    #[cfg(test)]
    pub(crate) fn release(self: &Arc<Self>) {
        let mut queue = self.lock();
        queue.held = false;
        self.start(queue);
    }

    /// Waits until no job is queued or running, or `limit` has passed; whether none is.
    pub(crate) fn wait(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut queue = self.lock();
        while queue.pending > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            queue = self
                .drained
                .wait_timeout(queue, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The worker: runs the jobs in order until the queue is empty.
    fn work(&self) {
        // The last optimized component, by digest and shards: one component queued under
        // several plugins (one plugin offered twice) is read and held once.
        let mut recent: Option<Recent> = None;
        loop {
            let job = {
                let mut queue = self.lock();
                // Taken and marked idle under one lock: a job queued after this starts
                // a new worker.
                let Some(job) = queue.jobs.pop_front() else {
                    queue.working = false;
                    return;
                };
                job
            };
            // A panic in one compile must not leave `pending` counting it forever.
            let path = job.path.clone();
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(job, &mut recent))) {
                Ok(true) => {
                    self.swapped.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(_) => {
                    tracing::warn!(target: "plugin", "{}: the optimized compile panicked; the plugin keeps its quick code", path.display());
                }
            }
            let mut queue = self.lock();
            queue.pending -= 1;
            if queue.pending == 0 {
                self.drained.notify_all();
            }
        }
    }
}

/// The optimized component of the last job: its digest, its shards (by address) and
/// the component.
type Recent = ([u8; 32], usize, wasmtime::component::Component);

/// Compiles `job`'s optimized code (or reads it from the cache, or takes `recent`'s when
/// it is the same component for the same shards) and swaps it in; whether it was
/// swapped in.
fn run(job: OptimizeJob, recent: &mut Option<Recent>) -> bool {
    if job.runtime.strong_count() == 0 {
        return false;
    }
    let engine = &job.shards[0].engine;
    let shards = Arc::as_ptr(&job.shards).cast::<u8>() as usize;
    let compiled = match recent {
        Some((digest, at, component)) if *digest == job.digest && *at == shards => Ok((
            component.clone(),
            crate::cache::CompileSource::CacheHit(std::time::Duration::ZERO),
        )),
        _ => job
            .cache
            .load_into(engine, &job.path, &job.bytes, &job.digest, None),
    };
    if let Ok((component, _)) = &compiled {
        *recent = Some((job.digest, shards, component.clone()));
    }
    let swapped = compiled.and_then(|(component, source)| {
        let pres =
            ShardPres::new(Arc::clone(&job.shards), component, job.version).map_err(|err| {
                crate::PluginErrorKind::WrongWorld {
                    message: crate::error::error_chain(&err),
                }
                .at(job.path.clone())
            })?;
        Ok((pres, source))
    });
    match swapped {
        Ok((pres, source)) => {
            // Unloaded while it compiled: the cache entry is stored, nothing to swap.
            let Some(runtime) = job.runtime.upgrade() else {
                return false;
            };
            let swapped = runtime.swap_in_optimized(pres);
            if swapped {
                tracing::debug!(
                    target: "plugin",
                    plugin = %runtime.name,
                    "plugin {}: optimized code in use ({source})",
                    runtime.name
                );
            }
            swapped
        }
        Err(err) => {
            tracing::warn!(
                target: "plugin",
                "the optimized compile failed, the plugin keeps its quick code: {}",
                ErrorChain(&err)
            );
            false
        }
    }
}
