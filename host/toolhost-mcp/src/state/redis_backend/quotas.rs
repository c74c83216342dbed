//! [`QuotaCounter`] on the server: a count is a counter at
//! `toolhost:quota:{key}:{window index}`, counted and checked by one script.

use std::time::Duration;

use super::RedisBackend;
use crate::state::counter::{window_ms, Counted, QuotaCounter};
use crate::state::{BoxFuture, StateError};

const QUOTA_PREFIX: &str = "toolhost:quota:";

impl QuotaCounter for RedisBackend {
    fn count<'a>(
        &'a self,
        key: &'a str,
        amount: u64,
        limit: u64,
        window: Duration,
    ) -> BoxFuture<'a, Result<Counted, StateError>> {
        Box::pin(async move {
            let window = window_ms(window);
            let answer: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .count
                        .key(format!("{QUOTA_PREFIX}{key}"))
                        .arg(amount)
                        .arg(limit)
                        .arg(window)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            if answer == -1 {
                return Ok(Counted::Taken);
            }
            match u64::try_from(answer) {
                Ok(left) if (1..=window).contains(&left) => Ok(Counted::Refused {
                    retry_after: Duration::from_millis(left),
                }),
                _ => Err(StateError::Garbage(format!(
                    "a quota count answered {answer}"
                ))),
            }
        })
    }
}
