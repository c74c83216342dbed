//! A `tracing` layer that records the message of every event (or of one target's), for
//! tests that check what reaches the host log.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer};

/// The messages of the events it sees, in order: every event's, or only those of
/// [`Capture::of_target`]'s target.
#[derive(Clone, Default)]
pub(super) struct Capture {
    messages: Arc<Mutex<Vec<String>>>,
    target: Option<&'static str>,
}

impl Capture {
    /// Records only the events whose target is `target`.
    pub(super) fn of_target(target: &'static str) -> Self {
        Self {
            target: Some(target),
            ..Self::default()
        }
    }

    /// What it recorded so far.
    pub(super) fn messages(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if self
            .target
            .is_some_and(|target| event.metadata().target() != target)
        {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        self.messages.lock().unwrap().push(message.0);
    }
}
