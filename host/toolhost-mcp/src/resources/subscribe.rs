//! `resources/subscribe` and `resources/unsubscribe` of files under the root (legacy
//! era, with `--watch`): one session's subscribed files ([`Subscribed`]) and the poller
//! that tells the client when one changes. A 2026-07-28 `subscriptions/listen` naming
//! resources (`resourceSubscriptions`) holds a [`Subscribed`] of its own, under the
//! same cap, polled while the listen is open.
//!
//! A session subscribes to at most [`MAX_RESOURCE_SUBSCRIPTIONS`] files (a URI already
//! subscribed takes no more room; past the cap `-32602` until one is dropped). A URI is
//! checked as `resources/read` checks it (a `file:///` URI under the root that the
//! policy allows, else `-32602`); the file need not exist yet. While the session has a
//! subscription, one task polls the subscribed files every [`RESOURCE_POLL_INTERVAL`]:
//! each file's content (up to the read cap) is hashed, and a file whose size, content
//! or existence differs from the last poll gets one `notifications/resources/updated`
//! `{uri}`. The first poll after subscribing sets what later polls compare with. The
//! task ends with the last subscription or the session.
//!
//! A resource of a catalog source (a plugin's, under its namespace) can be subscribed to
//! as well, within the same cap: a source cannot say when its content changes, so each
//! subscribed URI of the catalog gets one `notifications/resources/updated` whenever the
//! catalog changes (a plugin loaded, reloaded or removed with `--watch`).

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use toolhost::vfs::StorageError;

use super::FileResources;
use crate::limits::{MAX_RESOURCE_SUBSCRIPTIONS, RESOURCE_POLL_INTERVAL};

/// What a poll saw of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Missing,
    /// Its size and a hash of its content.
    Content(u64, u64),
    /// Over the read cap: its size only.
    Large(u64),
    /// The storage refused it (a symlink, a directory...).
    Refused,
}

/// One subscribed file.
#[derive(Debug)]
struct Watched {
    uri: String,
    /// What the last poll saw; `None` before the first.
    seen: Option<Seen>,
}

#[derive(Debug, Default)]
struct State {
    /// By path.
    files: BTreeMap<String, Watched>,
    /// Resources of the catalog's sources, by URI: told of when their source changes
    /// (a plugin reloaded), since a source cannot say when its content changes.
    sources: std::collections::BTreeSet<String>,
    /// Whether a poller runs.
    polling: bool,
}

/// One session's subscribed files. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub(crate) struct Subscribed(Arc<Mutex<State>>);

/// Why a subscription was refused (the `-32602` message).
pub(crate) fn full_message() -> String {
    format!(
        "this session has subscribed to {MAX_RESOURCE_SUBSCRIPTIONS} resources already, the most one session may; resources/unsubscribe one first"
    )
}

impl Subscribed {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribes to the file at `path` (named `uri`); `Ok(true)` when a poller must be
    /// started (none runs).
    ///
    /// # Errors
    /// The `-32602` message when [`MAX_RESOURCE_SUBSCRIPTIONS`] are held already.
    pub(crate) fn subscribe(&self, uri: String, path: String) -> Result<bool, String> {
        let mut state = self.lock();
        if !state.files.contains_key(&path) {
            if state.files.len() + state.sources.len() >= MAX_RESOURCE_SUBSCRIPTIONS {
                return Err(full_message());
            }
            state.files.insert(path, Watched { uri, seen: None });
        }
        let start = !state.polling;
        state.polling = true;
        Ok(start)
    }

    /// Drops the subscription to `path`, if there is one.
    pub(crate) fn unsubscribe(&self, path: &str) {
        self.lock().files.remove(path);
    }

    /// Subscribes to `uri`, a resource of a catalog source (counted in the same cap).
    ///
    /// # Errors
    /// The `-32602` message when [`MAX_RESOURCE_SUBSCRIPTIONS`] are held already.
    pub(crate) fn subscribe_source(&self, uri: String) -> Result<(), String> {
        let mut state = self.lock();
        if !state.sources.contains(&uri) {
            if state.files.len() + state.sources.len() >= MAX_RESOURCE_SUBSCRIPTIONS {
                return Err(full_message());
            }
            state.sources.insert(uri);
        }
        Ok(())
    }

    /// Drops the subscription to the catalog resource `uri`, if there is one.
    pub(crate) fn unsubscribe_source(&self, uri: &str) {
        self.lock().sources.remove(uri);
    }

    /// The subscribed catalog resources, to tell of when the catalog changed.
    pub(crate) fn source_uris(&self) -> Vec<String> {
        self.lock().sources.iter().cloned().collect()
    }

    /// Polls the subscribed files of `files` until none is left, calling `updated` with
    /// the URI of each file that changed; ends at once when `stop` is cancelled.
    pub(crate) async fn poll<F, Fut>(
        self,
        files: FileResources,
        stop: tokio_util::sync::CancellationToken,
        updated: F,
    ) where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        loop {
            let paths: Vec<String> = {
                let mut state = self.lock();
                if state.files.is_empty() {
                    state.polling = false;
                    return;
                }
                state.files.keys().cloned().collect()
            };
            let storage = Arc::clone(files.options().storage());
            let cap = files.options().max_read_bytes();
            let looked = tokio::task::spawn_blocking(move || {
                paths
                    .into_iter()
                    .map(|path| {
                        let seen = look(storage.as_ref(), &path, cap);
                        (path, seen)
                    })
                    .collect::<Vec<_>>()
            });
            let looked = tokio::select! {
                looked = looked => looked.unwrap_or_default(),
                () = stop.cancelled() => break,
            };
            let changed: Vec<String> = {
                let mut state = self.lock();
                looked
                    .into_iter()
                    .filter_map(|(path, seen)| {
                        let watched = state.files.get_mut(&path)?;
                        let before = watched.seen.replace(seen);
                        (before.is_some_and(|before| before != seen)).then(|| watched.uri.clone())
                    })
                    .collect()
            };
            for uri in changed {
                updated(uri).await;
            }
            tokio::select! {
                () = tokio::time::sleep(RESOURCE_POLL_INTERVAL) => {}
                () = stop.cancelled() => break,
            }
        }
        self.lock().polling = false;
    }
}

/// What the storage shows of `path` now.
fn look(storage: &dyn toolhost::vfs::Storage, path: &str, cap: u64) -> Seen {
    match storage.read_capped(path, cap) {
        Ok(file) => {
            let mut hasher = DefaultHasher::new();
            file.content.hash(&mut hasher);
            Seen::Content(file.content.len() as u64, hasher.finish())
        }
        Err(StorageError::NotFound { .. }) => Seen::Missing,
        Err(StorageError::FileTooLarge { size, .. }) => Seen::Large(size),
        Err(_) => Seen::Refused,
    }
}
