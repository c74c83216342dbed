//! What a call's queue entry holds in place: its texts ([`Texts`]) and its steps
//! ([`CallSteps`]), so that for a common call nothing allocated on the call's thread is
//! freed on the export thread. Memory freed on another thread than the one that
//! allocated it goes back to that thread's malloc arena under the arena's lock: with a
//! few such frees per call the arenas contended, trimmed and grew again (20 times the
//! `mprotect` and 15 times the `futex` calls of a host without traces, figure 13).

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

/// A call's steps: copied into the entry when there are at most [`INLINE_STEPS`] and
/// none carries text (the record's list is then freed by the call's thread), else the
/// record's list moved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CallSteps {
    inline: [Step; INLINE_STEPS],
    len: usize,
    moved: Vec<Step>,
}

/// What fills an unused place of [`CallSteps`].
const UNUSED: Step = Step {
    kind: StepKind::Instantiate,
    start: std::time::Duration::ZERO,
    end: std::time::Duration::ZERO,
    failed: false,
};

impl Default for CallSteps {
    fn default() -> Self {
        Self {
            inline: [UNUSED; INLINE_STEPS],
            len: 0,
            moved: Vec::new(),
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
        let plain = |step: &Step| {
            matches!(
                step.kind,
                StepKind::ArgumentCheck | StepKind::Instantiate | StepKind::GuestCall
            )
        };
        if touched.steps.len() <= INLINE_STEPS && touched.steps.iter().all(plain) {
            for (place, step) in steps.inline.iter_mut().zip(&touched.steps) {
                place.clone_from(step);
            }
            steps.len = touched.steps.len();
        } else {
            steps.moved = std::mem::take(&mut touched.steps);
        }
        steps
    }

    /// The steps, in the order they ended.
    pub(crate) fn as_slice(&self) -> &[Step] {
        if self.moved.is_empty() {
            self.inline.get(..self.len).unwrap_or_default()
        } else {
            &self.moved
        }
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
        assert!(CallSteps::take(None).as_slice().is_empty());
        let record = CallRecord::new();
        for kind in [
            StepKind::ArgumentCheck,
            StepKind::Instantiate,
            StepKind::GuestCall,
        ] {
            record.step(kind, record.now(), false);
        }
        let copied = CallSteps::take(Some(&record));
        assert_eq!(copied.as_slice(), record.touched().steps.as_slice());
        assert!(copied.moved.is_empty());
        assert_eq!(copied.as_slice().len(), 3);

        // A step with text (a path) is moved with the rest, in order.
        record.file_read("notes/a.md", 3, record.now(), true);
        let before = record.touched().steps.clone();
        let moved = CallSteps::take(Some(&record));
        assert_eq!(moved.as_slice(), before.as_slice());
        assert!(record.touched().steps.is_empty());

        // More plain steps than fit are moved too.
        let many = CallRecord::new();
        for _ in 0..=INLINE_STEPS {
            many.step(StepKind::GuestCall, many.now(), false);
        }
        assert_eq!(
            CallSteps::take(Some(&many)).as_slice().len(),
            INLINE_STEPS + 1
        );
    }
}
