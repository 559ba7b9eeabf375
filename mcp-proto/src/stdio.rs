//! Bounded newline framing for stdio (and any other byte stream of JSON-RPC lines).

/// A line longer than the frame limit: the reader cannot find the next frame boundary without
/// buffering without bound, so the stream must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong {
    /// Bytes seen of the line so far (at least the limit plus one).
    pub seen: usize,
}

/// Splits a byte stream into lines, refusing to buffer more than one frame's worth.
///
/// Feed bytes with [`push`](Self::push) (or write into [`spare`](Self::spare) and
/// [`commit`](Self::commit)), then take lines with [`next_line`](Self::next_line) until it
/// returns `None`. A trailing `\r` is stripped; blank lines are skipped, since they are not
/// frames and must not be answered.
#[derive(Debug)]
pub struct LineFramer {
    /// Input in `start..end`; past `end`, bytes already zeroed for the next read, kept so that a
    /// read does not pay for clearing its whole buffer again.
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    start: usize,
    /// End of the input in `buf`.
    end: usize,
    /// How far past `start` is known to hold no newline.
    scanned: usize,
    max: usize,
    failed: bool,
}

impl LineFramer {
    /// A framer for lines of at most `max_line` bytes (excluding the newline).
    pub fn new(max_line: usize) -> Self {
        Self { buf: Vec::new(), start: 0, end: 0, scanned: 0, max: max_line, failed: false }
    }

    /// Appends input bytes.
    pub fn push(&mut self, data: &[u8]) {
        let n = data.len();
        if let Some(spare) = self.spare(n).get_mut(..n) {
            spare.copy_from_slice(data);
        }
        self.commit(n, n);
    }

    /// A writable region of at least `min` bytes at the end of the buffer, for reading straight
    /// into; follow with [`commit`](Self::commit).
    pub fn spare(&mut self, min: usize) -> &mut [u8] {
        self.compact();
        let want = self.end.saturating_add(min);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        self.buf.get_mut(self.end..want).unwrap_or_default()
    }

    /// Keeps `n` bytes of the `spare_len`-byte region [`spare`](Self::spare) returned.
    pub fn commit(&mut self, spare_len: usize, n: usize) {
        self.end = self.end.saturating_add(n.min(spare_len)).min(self.buf.len());
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// The next complete line, or `None` when more input is needed.
    ///
    /// After a [`LineTooLong`] the framer yields nothing more.
    pub fn next_line(&mut self) -> Option<Result<&[u8], LineTooLong>> {
        loop {
            if self.failed {
                return None;
            }
            let unread = self.buf.get(self.start..self.end).unwrap_or_default();
            let from = self.scanned.min(unread.len());
            let found = unread.get(from..).unwrap_or_default().iter().position(|&b| b == b'\n');
            let Some(pos) = found.map(|p| p + from) else {
                self.scanned = unread.len();
                if unread.len() > self.max {
                    self.failed = true;
                    return Some(Err(LineTooLong { seen: unread.len() }));
                }
                return None;
            };
            if pos > self.max {
                self.failed = true;
                return Some(Err(LineTooLong { seen: pos }));
            }
            let begin = self.start;
            self.start += pos + 1;
            self.scanned = 0;
            let mut line = self.buf.get(begin..begin + pos).unwrap_or_default();
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Ok(self.buf.get(begin..begin + line.len()).unwrap_or_default()));
        }
    }

    /// Bytes buffered but not yet returned as a line (a partial last line at end of input).
    pub fn remainder(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(f: &mut LineFramer) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(Ok(l)) = f.next_line() {
            out.push(String::from_utf8(l.to_vec()).unwrap());
        }
        out
    }

    #[test]
    fn splits_across_pushes() {
        let mut f = LineFramer::new(100);
        f.push(b"ab");
        assert!(lines(&mut f).is_empty());
        f.push(b"c\r\n\n  \nde");
        assert_eq!(lines(&mut f), ["abc"]);
        f.push(b"f\n");
        assert_eq!(lines(&mut f), ["def"]);
        assert!(f.remainder().is_empty());
    }

    #[test]
    fn refuses_long_lines_without_buffering_them() {
        let mut f = LineFramer::new(4);
        f.push(b"12345");
        assert_eq!(f.next_line(), Some(Err(LineTooLong { seen: 5 })));
        assert_eq!(f.next_line(), None);
        let mut f = LineFramer::new(4);
        f.push(b"1234\n12345\n");
        assert_eq!(f.next_line(), Some(Ok(&b"1234"[..])));
        assert_eq!(f.next_line(), Some(Err(LineTooLong { seen: 5 })));
    }

    #[test]
    fn reads_of_every_size_give_the_same_lines() {
        let text = b"one\n\r\ntwo\r\nthree-is-longer\n\nfour\nfive";
        for chunk in 1..=text.len() {
            let mut f = LineFramer::new(100);
            let mut seen = Vec::new();
            for piece in text.chunks(chunk) {
                // A spare region larger than the piece, partly filled, as a short read leaves it.
                let s = f.spare(chunk + 3);
                s[..piece.len()].copy_from_slice(piece);
                f.commit(chunk + 3, piece.len());
                seen.extend(lines(&mut f));
            }
            assert_eq!(seen, ["one", "two", "three-is-longer", "four"], "reads of {chunk}");
            assert_eq!(f.remainder(), b"five", "reads of {chunk}");
        }
    }

    #[test]
    fn spare_and_commit() {
        let mut f = LineFramer::new(100);
        let s = f.spare(8);
        s[..3].copy_from_slice(b"hi\n");
        f.commit(8, 3);
        assert_eq!(lines(&mut f), ["hi"]);
    }
}
