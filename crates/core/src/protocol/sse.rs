//! An incremental, sans-IO decoder of Server-Sent Events.
//!
//! Bytes are fed as they arrive from the network, split anywhere; complete events are handed
//! to a callback. Lines end in `\n` or `\r\n`; an event ends at a blank line; `data:` lines are
//! joined with `\n`; the space after the colon is optional; comment lines (`:`, used for pings)
//! and unknown fields are skipped; `event:` names the event. Bare-`\r` line endings are not
//! supported (no OpenAI-compatible server uses them).
//!
//! The common case allocates nothing: an event that lies inside one read and has one `data:`
//! line is handed out as a slice of that read. Events that span reads, or have several `data:`
//! lines, are assembled in buffers the decoder owns and reuses.

use memchr::memchr;

/// Lines and events longer than this are an error, so a misbehaving server cannot make the
/// decoder buffer without bound.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One decoded event. Borrowed from the input or from the decoder, valid during the callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, when the event had one.
    pub event: Option<&'a [u8]>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a [u8],
}

impl SseEvent<'_> {
    /// Whether this is the OpenAI end-of-stream marker `data: [DONE]`.
    pub fn is_done(&self) -> bool {
        self.data.trim_ascii() == b"[DONE]"
    }
}

/// Why the decoder gave up on a stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE event exceeded {limit} bytes without ending")]
    TooLarge { limit: usize },
}

/// The decoder. One per response stream; reusable after [`SseDecoder::reset`].
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of a line whose end has not arrived yet.
    partial_line: Vec<u8>,
    /// The event in progress when it spans reads: joined data, each line followed by `\n`
    /// (so it is empty exactly when no `data:` line has come yet).
    data: Vec<u8>,
    event: Vec<u8>,
    /// An `event:` line has come (its value may be empty).
    has_event: bool,
    /// Joins the data lines of a multi-line event that lies inside one read.
    scratch: Vec<u8>,
    max_event_bytes: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

/// One parsed line.
enum Line<'a> {
    Blank,
    Data(&'a [u8]),
    Event(&'a [u8]),
    Other,
}

fn parse_line(line: &[u8]) -> Line<'_> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Line::Blank;
    }
    if line[0] == b':' {
        return Line::Other;
    }
    let (name, value) = match memchr(b':', line) {
        Some(c) => {
            let v = &line[c + 1..];
            (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
        }
        None => (line, &b""[..]),
    };
    match name {
        b"data" => Line::Data(value),
        b"event" => Line::Event(value),
        _ => Line::Other,
    }
}

/// The event being read inside the current input slice, tracked by position.
#[derive(Default)]
struct Borrowed {
    start: usize,
    data_lines: usize,
    first_data: (usize, usize),
    event: Option<(usize, usize)>,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that rejects events longer than `max_event_bytes`.
    pub fn with_limit(max_event_bytes: usize) -> Self {
        Self {
            partial_line: Vec::new(),
            data: Vec::new(),
            event: Vec::new(),
            has_event: false,
            scratch: Vec::new(),
            max_event_bytes,
        }
    }

    /// Forgets any partial event, keeping the buffers' capacity.
    pub fn reset(&mut self) {
        self.partial_line.clear();
        self.clear_owned();
    }

    fn clear_owned(&mut self) {
        self.data.clear();
        self.event.clear();
        self.has_event = false;
    }

    fn owned_in_progress(&self) -> bool {
        self.has_data() || self.has_event
    }

    fn has_data(&self) -> bool {
        !self.data.is_empty()
    }

    /// Feeds one network read; calls `on_event` for every event it completes.
    pub fn feed<F>(&mut self, input: &[u8], mut on_event: F) -> Result<(), SseError>
    where
        F: FnMut(SseEvent<'_>),
    {
        let mut pos = 0;
        // A line carried over from the previous read: finish it first.
        if !self.partial_line.is_empty() {
            let Some(nl) = memchr(b'\n', input) else {
                self.partial_line.extend_from_slice(input);
                return self.check_size();
            };
            self.partial_line.extend_from_slice(&input[..nl]);
            let line = std::mem::take(&mut self.partial_line);
            let done = self.owned_line(&line, &mut on_event);
            self.partial_line = line;
            self.partial_line.clear();
            done?;
            pos = nl + 1;
        }
        // The rest of an event that began in an earlier read.
        while self.owned_in_progress() {
            let Some(nl) = memchr(b'\n', &input[pos..]) else {
                self.partial_line.extend_from_slice(&input[pos..]);
                return self.check_size();
            };
            let line = &input[pos..pos + nl];
            pos += nl + 1;
            self.owned_line(line, &mut on_event)?;
        }
        self.borrowed_events(input, pos, &mut on_event)
    }

    /// Signals the end of the stream: an event left without its closing blank line is
    /// dispatched if it has data (servers that close right after the last `data:` line lose
    /// nothing).
    pub fn finish<F>(&mut self, mut on_event: F) -> Result<(), SseError>
    where
        F: FnMut(SseEvent<'_>),
    {
        if !self.partial_line.is_empty() {
            let line = std::mem::take(&mut self.partial_line);
            let done = self.owned_line(&line, &mut on_event);
            self.partial_line = line;
            self.partial_line.clear();
            done?;
        }
        if self.has_data() {
            self.dispatch_owned(&mut on_event);
        }
        self.clear_owned();
        Ok(())
    }

    fn check_size(&self) -> Result<(), SseError> {
        if self.partial_line.len() + self.data.len() > self.max_event_bytes {
            return Err(SseError::TooLarge { limit: self.max_event_bytes });
        }
        Ok(())
    }

    /// Applies one complete line to the owned event in progress.
    fn owned_line<F>(&mut self, line: &[u8], on_event: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseEvent<'_>),
    {
        match parse_line(line) {
            Line::Blank => {
                if self.has_data() {
                    self.dispatch_owned(on_event);
                }
                self.clear_owned();
            }
            Line::Data(v) => {
                self.data.extend_from_slice(v);
                self.data.push(b'\n');
                self.check_size()?;
            }
            Line::Event(v) => {
                self.event.clear();
                self.event.extend_from_slice(v);
                self.has_event = true;
            }
            Line::Other => {}
        }
        Ok(())
    }

    fn dispatch_owned<F>(&self, on_event: &mut F)
    where
        F: FnMut(SseEvent<'_>),
    {
        let data = &self.data[..self.data.len().saturating_sub(1)];
        on_event(SseEvent { event: self.has_event.then_some(self.event.as_slice()), data });
    }

    /// Decodes events that start inside `input` at `pos`, borrowing from it; what is left
    /// unfinished at the end is copied into the owned buffers.
    fn borrowed_events<F>(&mut self, input: &[u8], pos: usize, on_event: &mut F) -> Result<(), SseError>
    where
        F: FnMut(SseEvent<'_>),
    {
        let mut pos = pos;
        let mut ev = Borrowed { start: pos, ..Borrowed::default() };
        while let Some(nl) = memchr(b'\n', &input[pos..]) {
            let line_start = pos;
            let line_end = pos + nl;
            pos = line_end + 1;
            match parse_line(&input[line_start..line_end]) {
                Line::Blank => {
                    if ev.data_lines > 0 {
                        self.dispatch_borrowed(input, &ev, line_start, on_event);
                    }
                    ev = Borrowed { start: pos, ..Borrowed::default() };
                }
                Line::Data(v) => {
                    if ev.data_lines == 0 {
                        let off = v.as_ptr() as usize - input.as_ptr() as usize;
                        ev.first_data = (off, off + v.len());
                    }
                    ev.data_lines += 1;
                }
                Line::Event(v) => {
                    let off = v.as_ptr() as usize - input.as_ptr() as usize;
                    ev.event = Some((off, off + v.len()));
                }
                Line::Other => {}
            }
        }
        // The unfinished event: its complete lines go to the owned buffers, the tail waits.
        let mut line_start = ev.start;
        while let Some(nl) = memchr(b'\n', &input[line_start..pos]) {
            let line = &input[line_start..line_start + nl];
            line_start += nl + 1;
            self.owned_line(line, on_event)?;
        }
        self.partial_line.extend_from_slice(&input[pos..]);
        self.check_size()
    }

    fn dispatch_borrowed<F>(&mut self, input: &[u8], ev: &Borrowed, end: usize, on_event: &mut F)
    where
        F: FnMut(SseEvent<'_>),
    {
        let event = ev.event.map(|(a, b)| &input[a..b]);
        if ev.data_lines == 1 {
            let (a, b) = ev.first_data;
            on_event(SseEvent { event, data: &input[a..b] });
            return;
        }
        self.scratch.clear();
        let mut line_start = ev.start;
        while let Some(nl) = memchr(b'\n', &input[line_start..end]) {
            if let Line::Data(v) = parse_line(&input[line_start..line_start + nl]) {
                self.scratch.extend_from_slice(v);
                self.scratch.push(b'\n');
            }
            line_start += nl + 1;
        }
        self.scratch.pop(); // the `\n` after the last line
        on_event(SseEvent { event, data: &self.scratch });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Owned {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
    }

    fn decode_pieces(pieces: &[&[u8]]) -> Result<Vec<Owned>, SseError> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let mut push = |e: SseEvent<'_>| out.push(Owned { event: e.event.map(<[u8]>::to_vec), data: e.data.to_vec() });
        for p in pieces {
            d.feed(p, &mut push)?;
        }
        d.finish(&mut push)?;
        Ok(out)
    }

    fn decode(s: &str) -> Vec<Owned> {
        decode_pieces(&[s.as_bytes()]).unwrap()
    }

    fn ev(event: Option<&str>, data: &str) -> Owned {
        Owned { event: event.map(|e| e.as_bytes().to_vec()), data: data.as_bytes().to_vec() }
    }

    #[test]
    fn frames_on_lf_and_crlf_with_or_without_space() {
        assert_eq!(decode("data: a\n\ndata:b\r\n\r\ndata:  c\n\n"), vec![ev(None, "a"), ev(None, "b"), ev(None, " c")]);
    }

    #[test]
    fn joins_multi_line_data_and_keeps_event_names() {
        assert_eq!(decode("event: error\ndata: x\ndata:\ndata: y\n\n"), vec![ev(Some("error"), "x\n\ny")]);
    }

    #[test]
    fn skips_comments_pings_and_events_without_data() {
        assert_eq!(decode(": ping\n\n:\n\nevent: keepalive\n\nid: 3\nretry: 10\ndata: z\n\n"), vec![ev(None, "z")]);
    }

    #[test]
    fn done_marker_is_recognised() {
        let mut d = SseDecoder::new();
        let mut seen = Vec::new();
        d.feed(b"data: [DONE]\n\ndata: {}\n\n", |e| seen.push(e.is_done())).unwrap();
        assert_eq!(seen, vec![true, false]);
    }

    #[test]
    fn an_unterminated_last_event_is_dispatched_at_the_end() {
        assert_eq!(decode("data: a\n\ndata: b"), vec![ev(None, "a"), ev(None, "b")]);
        assert_eq!(decode("data: a\n\n: only a comment"), vec![ev(None, "a")]);
    }

    #[test]
    fn a_crlf_split_between_reads_is_one_line_ending() {
        let out = decode_pieces(&[b"data: a\r", b"\n\r", b"\n"]).unwrap();
        assert_eq!(out, vec![ev(None, "a")]);
    }

    #[test]
    fn events_inside_one_read_borrow_from_it() {
        let input = b"data: hello\n\n";
        let mut d = SseDecoder::new();
        let mut borrowed = false;
        d.feed(input, |e| {
            borrowed = input.as_ptr_range().contains(&e.data.as_ptr());
        })
        .unwrap();
        assert!(borrowed);
    }

    #[test]
    fn an_endless_line_is_an_error_not_unbounded_memory() {
        let mut d = SseDecoder::with_limit(64);
        let chunk = [b'x'; 40];
        d.feed(b"data: ", |_| {}).unwrap();
        d.feed(&chunk, |_| {}).unwrap();
        assert_eq!(d.feed(&chunk, |_| {}), Err(SseError::TooLarge { limit: 64 }));
    }

    /// One generated event: optional comment before it, optional name, data lines.
    #[derive(Clone, Debug)]
    struct Gen {
        comment: bool,
        name: Option<String>,
        lines: Vec<(bool, String)>,
    }

    fn gen_event() -> impl Strategy<Value = Gen> {
        (
            any::<bool>(),
            proptest::option::of("[a-z]{1,8}"),
            proptest::collection::vec((any::<bool>(), "[ -~é€]{0,12}"), 0..4),
        )
            .prop_map(|(comment, name, lines)| Gen { comment, name, lines })
    }

    fn render(events: &[Gen], crlf: bool) -> (Vec<u8>, Vec<Owned>) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut s = String::new();
        let mut expected = Vec::new();
        for e in events {
            if e.comment {
                s.push_str(": ping");
                s.push_str(eol);
            }
            if let Some(n) = &e.name {
                s.push_str("event: ");
                s.push_str(n);
                s.push_str(eol);
            }
            for (space, line) in &e.lines {
                // Without the space, a value that starts with one would lose it.
                let space = *space || line.starts_with(' ');
                s.push_str(if space { "data: " } else { "data:" });
                s.push_str(line);
                s.push_str(eol);
            }
            s.push_str(eol);
            if !e.lines.is_empty() {
                let data: Vec<&str> = e.lines.iter().map(|(_, l)| l.as_str()).collect();
                expected.push(Owned {
                    event: e.name.as_ref().map(|n| n.as_bytes().to_vec()),
                    data: data.join("\n").into_bytes(),
                });
            }
        }
        (s.into_bytes(), expected)
    }

    proptest! {
        #[test]
        fn any_split_decodes_like_the_whole_stream(
            events in proptest::collection::vec(gen_event(), 0..8),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let (bytes, expected) = render(&events, crlf);
            let whole = decode_pieces(&[&bytes]).unwrap();
            prop_assert_eq!(&whole, &expected);

            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut last = 0;
            for p in points {
                pieces.push(&bytes[last..p]);
                last = p;
            }
            pieces.push(&bytes[last..]);
            let split = decode_pieces(&pieces).unwrap();
            prop_assert_eq!(split, expected);
        }
    }
}
