//! One HTTP/1.1 connection: its byte stream (TCP, or TLS over TCP), the bytes read from it
//! and not yet used, a request sent and its response head read, and whether an idle one is
//! still open.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::wire::{self, Head, WireError};
use super::{BodyError, HEAD_LIMIT, Opened, READ_BUFFER};

/// The byte stream under a connection.
#[derive(Debug)]
pub(super) enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Io {
    async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Plain(s) => s.read(buf).await,
            Io::Tls(s) => s.read(buf).await,
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Io::Plain(s) => s.write_all(bytes).await,
            Io::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    /// Whether an idle connection is still open and quiet: a read that would wait. A closed
    /// one reads its end (or an error); one that sent unasked-for bytes is not usable either.
    pub(super) fn is_idle_open(&mut self) -> bool {
        let mut byte = [0_u8; 1];
        let mut buf = ReadBuf::new(&mut byte);
        let mut cx = Context::from_waker(Waker::noop());
        let polled = match self {
            Io::Plain(s) => Pin::new(s).poll_read(&mut cx, &mut buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(&mut cx, &mut buf),
        };
        polled.is_pending()
    }
}

/// One HTTP/1.1 connection and the bytes read from it and not yet used (`buf[lo..hi]`).
pub(super) struct Conn {
    pub(super) io: Io,
    pub(super) buf: Vec<u8>,
    pub(super) lo: usize,
    pub(super) hi: usize,
    /// Requests this connection has completed.
    pub(super) served: u32,
    /// How long it took to open, until its first request takes it.
    pub(super) opened: Option<Opened>,
    /// When the last read returned: the clock is read there and nowhere else.
    pub(super) arrived: Instant,
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("io", &self.io)
            .field("buffered", &(self.hi - self.lo))
            .field("served", &self.served)
            .finish()
    }
}

impl Conn {
    pub(super) fn new(io: Io) -> Self {
        Self { io, buf: vec![0; READ_BUFFER], lo: 0, hi: 0, served: 0, opened: None, arrived: Instant::now() }
    }

    pub(super) fn unread(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    /// Reads more from the socket after the unread bytes; 0 at the end of the stream. Room is
    /// made by moving the unread bytes to the front, and the buffer grows only for a head
    /// longer than it.
    pub(super) async fn fill(&mut self) -> Result<usize, BodyError> {
        if self.lo == self.hi {
            (self.lo, self.hi) = (0, 0);
        } else if self.hi == self.buf.len() {
            if self.lo > 0 {
                self.buf.copy_within(self.lo..self.hi, 0);
                (self.lo, self.hi) = (0, self.hi - self.lo);
            } else if self.buf.len() < HEAD_LIMIT {
                self.buf.resize(HEAD_LIMIT, 0);
            } else {
                return Err(WireError::HeadTooLong(HEAD_LIMIT).into());
            }
        }
        let n = self.io.read(&mut self.buf[self.hi..]).await?;
        self.arrived = Instant::now();
        self.hi += n;
        Ok(n)
    }

    /// Sends `request` and reads the response's head (after any informational ones); the
    /// head arrived at [`Conn::arrived`].
    pub(super) async fn exchange(&mut self, request: &[u8]) -> Result<Head, Failed> {
        self.io.write(request).await.map_err(Failed::Unsent)?;
        let mut answered = self.lo < self.hi;
        loop {
            if let Some(head) = wire::parse_head(self.unread()).map_err(|e| Failed::Answered(e.into()))? {
                self.lo += head.len;
                if head.status.is_informational() {
                    continue;
                }
                return Ok(head);
            }
            match self.fill().await {
                Ok(0) if answered => return Err(Failed::Answered(WireError::Truncated.into())),
                Ok(0) => return Err(Failed::NoAnswer(WireError::Truncated.into())),
                Ok(_) => answered = true,
                Err(e) if answered => return Err(Failed::Answered(e)),
                Err(e) => return Err(Failed::NoAnswer(e)),
            }
        }
    }
}

/// How an exchange failed: the request was not written, or written and never answered (both
/// safe to send again on a fresh connection), or answered in part.
pub(super) enum Failed {
    Unsent(io::Error),
    NoAnswer(BodyError),
    Answered(BodyError),
}
