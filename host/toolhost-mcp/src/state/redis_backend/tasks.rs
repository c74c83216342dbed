//! [`TaskBackend`] on the server: a task is a hash at `toolhost:task:{id}`, an
//! owner's task ids a set at `toolhost:owner:{owner}`; a record read back is checked
//! field by field.

use std::time::Duration;

use super::errors::clip;
use super::{RedisBackend, MAX_LISTED};
use crate::state::{
    millis, BoxFuture, CancelRefusal, Heartbeat, StateError, TaskBackend, TaskRecord, TaskStatus,
    LEASE_EXPIRED,
};

const TASK_PREFIX: &str = "toolhost:task:";
const OWNER_PREFIX: &str = "toolhost:owner:";

impl RedisBackend {
    /// The record of task `id` (any owner when `owner` is empty).
    async fn read(&self, owner: &str, id: &str) -> Result<Option<TaskRecord>, StateError> {
        let cap = self.max_result_bytes;
        let fields: Option<Vec<Vec<u8>>> = self
            .run(|mut conn| async move {
                self.scripts
                    .get
                    .key(format!("{TASK_PREFIX}{id}"))
                    .arg(LEASE_EXPIRED)
                    .arg(owner)
                    .arg(cap)
                    .invoke_async(&mut conn)
                    .await
            })
            .await?;
        fields
            .map(|fields| record_from_fields(id, fields, self.max_result_bytes))
            .transpose()
    }
}

/// A record from a hash's `HGETALL` answer (field, value, field, value…), checked.
fn record_from_fields(
    id: &str,
    fields: Vec<Vec<u8>>,
    max_result_bytes: usize,
) -> Result<TaskRecord, StateError> {
    let garbage = |what: &str| StateError::Garbage(format!("task {id}: {what}"));
    if !fields.len().is_multiple_of(2) || fields.len() > 16 {
        return Err(garbage("not a task record"));
    }
    let mut record = TaskRecord {
        id: id.to_owned(),
        owner: String::new(),
        status: TaskStatus::Failed,
        status_message: None,
        created_ms: 0,
        updated_ms: 0,
        ttl_ms: 0,
        result: None,
    };
    let mut status = None;
    let mut pairs = fields.into_iter();
    while let (Some(name), Some(value)) = (pairs.next(), pairs.next()) {
        let value = String::from_utf8(value).map_err(|_| garbage("a field is not UTF-8"))?;
        let number = || value.parse::<u64>().map_err(|_| garbage("a bad number"));
        match name.as_slice() {
            b"owner" => record.owner = value,
            b"status" => status = TaskStatus::parse(&value),
            b"message" => record.status_message = Some(value),
            b"created" => record.created_ms = number()?,
            b"updated" => record.updated_ms = number()?,
            b"ttl" => record.ttl_ms = number()?,
            b"result" => {
                if value.len() > max_result_bytes {
                    return Err(StateError::TooLarge(value.len(), max_result_bytes));
                }
                record.result = Some(value);
            }
            _ => {}
        }
    }
    record.status = status.ok_or_else(|| garbage("no status"))?;
    Ok(record)
}

/// `value`'s flag and text for a script (`"1", text` or `"0", ""`).
fn optional(value: Option<&str>) -> (&'static str, &str) {
    value.map_or(("0", ""), |value| ("1", value))
}

impl TaskBackend for RedisBackend {
    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        lease: Duration,
    ) -> BoxFuture<'a, Result<(), StateError>> {
        Box::pin(async move {
            let size = record.result.as_ref().map_or(0, String::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let (has_message, message) = optional(record.status_message.as_deref());
            let (has_result, result) = optional(record.result.as_deref());
            let created: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .create
                        .key(format!("{TASK_PREFIX}{}", record.id))
                        .key(format!("{OWNER_PREFIX}{}", record.owner))
                        .arg(LEASE_EXPIRED)
                        .arg(&record.id)
                        .arg(&record.owner)
                        .arg(record.status.as_str())
                        .arg(record.created_ms)
                        .arg(record.updated_ms)
                        .arg(record.ttl_ms.max(1))
                        .arg(millis(lease))
                        .arg(has_message)
                        .arg(message)
                        .arg(has_result)
                        .arg(result)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            if created == 1 {
                Ok(())
            } else {
                Err(StateError::Exists)
            }
        })
    }

    fn get<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRecord>, StateError>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Ok(None);
            }
            self.read(owner, id).await
        })
    }

    fn list<'a>(&'a self, owner: &'a str) -> BoxFuture<'a, Result<Vec<TaskRecord>, StateError>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Ok(Vec::new());
            }
            let set = format!("{OWNER_PREFIX}{owner}");
            let ids: Vec<String> = self
                .run(|mut conn| {
                    let set = set.clone();
                    async move {
                        redis::cmd("SRANDMEMBER")
                            .arg(set)
                            .arg(MAX_LISTED)
                            .query_async(&mut conn)
                            .await
                    }
                })
                .await?;
            let mut records = Vec::with_capacity(ids.len());
            let mut gone = Vec::new();
            for id in ids {
                match self.read(owner, &id).await? {
                    Some(record) => records.push(record),
                    None => gone.push(id),
                }
            }
            if !gone.is_empty() {
                // Forgotten tasks' ids; failing to drop them only costs a later read.
                let _: Result<i64, StateError> = self
                    .run(|mut conn| async move {
                        redis::cmd("SREM")
                            .arg(&set)
                            .arg(&gone)
                            .query_async(&mut conn)
                            .await
                    })
                    .await;
            }
            records.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
            Ok(records)
        })
    }

    fn cancel<'a>(
        &'a self,
        owner: &'a str,
        id: &'a str,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<TaskRecord, CancelRefusal>> {
        Box::pin(async move {
            if owner.is_empty() {
                return Err(CancelRefusal::NotFound);
            }
            let answer: String = self
                .run(|mut conn| async move {
                    self.scripts
                        .cancel
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(owner)
                        .arg(reason)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            match answer.as_str() {
                "none" => Err(CancelRefusal::NotFound),
                "ok" => self.read(owner, id).await?.ok_or(CancelRefusal::NotFound),
                other => match other.strip_prefix("ended ").and_then(TaskStatus::parse) {
                    Some(status) => Err(CancelRefusal::Ended(status)),
                    None => Err(
                        StateError::Garbage(format!("cancel answered {:?}", clip(other))).into(),
                    ),
                },
            }
        })
    }

    fn heartbeat<'a>(
        &'a self,
        id: &'a str,
        lease: Duration,
    ) -> BoxFuture<'a, Result<Heartbeat, StateError>> {
        Box::pin(async move {
            let answer: String = self
                .run(|mut conn| async move {
                    self.scripts
                        .heartbeat
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(millis(lease))
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            match answer.as_str() {
                "running" => Ok(Heartbeat::Running),
                "gone" => Ok(Heartbeat::Gone),
                other => TaskStatus::parse(other)
                    .map(Heartbeat::Ended)
                    .ok_or_else(|| {
                        StateError::Garbage(format!("heartbeat answered {:?}", clip(other)))
                    }),
            }
        })
    }

    fn finish<'a>(
        &'a self,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StateError>> {
        Box::pin(async move {
            let size = result.map_or(0, str::len);
            if size > self.max_result_bytes {
                return Err(StateError::TooLarge(size, self.max_result_bytes));
            }
            let (has_message, message) = optional(message);
            let (has_result, result) = optional(result);
            let done: i64 = self
                .run(|mut conn| async move {
                    self.scripts
                        .finish
                        .key(format!("{TASK_PREFIX}{id}"))
                        .arg(LEASE_EXPIRED)
                        .arg(status.as_str())
                        .arg(has_message)
                        .arg(message)
                        .arg(has_result)
                        .arg(result)
                        .invoke_async(&mut conn)
                        .await
                })
                .await?;
            Ok(done == 1)
        })
    }
}
