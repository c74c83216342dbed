//! MCP sessions over HTTP: ids any process holding the key can check, and the sessions
//! this process holds in memory.
//!
//! A session id is 32 hex digits of randomness followed by 32 hex digits of
//! HMAC-SHA256 over them and the client's name, under the server's session key. So:
//! - an id cannot be made up or altered (a client can only use ids the server issued);
//! - an id issued to one token's client is refused with another token;
//! - every process started with the same key accepts every id any of them issued, and
//!   rebuilds the session's state from the id alone (its storage root follows from the
//!   id): nothing has to be shared between processes but the key.
//!
//! What a process holds per session (its calls in flight, the open GET stream, the
//! negotiated protocol version) is bounded by [`SessionSettings::max_sessions`]; an idle
//! session is forgotten first when room is needed, and comes back from its id.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use toolhost::registry::Environment;

use crate::limits::McpLimits;
use crate::session::{Catalog, Counters, Session, TaskOwner};
use crate::tasks::TaskStore;

use super::caller::Caller;

mod ids;
mod registries;

use ids::random_part;
pub use ids::{SessionKey, SessionKeyError, SESSION_ID_LEN};
use registries::Served;
pub use registries::{Registries, RegistryFactory, ServedFactory, SessionInfo};

/// How many terminated session ids a process remembers (and refuses), oldest forgotten
/// first. Each is kept as its 128 random bits (16 bytes, about 40 with the set's share),
/// so the memory is at most about 3 MiB; kept as text it was about 18 MiB, and a
/// long soak of session churn saw the host grow towards it.
const TERMINATED_MEMORY: usize = 65_536;

/// How the server keeps sessions: [`SessionSettings::new`] with the key, then
/// [`SessionSettings::with_max_sessions`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionSettings {
    pub(crate) key: Option<SessionKey>,
    pub(crate) max_sessions: usize,
}

impl SessionSettings {
    /// Sessions signed with `key`; `None`: stateless, no session ids, every request
    /// served on its own (no GET stream, no DELETE, cancellation only by closing the
    /// request). At most [`DEFAULT_MAX_SESSIONS`] held.
    pub fn new(key: Option<SessionKey>) -> Self {
        Self {
            key,
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }

    /// The most sessions this process holds in memory: [`DEFAULT_MAX_SESSIONS`] (1024)
    /// by default, at least 1. An idle one is forgotten to make room (it comes back
    /// from its id); when all are busy, a new session is refused with 503.
    #[must_use]
    pub fn with_max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// The key sessions are signed with (`None`: stateless).
    pub fn key(&self) -> Option<&SessionKey> {
        self.key.as_ref()
    }

    /// The most sessions held ([`SessionSettings::with_max_sessions`]).
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }
}

/// Default for [`SessionSettings::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 1024;

/// Why a session could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Unknown, not ours, or terminated: the client must initialize again (404).
    NotFound,
    /// Every place is taken by a busy session (503).
    Full,
    /// The registry could not be built (500); the message is for the log and the client.
    Setup(String),
}

struct Live {
    session: Session,
    last_used: Instant,
    /// Whether a GET stream is open on it (then it is busy).
    streaming: bool,
}

/// Where the sessions' catalogs (registry and encoded `tools/list`) come from.
enum Source {
    /// One for every session, encoded once.
    Shared(Arc<Catalog>),
    /// Built per session.
    PerSession(ServedFactory),
}

/// The sessions of this process.
pub(crate) struct Sessions {
    settings: SessionSettings,
    /// Where a session's catalog comes from.
    source: Source,
    counters: Arc<Counters>,
    /// Whether sessions are told of tool changes (per-session catalogs too: a policy
    /// reload changes what a session is offered).
    list_changed: bool,
    live: Mutex<HashMap<String, Live>>,
    /// Cancelled at shutdown: every session's calls stop, held here or not.
    stop: CancellationToken,
    terminated: Mutex<(HashSet<u128>, VecDeque<u128>)>,
    /// How sessions built per session ask their users (the shared catalog has it too).
    asking: crate::elicit::Asking,
    /// The tasks of every session (a session's tasks outlive its requests, and its
    /// being forgotten while idle).
    tasks: Arc<TaskStore>,
}

impl Sessions {
    pub(crate) fn new(
        settings: SessionSettings,
        registries: Registries,
        counters: Arc<Counters>,
        list_changed: bool,
    ) -> Self {
        let source = match registries.0 {
            Served::Shared(registry, files) => Source::Shared(Arc::new(
                Catalog::new(registry, Arc::clone(&counters))
                    .with_list_changed(list_changed)
                    .with_resources(files),
            )),
            Served::PerSession(factory) => Source::PerSession(factory),
        };
        let tasks = Arc::new(TaskStore::new(&McpLimits::default()).counting(Arc::clone(&counters)));
        Self {
            settings,
            source,
            counters,
            list_changed,
            live: Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
            terminated: Mutex::new((HashSet::new(), VecDeque::new())),
            asking: crate::elicit::Asking::default(),
            tasks,
        }
    }

    /// These sessions asking their users as `asking` says (elicitation, approval).
    pub(crate) fn with_asking(mut self, asking: crate::elicit::Asking) -> Self {
        if let Source::Shared(catalog) = &mut self.source {
            if let Some(only) = Arc::get_mut(catalog) {
                only.asking = asking.clone();
            }
        }
        self.asking = asking;
        self
    }

    /// These sessions keeping their tasks within `limits`' task bounds.
    /// Sessionless callers' tasks are also kept in `shared`, when given.
    pub(crate) fn with_task_limits(
        mut self,
        limits: &McpLimits,
        shared: Option<crate::state::SharedTasks>,
    ) -> Self {
        self.tasks = Arc::new(
            TaskStore::new(limits)
                .counting(Arc::clone(&self.counters))
                .with_shared(shared),
        );
        self
    }

    #[cfg(test)]
    /// The tasks of every session.
    pub(crate) fn tasks(&self) -> &Arc<TaskStore> {
        &self.tasks
    }

    pub(crate) fn stateful(&self) -> bool {
        self.settings.key.is_some()
    }

    /// A session for `info`; one without an id (a request standing alone) files its
    /// tasks under `caller`.
    async fn build(
        &self,
        info: SessionInfo,
        caller: Option<TaskOwner>,
    ) -> Result<Session, Refusal> {
        let owner = info.id.clone().map(TaskOwner::Session).or(caller);
        let env = Environment {
            session_id: info
                .id
                .clone()
                .unwrap_or_else(|| Environment::generate().session_id),
            turn_id: String::new(),
        };
        let catalog = match &self.source {
            Source::Shared(catalog) => Arc::clone(catalog),
            Source::PerSession(factory) => {
                let factory = Arc::clone(factory);
                let (registry, files) = tokio::task::spawn_blocking(move || factory(&info))
                    .await
                    .map_err(|err| Refusal::Setup(format!("the session set-up failed: {err}")))?
                    .map_err(Refusal::Setup)?;
                Arc::new(
                    Catalog::new(registry, Arc::clone(&self.counters))
                        .with_list_changed(self.list_changed)
                        .with_resources(files)
                        .with_asking(self.asking.clone()),
                )
            }
        };
        let session = Session::with_catalog_under(catalog, env, self.stop.child_token());
        // A session's tasks are its own; a request without one files them under its
        // caller, so the caller's later requests find them (and nobody else's do).
        if let Some(owner) = owner {
            session.set_tasks(Arc::clone(&self.tasks), owner);
        }
        Ok(session)
    }

    /// A session for one request standing alone (a stateless server's, or a
    /// 2026-07-28 request without a session), whose tasks belong to the bearer token it
    /// presented (`token`, its place in the token file; `None` without tokens).
    pub(crate) async fn ephemeral(&self, caller: &Caller) -> Result<Session, Refusal> {
        // An OAuth principal's tasks are its own (by issuer and subject), as a static
        // token's are its token's.
        let owner = match caller.binding() {
            Some(binding) if caller.issuer.is_some() => TaskOwner::Principal(binding.into_owned()),
            _ => TaskOwner::Caller(caller.token),
        };
        self.build(
            SessionInfo {
                id: None,
                client: caller.client.clone(),
                scopes: caller.scopes.clone(),
                issuer: caller.issuer.clone(),
            },
            Some(owner),
        )
        .await
    }

    /// A new session for `client` (stateful mode).
    pub(crate) async fn create(&self, caller: &Caller) -> Result<Session, Refusal> {
        let Some(key) = &self.settings.key else {
            return self.ephemeral(caller).await;
        };
        let client = caller.client.as_deref();
        self.make_room()?;
        let id = key
            .issue(caller.binding().as_deref())
            .map_err(|err| Refusal::Setup(err.to_string()))?;
        let session = self
            .build(
                SessionInfo {
                    id: Some(id.clone()),
                    client: client.map(str::to_owned),
                    scopes: caller.scopes.clone(),
                    issuer: caller.issuer.clone(),
                },
                None,
            )
            .await?;
        self.insert(id.clone(), session.clone());
        info!(session_id = %id, client = client.unwrap_or("-"), "session opened");
        Ok(session)
    }

    /// The session `id` names, rebuilt from the id if this process does not hold it.
    /// A rebuilt session (its `initialize` was answered by another process, or it was
    /// forgotten while idle) takes `revision`, the legacy revision the request names
    /// (`MCP-Protocol-Version`), as the one negotiated: it then answers as that
    /// revision does and tells its client of list changes (a policy or plugin reload
    /// on this process), as on the process that opened it.
    pub(crate) async fn find(
        &self,
        id: &str,
        caller: &Caller,
        revision: Option<crate::revision::Revision>,
    ) -> Result<Session, Refusal> {
        let Some(key) = &self.settings.key else {
            return Err(Refusal::NotFound);
        };
        if !key.verify(id, caller.binding().as_deref()) || self.is_terminated(id) {
            return Err(Refusal::NotFound);
        }
        if let Some(live) = self.lock().get_mut(id) {
            live.last_used = Instant::now();
            return Ok(live.session.clone());
        }
        self.make_room()?;
        let session = self
            .build(
                SessionInfo {
                    id: Some(id.to_owned()),
                    client: caller.client.clone(),
                    scopes: caller.scopes.clone(),
                    issuer: caller.issuer.clone(),
                },
                None,
            )
            .await?;
        if let Some(revision) = revision.filter(|revision| !revision.is_modern()) {
            session.resume_as(revision);
        }
        info!(session_id = %id, "session resumed from its id (opened by another process, or forgotten while idle)");
        // Two requests may rebuild it at once: the first one in wins.
        Ok(self.insert(id.to_owned(), session))
    }

    fn insert(&self, id: String, session: Session) -> Session {
        self.lock()
            .entry(id)
            .or_insert(Live {
                session,
                last_used: Instant::now(),
                streaming: false,
            })
            .session
            .clone()
    }

    /// Ends session `id` (DELETE): its calls are cancelled and the id is refused from
    /// now on in this process.
    pub(crate) fn terminate(&self, id: &str) {
        if let Some(live) = self.lock().remove(id) {
            live.session.close();
        }
        self.tasks.forget_owner(id);
        let mut terminated = self
            .terminated
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *terminated;
        if let Some(random) = random_part(id).filter(|random| set.insert(*random)) {
            order.push_back(random);
            if order.len() > TERMINATED_MEMORY {
                if let Some(oldest) = order.pop_front() {
                    set.remove(&oldest);
                }
            }
        }
        info!(session_id = %id, "session terminated by the client");
    }

    fn is_terminated(&self, id: &str) -> bool {
        random_part(id).is_some_and(|random| {
            self.terminated
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .0
                .contains(&random)
        })
    }

    /// Marks whether a GET stream is open on `id`; `false` if one already is (opening).
    pub(crate) fn set_streaming(&self, id: &str, streaming: bool) -> bool {
        match self.lock().get_mut(id) {
            Some(live) if streaming && live.streaming => false,
            Some(live) => {
                live.streaming = streaming;
                true
            }
            None => !streaming,
        }
    }

    /// Ends every session (shutdown): their calls are cancelled.
    /// Counts a request refused with `status` before it reached a session.
    pub(crate) fn count_refusal(&self, status: axum::http::StatusCode) {
        self.counters.count_refusal(status.as_u16());
    }

    pub(crate) fn close_all(&self) {
        self.stop.cancel();
    }

    /// How many sessions this process holds.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Room for one more session: below the limit, or after forgetting the longest idle
    /// one (no call in flight, no stream open).
    fn make_room(&self) -> Result<(), Refusal> {
        let mut live = self.lock();
        if live.len() < self.settings.max_sessions.max(1) {
            return Ok(());
        }
        let idle = live
            .iter()
            .filter(|(_, l)| !l.streaming && l.session.calls_in_flight() == 0)
            .min_by_key(|(_, l)| l.last_used)
            .map(|(id, _)| id.clone());
        match idle {
            Some(id) => {
                debug!(session_id = %id, "forgot an idle session to make room (it comes back from its id)");
                live.remove(&id);
                Ok(())
            }
            None => Err(Refusal::Full),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use toolhost::registry::Registry;

    use super::*;

    fn named(name: &str) -> Caller {
        Caller {
            client: Some(name.to_owned()),
            ..Caller::default()
        }
    }

    fn sessions(max: usize) -> Sessions {
        Sessions::new(
            SessionSettings {
                key: Some(SessionKey::random().unwrap()),
                max_sessions: max,
            },
            Registries::shared(Arc::new(Registry::new())),
            Arc::default(),
            false,
        )
    }

    #[tokio::test]
    async fn sessions_come_back_from_their_id_and_stay_terminated() {
        let sessions = sessions(2);
        let a = sessions.create(&Caller::default()).await.unwrap();
        let id = a.environment().session_id.clone();
        assert!(sessions.find(&id, &Caller::default(), None).await.is_ok());
        assert_eq!(
            sessions.find(&id, &named("x"), None).await.unwrap_err(),
            Refusal::NotFound
        );
        // Forgotten to make room (idle), then found again from its id.
        sessions.create(&Caller::default()).await.unwrap();
        sessions.create(&Caller::default()).await.unwrap();
        assert_eq!(sessions.len(), 2);
        let again = sessions.find(&id, &Caller::default(), None).await.unwrap();
        assert_eq!(again.environment().session_id, id);
        sessions.terminate(&id);
        assert!(again.is_closed());
        assert_eq!(
            sessions
                .find(&id, &Caller::default(), None)
                .await
                .unwrap_err(),
            Refusal::NotFound
        );
    }

    #[tokio::test]
    async fn busy_sessions_are_never_forgotten() {
        let sessions = sessions(1);
        let a = sessions.create(&Caller::default()).await.unwrap();
        let id = a.environment().session_id.clone();
        assert!(sessions.set_streaming(&id, true));
        assert!(
            !sessions.set_streaming(&id, true),
            "one GET stream at a time"
        );
        assert_eq!(
            sessions.create(&Caller::default()).await.unwrap_err(),
            Refusal::Full
        );
        assert!(sessions.set_streaming(&id, false));
        assert!(sessions.create(&Caller::default()).await.is_ok());
    }
}
