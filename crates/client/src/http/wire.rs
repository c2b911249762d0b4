//! HTTP/1.1 on the wire, without I/O: a response head parsed from the bytes read so far
//! (`httparse`), and a response body taken out of its framing (chunked, by length, or up to
//! the close) where it lies in the read buffer, so that body bytes are never copied or
//! allocated on their way to the event parser.

use http::StatusCode;

/// The most headers a response head may carry.
const MAX_HEADERS: usize = 64;

/// A response the client cannot read: the connection is not used again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("the response head is not HTTP/1.x: {0}")]
    Head(String),
    #[error("the response head is longer than {0} bytes")]
    HeadTooLong(usize),
    #[error("a bad chunk size line in the chunked body")]
    ChunkSize,
    #[error("a chunk of the chunked body is not followed by CRLF")]
    ChunkEnd,
    #[error("the connection closed before the body ended")]
    Truncated,
}

/// How a body's end is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    Chunked,
    Length(u64),
    /// Up to the close of the connection.
    Close,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    pub status: StatusCode,
    /// The reason phrase, when the server sent one other than the canonical one.
    pub reason: Option<String>,
    pub framing: Framing,
    /// Whether the connection may carry another request after this body.
    pub keep_alive: bool,
    /// Bytes of the input the head took (up to and including its blank line).
    pub len: usize,
}

/// Parses a response head at the start of `buf`; `None` while it is incomplete. An
/// informational (1xx) head comes back as such, with no body: the caller drops it and parses
/// the next.
pub(crate) fn parse_head(buf: &[u8]) -> Result<Option<Head>, WireError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(WireError::Head(e.to_string())),
    };
    let code = resp.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|e| WireError::Head(e.to_string()))?;
    let reason = resp.reason.filter(|r| !r.is_empty() && Some(*r) != status.canonical_reason()).map(str::to_string);
    let mut chunked = false;
    let mut length = None;
    let mut close = resp.version == Some(0);
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked =
                h.value.rsplit(|&b| b == b',').next().is_some_and(|last| trim(last).eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(trim(h.value)).ok().and_then(|s| s.parse::<u64>().ok());
            length = Some(n.ok_or_else(|| WireError::Head("a bad Content-Length".to_string()))?);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = trim(token);
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && resp.version == Some(0) {
                    close = false;
                }
            }
        }
    }
    let bodiless = status.is_informational() || code == 204 || code == 304;
    let framing = match (bodiless, chunked, length) {
        (true, _, _) => Framing::Length(0),
        (_, true, _) => Framing::Chunked,
        (_, _, Some(n)) => Framing::Length(n),
        _ => Framing::Close,
    };
    let keep_alive = !close && framing != Framing::Close;
    Ok(Some(Head { status, reason, framing, keep_alive, len }))
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Where a body decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a chunk-size line: its value so far, whether an extension (`;...`) began, and
    /// whether a CR was seen.
    Size {
        value: u64,
        digits: u32,
        ext: bool,
        cr: bool,
    },
    /// Inside a chunk, with this many data bytes to go.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd {
        cr: bool,
    },
    /// After the last chunk: trailer lines until an empty one; `len` of the current line.
    Trailer {
        len: u32,
        cr: bool,
    },
    /// A body of known length, this many bytes to go.
    Length(u64),
    /// A body up to the close.
    Close,
    Done,
}

/// Takes body bytes out of their framing.
#[derive(Debug, Clone)]
pub(crate) struct BodyDecoder {
    state: State,
}

impl BodyDecoder {
    pub(crate) fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Chunked => State::Size { value: 0, digits: 0, ext: false, cr: false },
            Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Close => State::Close,
        };
        Self { state }
    }

    /// Whether the whole body has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads framing from the start of `input` up to the next body bytes. Returns how many
    /// bytes of `input` were taken and, within them, the range of body bytes (at the end of
    /// the taken part); no range when `input` ran out first or the body ended.
    pub(crate) fn next(&mut self, input: &[u8]) -> Result<(usize, Option<std::ops::Range<usize>>), WireError> {
        let mut i = 0;
        while i < input.len() {
            match &mut self.state {
                State::Done => break,
                State::Close => {
                    return Ok((input.len(), Some(i..input.len())));
                }
                State::Length(left) | State::Data(left) => {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(input.len() - i);
                    *left -= take as u64;
                    if *left == 0 {
                        self.state = match self.state {
                            State::Data(_) => State::DataEnd { cr: false },
                            _ => State::Done,
                        };
                    }
                    return Ok((i + take, Some(i..i + take)));
                }
                State::Size { value, digits, ext, cr } => {
                    let b = input[i];
                    i += 1;
                    if *cr {
                        if b != b'\n' || *digits == 0 {
                            return Err(WireError::ChunkSize);
                        }
                        self.state =
                            if *value == 0 { State::Trailer { len: 0, cr: false } } else { State::Data(*value) };
                    } else if b == b'\r' {
                        *cr = true;
                    } else if *ext {
                        // A chunk extension is ignored up to the line's end.
                    } else if let Some(d) = (b as char).to_digit(16) {
                        if *digits >= 16 {
                            return Err(WireError::ChunkSize);
                        }
                        *value = *value << 4 | u64::from(d);
                        *digits += 1;
                    } else if b == b';' || b == b' ' || b == b'\t' {
                        *ext = true;
                    } else {
                        return Err(WireError::ChunkSize);
                    }
                }
                State::DataEnd { cr } => {
                    let b = input[i];
                    i += 1;
                    match (*cr, b) {
                        (false, b'\r') => *cr = true,
                        (true, b'\n') => self.state = State::Size { value: 0, digits: 0, ext: false, cr: false },
                        _ => return Err(WireError::ChunkEnd),
                    }
                }
                State::Trailer { len, cr } => {
                    let b = input[i];
                    i += 1;
                    if *cr {
                        if b != b'\n' {
                            return Err(WireError::ChunkEnd);
                        }
                        if *len == 0 {
                            self.state = State::Done;
                        } else {
                            *len = 0;
                            *cr = false;
                        }
                    } else if b == b'\r' {
                        *cr = true;
                    } else {
                        *len = len.saturating_add(1);
                    }
                }
            }
        }
        Ok((i, None))
    }

    /// The connection closed: the end of a body read up to the close, an error otherwise.
    pub(crate) fn eof(&mut self) -> Result<(), WireError> {
        match self.state {
            State::Close | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            _ => Err(WireError::Truncated),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Decodes `wire` fed in pieces of `step` bytes; the body and whether it ended.
    fn decode(framing: Framing, wire: &[u8], step: usize) -> Result<(Vec<u8>, bool), WireError> {
        let mut d = BodyDecoder::new(framing);
        let mut body = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            pending.extend_from_slice(piece);
            loop {
                let (taken, data) = d.next(&pending)?;
                if let Some(r) = data {
                    body.extend_from_slice(&pending[r]);
                }
                pending.drain(..taken);
                if taken == 0 || pending.is_empty() || d.is_done() {
                    break;
                }
            }
        }
        Ok((body, d.is_done()))
    }

    fn chunked(parts: &[Vec<u8>], trailer: &str) -> Vec<u8> {
        let mut wire = Vec::new();
        for p in parts.iter().filter(|p| !p.is_empty()) {
            wire.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
            wire.extend_from_slice(p);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(format!("0\r\n{trailer}\r\n").as_bytes());
        wire
    }

    #[test]
    fn heads_give_status_reason_framing_and_reuse() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nrest").unwrap().unwrap();
        assert_eq!(
            (h.status, h.reason, h.framing, h.keep_alive, h.len),
            (StatusCode::OK, None, Framing::Chunked, true, 47)
        );
        let h =
            parse_head(b"HTTP/1.1 429 Slow Down\r\ncontent-length: 5\r\nConnection: close\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.reason.as_deref(), h.framing, h.keep_alive), (Some("Slow Down"), Framing::Length(5), false));
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = parse_head(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(0), true));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nconte"), Ok(None));
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
    }

    #[test]
    fn chunk_extensions_and_trailers_are_skipped() {
        let wire = b"5;name=v\r\nhello\r\n1 \r\n!\r\n0\r\nx-trailer: 1\r\n\r\n";
        assert_eq!(decode(Framing::Chunked, wire, 3), Ok((b"hello!".to_vec(), true)));
    }

    #[test]
    fn bad_framing_is_an_error_and_a_short_body_is_truncated() {
        assert_eq!(decode(Framing::Chunked, b"zz\r\n", 4), Err(WireError::ChunkSize));
        assert_eq!(decode(Framing::Chunked, b"\r\n", 4), Err(WireError::ChunkSize));
        assert_eq!(decode(Framing::Chunked, b"2\r\nabX", 8), Err(WireError::ChunkEnd));
        let mut d = BodyDecoder::new(Framing::Length(4));
        assert_eq!(d.next(b"ab"), Ok((2, Some(0..2))));
        assert_eq!(d.eof(), Err(WireError::Truncated));
        let mut d = BodyDecoder::new(Framing::Close);
        assert_eq!(d.next(b"ab"), Ok((2, Some(0..2))));
        assert_eq!(d.eof(), Ok(()));
        assert!(d.is_done());
    }

    proptest! {
        #[test]
        fn chunked_bodies_come_out_whole_however_the_reads_fall(
            parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8),
            step in 1usize..64,
        ) {
            let wire = chunked(&parts, "");
            let (body, done) = decode(Framing::Chunked, &wire, step).unwrap();
            prop_assert_eq!(body, parts.concat());
            prop_assert!(done);
        }

        #[test]
        fn a_length_body_stops_at_its_length(body in proptest::collection::vec(any::<u8>(), 0..100), step in 1usize..32) {
            let mut wire = body.clone();
            wire.extend_from_slice(b"next response");
            let mut d = BodyDecoder::new(Framing::Length(body.len() as u64));
            let mut out = Vec::new();
            let mut at = 0;
            while !d.is_done() {
                let end = (at + step).min(wire.len());
                let (taken, data) = d.next(&wire[at..end]).unwrap();
                if let Some(r) = data {
                    out.extend_from_slice(&wire[at..end][r]);
                }
                at += taken;
            }
            prop_assert_eq!(out, body);
            prop_assert_eq!(&wire[at..], b"next response");
        }

        #[test]
        fn the_decoder_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200), step in 1usize..16) {
            let _ = decode(Framing::Chunked, &bytes, step);
        }
    }
}
