//! Printing errors: [`ErrorChain`] shows an error with its causes, each once.
//!
//! Every error type of this workspace follows one rule: an error that wraps another
//! returns it as [`source`](std::error::Error::source) and does not repeat its text, so
//! printing the chain (`anyhow`'s `{:#}`, or [`ErrorChain`]) shows each cause once. Hints
//! written for a model ("try again, or try another path") are added where an error
//! becomes a tool result, never in the error types themselves.

/// Displays an error and its causes ([`source`](std::error::Error::source)) on one line,
/// `outer: cause: root`, each once: the one cause-chain printer of this workspace, for a
/// log line or a message where the chain cannot be printed otherwise (a
/// `wasmtime::Error` is printed through its `AsRef<dyn Error>`). Errors of this
/// workspace never repeat their source in their own text, so printing the chain is how a
/// cause (an OS error) is shown. Each text is trimmed (a trap's backtrace ends in a
/// newline), and a cause whose text the line already holds (an error type of a library
/// that repeats its source, at any depth) is skipped.
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
        let mut line = self.0.to_string().trim().to_owned();
        let mut cause = self.0.source();
        while let Some(err) = cause {
            let text = err.to_string();
            let text = text.trim();
            if !line.contains(text) {
                line.push_str(": ");
                line.push_str(text);
            }
            cause = err.source();
        }
        f.write_str(&line)
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

    #[test]
    fn error_chain_skips_a_cause_an_outer_error_repeated_and_trims() {
        #[derive(Debug, thiserror::Error)]
        #[error("opening failed: root cause\n")]
        struct Top(#[source] Middle);
        #[derive(Debug, thiserror::Error)]
        #[error("reading the manifest")]
        struct Middle(#[source] std::io::Error);
        let err = Top(Middle(std::io::Error::other("root cause")));
        assert_eq!(
            ErrorChain(&err).to_string(),
            "opening failed: root cause: reading the manifest"
        );
    }
}
