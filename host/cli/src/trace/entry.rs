//! What a call's queue entry holds in place: its texts ([`Texts`]) and its steps
//! ([`CallSteps`], 24 bytes a step without text), so that for a common call nothing allocated on the call's thread is
//! freed on the export thread. Memory freed on another thread than the one that
//! allocated it goes back to that thread's malloc arena under the arena's lock: with a
//! few such frees per call the arenas contended, trimmed and grew again (20 times the
//! `mprotect` and 15 times the `futex` calls of a host without traces, figure 13).

use std::borrow::Cow;
use std::time::Duration;

use toolhost::registry::{CallRecord, Step, StepKind};

/// Bytes of a call's texts (tool, session id, request id) kept in the entry itself.
pub(crate) const INLINE_TEXT: usize = 120;
/// Steps kept in the entry itself: a plugin call's arguments' check, instantiation and
/// guest call, and one more.
pub(crate) const INLINE_STEPS: usize = 4;

/// The tool's name, the session id and the request id, one after the other: in place
/// when they fit in [`INLINE_TEXT`] bytes, else in one allocation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Texts {
    /// In place: the bytes and how many are used.
    Inline([u8; INLINE_TEXT], usize),
    /// Too long to keep in place.
    Heap(Vec<u8>),
}

impl Texts {
    /// `parts` one after the other.
    pub(crate) fn new(parts: [&str; 3]) -> Self {
        let len: usize = parts.iter().map(|part| part.len()).sum();
        if len <= INLINE_TEXT {
            let mut bytes = [0u8; INLINE_TEXT];
            let mut at = 0;
            for part in parts {
                bytes[at..at + part.len()].copy_from_slice(part.as_bytes());
                at += part.len();
            }
            Self::Inline(bytes, len)
        } else {
            Self::Heap(parts.concat().into_bytes())
        }
    }

    /// All the texts' bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Self::Inline(bytes, len) => bytes.get(..*len).unwrap_or_default(),
            Self::Heap(bytes) => bytes,
        }
    }
}

/// A call's steps: kept in the entry, 24 bytes each, when there are at most
/// [`INLINE_STEPS`] and none carries text (the record's list is then freed by the call's
/// thread), else the record's list moved.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CallSteps {
    plain: [PlainStep; INLINE_STEPS],
    len: usize,
    moved: Vec<Step>,
}

/// A step without text: its kind, when it started and ended (nanoseconds from the
/// call's admission) and whether it failed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct PlainStep {
    kind: Plain,
    failed: bool,
    start: u64,
    end: u64,
}

/// The kinds of step [`PlainStep`] keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum Plain {
    #[default]
    ArgumentCheck,
    Instantiate,
    GuestCall,
}

impl PlainStep {
    /// `step` when it carries no text.
    fn of(step: &Step) -> Option<Self> {
        let kind = match step.kind {
            StepKind::ArgumentCheck => Plain::ArgumentCheck,
            StepKind::Instantiate => Plain::Instantiate,
            StepKind::GuestCall => Plain::GuestCall,
            _ => return None,
        };
        let nanos = |at: Duration| u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        Some(Self {
            kind,
            failed: step.failed,
            start: nanos(step.start),
            end: nanos(step.end),
        })
    }

    /// The step it keeps.
    fn step(self) -> Step {
        Step {
            kind: match self.kind {
                Plain::ArgumentCheck => StepKind::ArgumentCheck,
                Plain::Instantiate => StepKind::Instantiate,
                Plain::GuestCall => StepKind::GuestCall,
            },
            start: Duration::from_nanos(self.start),
            end: Duration::from_nanos(self.end),
            failed: self.failed,
        }
    }
}

impl CallSteps {
    /// The steps of `record`, taken out of it (the audit log, told first, reads only its
    /// lists of files and hosts).
    pub(crate) fn take(record: Option<&CallRecord>) -> Self {
        let mut steps = Self::default();
        let Some(record) = record else {
            return steps;
        };
        let mut touched = record.touched();
        if touched.steps.len() <= INLINE_STEPS {
            for (place, step) in steps.plain.iter_mut().zip(&touched.steps) {
                match PlainStep::of(step) {
                    Some(plain) => *place = plain,
                    None => {
                        steps.moved = std::mem::take(&mut touched.steps);
                        return steps;
                    }
                }
            }
            steps.len = touched.steps.len();
        } else {
            steps.moved = std::mem::take(&mut touched.steps);
        }
        steps
    }

    /// How many steps.
    pub(crate) fn len(&self) -> usize {
        if self.moved.is_empty() {
            self.len
        } else {
            self.moved.len()
        }
    }

    /// The steps, in the order they ended.
    pub(crate) fn each(&self) -> impl Iterator<Item = Cow<'_, Step>> {
        let plain = self
            .plain
            .iter()
            .take(if self.moved.is_empty() { self.len } else { 0 });
        plain
            .map(|plain| Cow::Owned(plain.step()))
            .chain(self.moved.iter().map(Cow::Borrowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_stay_in_place_long_ones_are_joined() {
        let short = Texts::new(["greet", "session-1", "7"]);
        assert!(matches!(short, Texts::Inline(..)));
        assert_eq!(short.bytes(), b"greetsession-17");
        let long_tool = "t".repeat(INLINE_TEXT);
        let long = Texts::new([&long_tool, "s", ""]);
        assert!(matches!(long, Texts::Heap(..)));
        assert_eq!(long.bytes(), format!("{long_tool}s").as_bytes());
        let exact = Texts::new([&"x".repeat(INLINE_TEXT - 2), "ab", ""]);
        assert!(matches!(exact, Texts::Inline(_, INLINE_TEXT)));
    }

    #[test]
    fn plain_steps_are_copied_and_others_moved() {
        let all = |steps: &CallSteps| steps.each().map(Cow::into_owned).collect::<Vec<_>>();
        assert_eq!(CallSteps::take(None).len(), 0);
        let record = CallRecord::new();
        for kind in [
            StepKind::ArgumentCheck,
            StepKind::Instantiate,
            StepKind::GuestCall,
        ] {
            record.step(kind, record.now(), false);
        }
        let copied = CallSteps::take(Some(&record));
        assert_eq!(all(&copied), record.touched().steps);
        assert!(copied.moved.is_empty());
        assert_eq!(copied.len(), 3);

        // A step with text (a path) is moved with the rest, in order.
        record.file_read("notes/a.md", 3, record.now(), true);
        let before = record.touched().steps.clone();
        let moved = CallSteps::take(Some(&record));
        assert_eq!(all(&moved), before);
        assert_eq!(moved.len(), 4);
        assert!(record.touched().steps.is_empty());

        // More plain steps than fit are moved too.
        let many = CallRecord::new();
        for _ in 0..=INLINE_STEPS {
            many.step(StepKind::GuestCall, many.now(), false);
        }
        assert_eq!(CallSteps::take(Some(&many)).len(), INLINE_STEPS + 1);
    }
}
