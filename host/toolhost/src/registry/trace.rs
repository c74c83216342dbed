//! [`TraceParent`]: the W3C trace context a client sends with a call (MCP's
//! `params._meta.traceparent`, or an HTTP `traceparent` header), carried to the
//! [`CallObserver`](super::CallObserver) so a trace exporter can parent the call's span.

/// A parsed W3C `traceparent` (version `00`): the trace a call belongs to and the
/// caller's span. [`TraceParent::parse`] is strict: anything else than exactly
/// `00-<32 lowercase hex>-<16 lowercase hex>-<2 lowercase hex>` with non-zero ids is
/// `None`, and a caller ignores it (never an error: tracing must not refuse a call).
///
/// ```
/// use toolhost::registry::TraceParent;
///
/// let parent = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
/// assert!(parent.sampled());
/// assert_eq!(parent.trace_id[0], 0x4b);
/// assert_eq!(TraceParent::parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id (16 bytes, not all zero).
    pub trace_id: [u8; 16],
    /// The caller's span id (8 bytes, not all zero).
    pub span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

/// The length of a version-00 `traceparent`: the longest text [`TraceParent::parse`]
/// looks at.
pub const TRACEPARENT_LEN: usize = 55;

impl TraceParent {
    /// Parses a version-00 `traceparent`; `None` for anything malformed (wrong length,
    /// upper-case or non-hex digits, an all-zero id, another version).
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != TRACEPARENT_LEN
            || &bytes[..3] != b"00-"
            || bytes[35] != b'-'
            || bytes[52] != b'-'
        {
            return None;
        }
        let mut trace_id = [0u8; 16];
        hex_into(&bytes[3..35], &mut trace_id)?;
        let mut span_id = [0u8; 8];
        hex_into(&bytes[36..52], &mut span_id)?;
        let mut flags = [0u8; 1];
        hex_into(&bytes[53..55], &mut flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags: flags[0],
        })
    }

    /// Whether the caller sampled its span (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The context of the `n`th child span of this one (an outgoing request's CLIENT
    /// span): the same trace and flags, a span id derived from this span's id and `n`
    /// (a bijective mix, so distinct for each `n`, never zero, and unpredictable to
    /// whoever does not know this span's id).
    ///
    /// ```
    /// use toolhost::registry::TraceParent;
    ///
    /// let call = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    /// let (first, second) = (call.child(0), call.child(1));
    /// assert_eq!((first.trace_id, first.flags), (call.trace_id, call.flags));
    /// assert!(first.span_id != call.span_id && first.span_id != second.span_id);
    /// ```
    #[must_use]
    pub fn child(&self, n: u64) -> Self {
        // splitmix64's finalizer of the parent's id offset by n steps of the golden
        // ratio (odd) and a constant of this use: distinct for each n.
        let mut z = u64::from_be_bytes(self.span_id)
            .wrapping_add(0x6368_696c_645f_6964)
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Self {
            span_id: if z == 0 { 1 } else { z }.to_be_bytes(),
            ..*self
        }
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("00-")?;
        for byte in self.trace_id {
            write!(f, "{byte:02x}")?;
        }
        f.write_str("-")?;
        for byte in self.span_id {
            write!(f, "{byte:02x}")?;
        }
        write!(f, "-{:02x}", self.flags)
    }
}

/// Lower-case hex digits into `out` (exactly twice its length); `None` on any other
/// character.
fn hex_into(hex: &[u8], out: &mut [u8]) -> Option<()> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    for (pair, byte) in hex.chunks_exact(2).zip(out.iter_mut()) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_a_good_one_and_prints_it_back() {
        let parent = TraceParent::parse(GOOD).unwrap();
        assert_eq!(
            parent.span_id,
            [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]
        );
        assert!(parent.sampled());
        assert_eq!(parent.to_string(), GOOD);
    }

    #[test]
    fn malformed_ones_are_none() {
        let huge = format!("{GOOD}{}", "a".repeat(1 << 20));
        for bad in [
            "",
            "00",
            &GOOD[..54],
            &format!("{GOOD}-"),
            &huge,
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:.80}");
        }
    }
}
