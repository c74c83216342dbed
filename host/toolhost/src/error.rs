//! Printing errors: [`ErrorChain`] shows an error with its causes, each once.
//!
//! Every error type of this workspace follows one rule: an error that wraps another
//! returns it as [`source`](std::error::Error::source) and does not repeat its text, so
//! printing the chain (`anyhow`'s `{:#}`, or [`ErrorChain`]) shows each cause once. Hints
//! written for a model ("try again, or try another path") are added where an error
//! becomes a tool result, never in the error types themselves.

/// Displays an error and its causes ([`source`](std::error::Error::source)) on one line,
/// `outer: cause: root`, each once: for a log line or a message where the chain cannot
/// be printed otherwise. Errors of this workspace never repeat their source in their own
/// text, so printing the chain is how a cause (an OS error) is shown; a cause whose text
/// the previous one already holds (an error type that repeats its source) is skipped.
///
/// ```
/// use toolhost::error::ErrorChain;
/// use toolhost::vfs::StorageError;
///
/// let err = StorageError::io("a.md", std::io::Error::other("disk on fire"));
/// assert_eq!(err.to_string(), "input/output error on \"a.md\"");
/// assert_eq!(ErrorChain(&err).to_string(), "input/output error on \"a.md\": disk on fire");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut previous = self.0.to_string();
        f.write_str(&previous)?;
        let mut cause = self.0.source();
        while let Some(err) = cause {
            let text = err.to_string();
            if !previous.contains(&text) {
                write!(f, ": {text}")?;
            }
            previous = text;
            cause = err.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_prints_each_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("repeats: {0}")]
        struct Repeats(#[source] std::io::Error);
        let io = || std::io::Error::other("root cause");
        assert_eq!(ErrorChain(&Outer(io())).to_string(), "outer: root cause");
        assert_eq!(
            ErrorChain(&Repeats(io())).to_string(),
            "repeats: root cause"
        );
    }
}
