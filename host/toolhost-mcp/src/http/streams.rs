//! Answers as server-sent events: a call's answer as plain JSON or as an event stream
//! (its progress and log lines first), and the queue ([`ChannelOutlet`]) a call or a
//! session stream sends its messages through.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::session::{Message, Outlet};

use super::admit::Accept;
use super::LOG_TARGET;
use super::{json, refuse, STREAM_QUEUE};

/// The plain answer to a call: its response, or `204` when it was cancelled (a cancelled
/// request is not answered).
pub(super) fn answer(
    accepts: &Accept,
    joined: Result<Option<Message>, tokio::task::JoinError>,
) -> Response {
    match joined {
        Ok(Some(reply)) => answer_one(accepts, reply),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => {
            warn!(target: LOG_TARGET, "a tool call task failed outside the registry: {err}");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the tool call failed inside the server",
            )
        }
    }
}

/// The answer to a call that ended before it was answered: plain JSON, or an event
/// stream when the call sent messages of its own meanwhile (a quick call that logged or
/// reported progress: those lines come first, then the answer).
pub(super) fn finished(
    accepts: &Accept,
    joined: Result<Option<Message>, tokio::task::JoinError>,
    messages: &mut mpsc::Receiver<Message>,
) -> Response {
    let mut sent = Vec::new();
    while let Ok(message) = messages.try_recv() {
        sent.push(message);
    }
    if sent.is_empty() {
        return answer(accepts, joined);
    }
    match joined {
        Ok(Some(reply)) => sent.push(reply),
        Ok(None) => {}
        Err(err) => {
            warn!(target: LOG_TARGET, "a tool call task failed outside the registry: {err}");
        }
    }
    let (frames, receiver) = mpsc::channel::<Bytes>(sent.len());
    for message in &sent {
        // Room for every frame: none waits.
        let _ = frames.try_send(event(message));
    }
    sse_response(receiver)
}

/// One answer: plain JSON, or a one-event stream for a client that takes no JSON.
pub(super) fn answer_one(accepts: &Accept, reply: Message) -> Response {
    if accepts.json {
        return json(StatusCode::OK, reply.to_bytes());
    }
    let (frames, receiver) = mpsc::channel(1);
    // Room for one: this never waits, and the receiver is still here.
    let _ = frames.try_send(event(&reply));
    sse_response(receiver)
}

/// One server-sent event carrying `message`.
pub(super) fn event(message: &Message) -> Bytes {
    let mut frame = Vec::with_capacity(message.len() + 24);
    frame.extend_from_slice(b"event: message\ndata: ");
    for part in message.parts() {
        frame.extend_from_slice(part);
    }
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

pub(super) fn sse_response(frames: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(frames, |mut frames| async move {
        frames
            .recv()
            .await
            .map(|frame| (Ok::<_, Infallible>(frame), frames))
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// A call answered as an event stream: `first`, the call's further messages, then its
/// answer. A client that goes away cancels the call (`guard`).
pub(super) fn event_stream(
    first: Message,
    mut messages: mpsc::Receiver<Message>,
    mut task: tokio::task::JoinHandle<Option<Message>>,
    guard: tokio_util::sync::DropGuard,
) -> Response {
    let (frames, receiver) = mpsc::channel::<Bytes>(STREAM_QUEUE);
    tokio::spawn(async move {
        let _guard = guard;
        if frames.send(event(&first)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                Some(message) = messages.recv() => {
                    if frames.send(event(&message)).await.is_err() {
                        return;
                    }
                }
                joined = &mut task => {
                    while let Ok(message) = messages.try_recv() {
                        if frames.send(event(&message)).await.is_err() {
                            return;
                        }
                    }
                    match joined {
                        Ok(Some(reply)) => { let _ = frames.send(event(&reply)).await; }
                        Ok(None) => {}
                        Err(err) => warn!(target: LOG_TARGET, "a tool call task failed outside the registry: {err}"),
                    }
                    return;
                }
                () = frames.closed() => return,
            }
        }
    });
    sse_response(receiver)
}

/// Messages into an event stream's queue. `lossy`: when the queue is full the message
/// is dropped (a session stream must not hold up the calls that log to it); else the
/// sender waits.
pub(super) struct ChannelOutlet {
    pub(super) sender: mpsc::Sender<Message>,
    pub(super) lossy: bool,
}

impl Outlet for ChannelOutlet {
    fn try_send(&self, message: Message) -> bool {
        self.sender.try_send(message).is_ok()
    }

    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if self.lossy {
                if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(message) {
                    debug!(target: LOG_TARGET, "a session event stream is full: dropped a notification");
                }
            } else {
                let _ = self.sender.send(message).await;
            }
        })
    }
}
