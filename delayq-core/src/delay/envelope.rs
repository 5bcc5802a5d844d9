//! The envelope stored under each message id (see `scripts/delay/prelude.lua` for the layout; the
//! scripts write it, Rust only reads it).

/// A parsed envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Handler runs that counted, including the current one when claimed.
    pub attempt: u32,
    /// The fence token of the current (last) claim, unique in the topic for all time; 0 when
    /// never claimed.
    pub token: u64,
    /// Per-message max_attempts, 0 for the listener's default.
    pub max_attempts: u32,
    /// When it was sent (ms since the epoch, Redis clock).
    pub enqueued_ms: u64,
    /// When it is or was due (ms since the epoch, Redis clock).
    pub due_ms: u64,
    /// The last handler error, or empty.
    pub last_error: String,
    /// Why it was dead-lettered, or empty.
    pub dead_reason: String,
    /// The sender's W3C `traceparent`, or empty (see `trace.rs`).
    pub trace: String,
    /// How long the id stays reserved once the message finished (`dedup_for`, ms), or 0.
    pub dedup_ms: u64,
    /// Its priority, 0-255 (128 when sent without one).
    pub priority: u8,
    /// Its key (`SendOptions::key`), or empty.
    pub key: String,
    /// The payload bytes (JSON as sent).
    pub payload: Vec<u8>,
}

impl Envelope {
    /// Parses a stored envelope; the error says what is wrong.
    ///
    /// # Errors
    /// What does not parse.
    pub fn parse(raw: &[u8]) -> Result<Self, String> {
        let (mut envelope, start) = Self::parse_header(raw)?;
        envelope.payload = raw[start..].to_vec();
        Ok(envelope)
    }

    /// [`parse`](Self::parse) of bytes the caller owns (a claim's reply): the payload keeps
    /// their buffer, the header moved out of its front, instead of a copy.
    pub(crate) fn parse_owned(mut raw: Vec<u8>) -> Result<Self, String> {
        let (mut envelope, start) = Self::parse_header(&raw)?;
        raw.drain(..start);
        envelope.payload = raw;
        Ok(envelope)
    }

    /// The envelope without its payload, and where the payload starts.
    fn parse_header(raw: &[u8]) -> Result<(Self, usize), String> {
        let nl = raw
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("no header line")?;
        let header = std::str::from_utf8(&raw[..nl]).map_err(|_| "header is not UTF-8")?;
        let unknown = || format!("unknown header {header:?}");
        // 8 to 12 fields (a message's): read into an array, not a vector (a claim parses one
        // header a message).
        let mut fields = [""; 12];
        let mut n = 0;
        for field in header.split(' ') {
            *fields.get_mut(n).ok_or_else(unknown)? = field;
            n += 1;
        }
        if n < 8 || fields[0] != "1" {
            return Err(unknown());
        }
        let fields = &fields[..n];
        // Digits only, as the scripts read a header (`decode` in prelude.lua): what they cannot
        // read must not be delivered (its delivery could not settle it).
        let num = |i: usize| -> Result<u64, String> {
            let f = fields[i];
            f.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| f.parse::<u64>().ok())
                .flatten()
                .ok_or_else(|| format!("header field {i} is not a number in {header:?}"))
        };
        let (err_len, reason_len) = (num(6)? as usize, num(7)? as usize);
        let trace_len = if fields.len() >= 9 {
            num(8)? as usize
        } else {
            0
        };
        let dedup_ms = if fields.len() >= 10 { num(9)? } else { 0 };
        let key_len = if fields.len() == 12 {
            num(11)? as usize
        } else {
            0
        };
        let priority = if fields.len() >= 11 {
            u8::try_from(num(10)?).map_err(|_| format!("priority over 255 in {header:?}"))?
        } else {
            128
        };
        let body = &raw[nl + 1..];
        // Checked: a hand-edited header's lengths could add up past usize (and wrap).
        let texts_len = [err_len, reason_len, trace_len, key_len]
            .into_iter()
            .try_fold(0usize, usize::checked_add)
            .filter(|&n| n <= body.len())
            .ok_or("lengths in the header exceed the envelope")?;
        let texts = &body[..texts_len];
        let trace_end = err_len + reason_len + trace_len;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let envelope = Envelope {
            attempt: u32::try_from(num(1)?)
                .map_err(|_| format!("attempt over 2^32 in {header:?}"))?,
            token: num(2)?,
            max_attempts: num(3)? as u32,
            enqueued_ms: num(4)?,
            due_ms: num(5)?,
            last_error: text(&texts[..err_len]),
            dead_reason: text(&texts[err_len..err_len + reason_len]),
            trace: text(&texts[err_len + reason_len..trace_end]),
            key: text(&texts[trace_end..]),
            dedup_ms,
            priority,
            payload: Vec::new(),
        };
        Ok((envelope, nl + 1 + texts.len()))
    }

    /// The envelope as the delivery of a claim with `token` sees it: a claim leaves the stored
    /// envelope as it is (see `token_field` in prelude.lua), and its delivery is one attempt
    /// more, under the claim's token.
    ///
    /// # Errors
    /// An attempt already at `u32::MAX`, which one more would overflow.
    pub fn delivered(mut self, token: u64) -> Result<Self, String> {
        self.attempt = self.attempt.checked_add(1).ok_or("attempt at 2^32 - 1")?;
        self.token = token;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_layout_the_scripts_write() {
        let e = Envelope::parse(b"1 2 3 0 100 200 4 2\nboomRM{\"a\":1}").unwrap();
        assert_eq!((e.attempt, e.token, e.max_attempts), (2, 3, 0));
        assert_eq!((e.enqueued_ms, e.due_ms), (100, 200));
        assert_eq!(e.last_error, "boom");
        assert_eq!(e.dead_reason, "RM");
        assert_eq!(e.payload, b"{\"a\":1}");
        assert_eq!(e.trace, "");
        let e = Envelope::parse(b"1 1 2 0 100 200 0 0 5\n00-ab{}").unwrap();
        assert_eq!(
            (e.trace.as_str(), e.payload.as_slice()),
            ("00-ab", &b"{}"[..])
        );
        assert_eq!(e.dedup_ms, 0);
        let e = Envelope::parse(b"1 1 2 0 100 200 0 0 0 60000\n{}").unwrap();
        assert_eq!((e.trace.as_str(), e.dedup_ms), ("", 60000));
        assert_eq!(e.payload, b"{}");
        assert_eq!(e.priority, 128);
        let e = Envelope::parse(b"1 1 2 0 100 200 0 0 0 0 192\n{}").unwrap();
        assert_eq!((e.dedup_ms, e.priority), (0, 192));
        assert!(Envelope::parse(b"1 1 2 0 100 200 0 0 0 0 256\n{}").is_err());
        let e = Envelope::parse(b"1 1 2 0 100 200 1 0 2 0 128 3\nEtrcus-{}").unwrap();
        assert_eq!(
            (e.last_error.as_str(), e.trace.as_str(), e.key.as_str()),
            ("E", "tr", "cus")
        );
        assert_eq!(e.payload, b"-{}");
    }

    #[test]
    fn parse_owned_reads_as_parse() {
        for raw in [
            &b"1 2 3 0 100 200 4 2\nboomRM{\"a\":1}"[..],
            b"1 1 2 0 100 200 1 0 2 0 128 3\nEtrcus-{}",
            b"1 1 2 0 100 200 0 0 0 0 192\n",
            b"1 1 2 0 100 200 0 0 5\n00-ab{}",
            b"1 1 2 0 100 200 0 0 5\n00-a",
            b"1 x 0 0 0 0 0 0\n",
        ] {
            assert_eq!(
                format!("{:?}", Envelope::parse_owned(raw.to_vec())),
                format!("{:?}", Envelope::parse(raw)),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert!(Envelope::parse(b"{\"a\":1}").is_err());
        assert!(Envelope::parse(b"2 0 0 0 0 0 0 0\n").is_err());
        assert!(Envelope::parse(b"1 0 0 0 0 0 9 0\nab").is_err());
        assert!(Envelope::parse(b"1 x 0 0 0 0 0 0\n").is_err());
        // Lengths that add up past usize (a hand edit) are an error, not a panic.
        assert!(Envelope::parse(b"1 0 0 0 0 0 18446744073709551615 1\nab").is_err());
        assert!(Envelope::parse_owned(b"1 0 0 0 0 0 1 18446744073709551615\nab".to_vec()).is_err());
        // Thirteen fields: not a header of this layout.
        assert!(Envelope::parse(b"1 0 0 0 0 0 0 0 0 0 128 0 0\n{}").is_err());
    }
}
