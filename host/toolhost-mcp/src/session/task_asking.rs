//! A call run as a task asking its user (2025-11-25): while a question is open the task
//! is `input_required`, and the question (`elicitation/create` tied to the task in
//! `_meta`) goes to the client where it can be seen: a `tasks/result` of the task that
//! is waiting (its HTTP event stream; MCP expects the client to call `tasks/result`
//! when it sees `input_required`), else the session's own channel (stdio: the output;
//! HTTP: the session's GET stream). A question no channel took when it was asked is
//! sent on the next `tasks/result` of the task that waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tracing::debug;

use toolhost::registry::{Interaction, InteractionFuture};

use super::interaction::SessionInteraction;
use super::{Message, Notifier, Outlet, Session, LOG_TARGET};
use crate::tasks::TaskStore;

/// Where a task's questions go ([`Outlet`] of its call's interaction).
pub(crate) struct TaskOutlet {
    /// The session's own notifier (shared with the session: whatever it is now).
    session: Arc<Mutex<Notifier>>,
    state: Mutex<OutletState>,
    /// Numbers the `tasks/result` waits, so one ending leaves a later one attached.
    waits: AtomicU64,
}

#[derive(Default)]
struct OutletState {
    /// The open question, until it is answered or withdrawn.
    pending: Option<Message>,
    /// Whether a channel took it.
    delivered: bool,
    /// The `tasks/result` waiting now: its number and its channel.
    waiter: Option<(u64, Notifier)>,
}

impl std::fmt::Debug for TaskOutlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOutlet").finish_non_exhaustive()
    }
}

impl TaskOutlet {
    pub(super) fn new(session: Arc<Mutex<Notifier>>) -> Self {
        Self {
            session,
            state: Mutex::default(),
            waits: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutletState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where a message goes now: the waiting `tasks/result`'s channel, else the
    /// session's.
    fn target(&self) -> Notifier {
        if let Some((_, waiter)) = &self.lock().waiter {
            return waiter.clone();
        }
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A `tasks/result` of the task waits on `channel`: the open question no channel
    /// took is sent there, and the task's next questions too until the wait ends
    /// (the guard dropped).
    pub(super) fn attach(self: &Arc<Self>, channel: Notifier) -> Attached {
        let number = self.waits.fetch_add(1, Ordering::Relaxed);
        let resend = {
            let mut state = self.lock();
            state.waiter = Some((number, channel.clone()));
            match &state.pending {
                Some(question) if !state.delivered => Some(question.clone()),
                _ => None,
            }
        };
        if let Some(question) = resend {
            let taken = channel.try_send(question);
            self.lock().delivered |= taken;
            debug!(target: LOG_TARGET, taken, "sent a task's open question on its tasks/result");
        }
        Attached {
            outlet: Arc::clone(self),
            number,
        }
    }

    /// The open question is answered or withdrawn: nothing to send again.
    fn settle(&self) {
        let mut state = self.lock();
        state.pending = None;
        state.delivered = false;
    }
}

impl Outlet for TaskOutlet {
    /// A question (`elicitation/create`): kept until it is settled, and sent where the
    /// client can see it now, if anywhere.
    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        {
            let mut state = self.lock();
            state.pending = Some(message.clone());
            state.delivered = false;
        }
        Box::pin(async move {
            let target = self.target();
            if target.is_connected() {
                // A question waits for room (as a plain call's does); nothing else of the
                // task's is sent this way.
                let taken = target.try_send(message.clone()) || {
                    target.send(message).await;
                    true
                };
                self.lock().delivered |= taken;
            }
        })
    }

    /// The question withdrawn (`notifications/cancelled`, no answer in time).
    fn try_send(&self, message: Message) -> bool {
        self.settle();
        self.target().try_send(message)
    }
}

/// A `tasks/result` attached to its task's questions ([`TaskOutlet::attach`]) until
/// dropped.
pub(crate) struct Attached {
    outlet: Arc<TaskOutlet>,
    number: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut state = self.outlet.lock();
        if state
            .waiter
            .as_ref()
            .is_some_and(|(number, _)| *number == self.number)
        {
            state.waiter = None;
        }
    }
}

/// The [`Interaction`] of a call run as a task: each question makes the task
/// `input_required` until it is settled (told to the client as a status change).
#[derive(Debug, Clone)]
pub(crate) struct TaskAsker(Arc<Asking>);

/// What [`TaskAsker`] shares with its questions' futures.
struct Asking {
    inner: SessionInteraction,
    outlet: Arc<TaskOutlet>,
    store: Arc<TaskStore>,
    task: String,
    session: Session,
    /// Questions open now (one at a time is allowed; a second is refused at once).
    open: AtomicUsize,
}

impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asking")
            .field("task", &self.task)
            .finish_non_exhaustive()
    }
}

impl TaskAsker {
    pub(super) fn new(
        inner: SessionInteraction,
        outlet: Arc<TaskOutlet>,
        store: Arc<TaskStore>,
        task: String,
        session: Session,
    ) -> Self {
        Self(Arc::new(Asking {
            inner,
            outlet,
            store,
            task,
            session,
            open: AtomicUsize::new(0),
        }))
    }
}

impl Asking {
    /// The task waits for its user (`asking`) or goes on: its status follows, and the
    /// client is told.
    fn asking(&self, asking: bool) {
        let changed = if asking {
            self.open.fetch_add(1, Ordering::AcqRel) == 0
        } else {
            self.open.fetch_sub(1, Ordering::AcqRel) == 1
        };
        if !changed {
            return;
        }
        if !asking {
            self.outlet.settle();
        }
        if let Some(task) = self.store.set_asking(&self.task, asking) {
            self.session.tell_status(&task);
        }
    }
}

impl Interaction for TaskAsker {
    fn confirm(&self, message: String) -> InteractionFuture<bool> {
        let this = Arc::clone(&self.0);
        Box::pin(async move {
            this.asking(true);
            let answer = this.inner.confirm(message).await;
            this.asking(false);
            answer
        })
    }

    fn ask(&self, message: String, schema: Value) -> InteractionFuture<Option<Value>> {
        let this = Arc::clone(&self.0);
        Box::pin(async move {
            this.asking(true);
            let answer = this.inner.ask(message, schema).await;
            this.asking(false);
            answer
        })
    }
}
