//! Reading one JSON-RPC message per line, never holding more than the line limit
//! ([`McpLimits::max_line_bytes`](super::McpLimits::max_line_bytes)).

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What one bounded line read produced.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A whole line is in the buffer (the last one may lack its newline).
    Complete,
    /// The line passed the limit and was dropped.
    TooLong,
    /// The input ended.
    Eof,
}

/// Reads one line into `line`, never letting it grow past `max` bytes. A line over the
/// limit is reported once and its rest is skipped on the following calls (`discarding`).
pub(super) async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
    discarding: &mut bool,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() || *discarding {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        let outcome = if *discarding {
            if newline.is_some() {
                *discarding = false;
            }
            None
        } else if line.len() + take > max + 1 {
            line.clear();
            *discarding = newline.is_none();
            Some(Line::TooLong)
        } else {
            line.extend_from_slice(&available[..take]);
            newline.map(|_| Line::Complete)
        };
        input.consume(take);
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
    }
}

/// The line without its newline, carriage return and surrounding blanks.
pub(super) fn trim_line(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, &'static str>> {
        let mut reader = BufReader::with_capacity(4, input);
        let (mut line, mut discarding, mut out) = (Vec::new(), false, Vec::new());
        loop {
            match read_line(&mut reader, &mut line, &mut discarding, max)
                .await
                .unwrap()
            {
                Line::Eof => return out,
                Line::TooLong => out.push(Err("too long")),
                Line::Complete => {
                    out.push(Ok(String::from_utf8(trim_line(&line).to_vec()).unwrap()));
                    line.clear();
                }
            }
        }
    }

    #[tokio::test]
    async fn bounded_lines() {
        assert_eq!(
            lines(b"ab\r\ncdefgh\n\nxyz", 5).await,
            [
                Ok("ab".into()),
                Err("too long"),
                Ok("".into()),
                Ok("xyz".into())
            ]
        );
        // Exactly at the limit (newline not counted) passes; the rest of a long line is skipped.
        assert_eq!(
            lines(b"12345\n123456789012\nok\n", 5).await,
            [Ok("12345".into()), Err("too long"), Ok("ok".into())]
        );
        assert_eq!(lines(b"", 5).await, []);
    }
}
