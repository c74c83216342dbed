//! What the server's failures become: a client error as a [`StateError`] (auth, time
//! limit, unreachable, a result too large, garbage), and a server's text clipped
//! before an error repeats it.

use std::time::Duration;

use redis::RedisError;

use crate::state::capped::REFUSED;
use crate::state::StateError;

/// The most characters of a server's text an error repeats.
const MAX_ECHOED_CHARS: usize = 160;

/// `text` as an error repeats it: at most [`MAX_ECHOED_CHARS`] characters (a server's
/// answer can be as long as it likes), cut with an ellipsis.
pub(super) fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_ECHOED_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The size in the GET script's refusal of a result past the cap (`TOOLARGE SIZE`, which
/// the client shows as `"TOOLARGE": SIZE`).
fn too_large(text: &str) -> Option<usize> {
    let (_, rest) = text.split_once("TOOLARGE")?;
    let digits: String = rest
        .trim_start_matches(|c: char| !c.is_ascii_digit())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A [`RedisError`] as a [`StateError`].
pub(super) fn state_error(err: &RedisError, timeout: Duration) -> StateError {
    let full = err.to_string();
    let text = clip(&full);
    if err.kind() == redis::ErrorKind::AuthenticationFailed
        || text.contains("WRONGPASS")
        || text.contains("NOAUTH")
    {
        StateError::Auth(text)
    } else if full.contains(REFUSED) {
        // Cut by the reply bound (`Capped`): not a broken connection, a hostile answer.
        StateError::Garbage(text)
    } else if err.is_timeout() {
        StateError::Timeout(timeout)
    } else if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        StateError::Unreachable(text)
    } else if let Some(size) = too_large(&full) {
        StateError::TooLarge(size, 0)
    } else {
        StateError::Garbage(text)
    }
}
