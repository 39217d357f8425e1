//! The connection's IO, watched below hyper: how long a request head takes, how large it is,
//! and what hyper answers on its own.
//!
//! - A request head must be complete within the header-read timeout, counted from the accept
//!   for a new connection and from its first byte on a kept-alive one: otherwise the client is
//!   answered `408 request_timeout` and the connection closes. A slow client (slowloris) holds a
//!   connection for that long at most.
//! - A kept-alive connection with nothing in flight closes quietly after the idle timeout. While a
//!   request is being served (an event stream included) no timer of ours runs.
//! - A request line over the URL cap is answered `414 uri_too_long`, a head over the header cap
//!   `431 request_header_too_large`, as soon as the bytes show it, before hyper buffers more.
//! - Hyper answers a head it cannot parse itself, with an empty body; that answer is replaced on
//!   its way out by the same status with the `{error, code}` envelope.
//!
//! After answering a refusal of ours the connection reads and discards what the client still
//! sends for a moment before closing, so the answer is not lost to a TCP reset.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use qm_core::{ApiError, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a refused connection keeps reading (and discarding) before it closes.
const LINGER: Duration = Duration::from_secs(1);
/// How much a refused connection reads and discards at most before it closes.
const LINGER_BYTES: usize = 1 << 20;

/// What the connection's service and its IO share: requests handed to the service, and requests
/// whose answer is done (its body finished or dropped).
#[derive(Debug, Default)]
pub(crate) struct ConnShared {
    dispatched: AtomicU64,
    completed: AtomicU64,
    /// The connection's task, as last seen reading while a request was served: woken when the
    /// request is done, so the guard starts the idle clock even if the client sends nothing.
    reader: Mutex<Option<Waker>>,
}

impl ConnShared {
    /// A request was handed to the service; the guard counts it done when dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.dispatched.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    fn wake_me_when_done(&self, waker: &Waker) {
        let mut reader = self
            .reader
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !reader.as_ref().is_some_and(|known| known.will_wake(waker)) {
            *reader = Some(waker.clone());
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.dispatched.load(Ordering::Acquire),
            self.completed.load(Ordering::Acquire),
        )
    }
}

/// One request in flight on a connection; dropped with its response body.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<ConnShared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.completed.fetch_add(1, Ordering::AcqRel);
        let reader = self
            .0
            .reader
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The guard's limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadLimits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) keepalive_idle: Duration,
    pub(crate) max_header_bytes: usize,
    pub(crate) max_url_bytes: usize,
}

/// Where the connection is between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request head; `started` once a byte of it arrived (or on a new connection,
    /// whose clock runs from the accept).
    AwaitingHead { started: bool },
    /// The head is complete and about to be served, or a request is in flight: no timer.
    Serving,
}

/// What reading more of a head showed.
#[derive(Debug, PartialEq, Eq)]
enum Scan {
    Incomplete,
    /// The head ended; bytes after it (a body, a pipelined request) are hyper's to judge.
    Complete,
    Refuse(ErrorCode),
}

/// A running measure of one request head: its request line and its whole length, and whether
/// the blank line that ends it has arrived. Linear in the bytes, one pass.
#[derive(Debug, Default)]
struct HeadScan {
    head_bytes: usize,
    line_bytes: usize,
    line_done: bool,
    /// The last two bytes seen, to find `\n\n` or `\n\r\n`.
    previous: [u8; 2],
}

impl HeadScan {
    fn feed(&mut self, bytes: &[u8], limits: &HeadLimits) -> Scan {
        for &byte in bytes {
            // Blank lines before a request line are allowed (RFC 9112 2.2) and carry nothing.
            if self.head_bytes == 0 && (byte == b'\r' || byte == b'\n') {
                continue;
            }
            self.head_bytes += 1;
            if !self.line_done {
                if byte == b'\n' {
                    self.line_done = true;
                } else {
                    self.line_bytes += 1;
                    if self.line_bytes > limits.max_url_bytes {
                        return Scan::Refuse(ErrorCode::UriTooLong);
                    }
                }
            } else if byte == b'\n'
                && (self.previous[1] == b'\n'
                    || (self.previous[1] == b'\r' && self.previous[0] == b'\n'))
            {
                return Scan::Complete;
            }
            if self.head_bytes > limits.max_header_bytes {
                return Scan::Refuse(ErrorCode::RequestHeaderTooLarge);
            }
            self.previous = [self.previous[1], byte];
        }
        Scan::Incomplete
    }
}

/// How the connection ends once the guard has decided it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// Writing our answer, then shutting the write side.
    Answering,
    /// Reading and discarding what the client still sends, until EOF or the linger ends.
    Lingering { discarded: usize },
    /// Done: reads fail (the connection's task ends).
    Closed,
}

/// The watched IO of one connection.
pub(crate) struct GuardedIo<T> {
    inner: T,
    shared: Arc<ConnShared>,
    limits: HeadLimits,
    phase: Phase,
    /// Requests seen handed to the service, at the last look.
    seen_dispatched: u64,
    scan: HeadScan,
    /// A head was read whole and is not handed to the service yet.
    scan_done: bool,
    deadline: Pin<Box<Sleep>>,
    /// An answer of ours being written, and how much of it is out.
    outgoing: Option<(Vec<u8>, usize)>,
    closing: Option<Closing>,
    /// The error reads end with once closed (a quiet idle close reads as end of stream).
    close_error: Option<io::ErrorKind>,
}

impl<T> GuardedIo<T> {
    pub(crate) fn new(inner: T, shared: Arc<ConnShared>, limits: HeadLimits) -> GuardedIo<T> {
        GuardedIo {
            inner,
            shared,
            limits,
            // A new connection's clock runs from the accept: sending nothing is no excuse.
            phase: Phase::AwaitingHead { started: true },
            seen_dispatched: 0,
            scan: HeadScan::default(),
            scan_done: false,
            deadline: Box::pin(tokio::time::sleep(limits.header_read_timeout)),
            outgoing: None,
            closing: None,
            close_error: None,
        }
    }

    /// Catches up with the service: a request handed over means serving; every request done
    /// (and no head of ours waiting to be handed over) means the next head is awaited, with the
    /// idle clock running.
    fn refresh(&mut self) {
        let (dispatched, completed) = self.shared.counts();
        if dispatched != self.seen_dispatched {
            self.seen_dispatched = dispatched;
            self.phase = Phase::Serving;
            self.scan = HeadScan::default();
            self.scan_done = false;
        }
        if self.phase == Phase::Serving && !self.scan_done && completed == dispatched {
            self.phase = Phase::AwaitingHead { started: false };
            self.scan = HeadScan::default();
            let deadline = Instant::now() + self.limits.keepalive_idle;
            self.deadline.as_mut().reset(deadline);
        }
    }

    /// Starts answering `code` ourselves; the connection closes after it.
    fn refuse(&mut self, code: ErrorCode) {
        self.outgoing = Some((envelope_response(code, None), 0));
        self.closing = Some(Closing::Answering);
        self.close_error = Some(io::ErrorKind::InvalidData);
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> GuardedIo<T> {
    /// Writes what is left of our answer.
    fn poll_outgoing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.outgoing {
            if *written >= bytes.len() {
                self.outgoing = None;
                break;
            }
            let count = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
            if count == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += count;
        }
        Poll::Ready(Ok(()))
    }

    /// Drives a refused connection to its end: the answer out, the write side shut, what the
    /// client still sends read and dropped for a moment. Ready once closed.
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.closing {
                None | Some(Closing::Closed) => return Poll::Ready(Ok(())),
                Some(Closing::Answering) => {
                    ready!(self.poll_outgoing(cx))?;
                    ready!(Pin::new(&mut self.inner).poll_shutdown(cx))?;
                    self.deadline.as_mut().reset(Instant::now() + LINGER);
                    self.closing = Some(Closing::Lingering { discarded: 0 });
                }
                Some(Closing::Lingering { discarded }) => {
                    if discarded >= LINGER_BYTES || self.deadline.as_mut().poll(cx).is_ready() {
                        self.closing = Some(Closing::Closed);
                        continue;
                    }
                    let mut scratch = [0u8; 4096];
                    let mut buf = ReadBuf::new(&mut scratch);
                    match ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf)) {
                        Ok(()) if !buf.filled().is_empty() => {
                            self.closing = Some(Closing::Lingering {
                                discarded: discarded + buf.filled().len(),
                            });
                        }
                        // End of stream or an error: the client is gone, nothing to wait for.
                        _ => self.closing = Some(Closing::Closed),
                    }
                }
            }
        }
    }

    fn closed_read(&mut self) -> Poll<io::Result<()>> {
        match self.close_error {
            Some(kind) => Poll::Ready(Err(io::Error::new(kind, "connection refused by its guard"))),
            // A quiet close: end of stream, which hyper takes as the client leaving.
            None => Poll::Ready(Ok(())),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for GuardedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing.is_some() {
            ready!(this.poll_close(cx))?;
            return this.closed_read();
        }
        this.refresh();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let Phase::AwaitingHead { started } = this.phase else {
                    return Poll::Ready(Ok(()));
                };
                let fresh = &buf.filled()[before..];
                if fresh.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                if !started {
                    // The first byte of a head on a kept-alive connection starts its clock.
                    this.phase = Phase::AwaitingHead { started: true };
                    let deadline = Instant::now() + this.limits.header_read_timeout;
                    this.deadline.as_mut().reset(deadline);
                }
                match this.scan.feed(fresh, &this.limits) {
                    Scan::Incomplete => Poll::Ready(Ok(())),
                    Scan::Complete => {
                        this.phase = Phase::Serving;
                        this.scan_done = true;
                        Poll::Ready(Ok(()))
                    }
                    Scan::Refuse(code) => {
                        // The bytes read are not hyper's any more: the answer is ours.
                        buf.set_filled(before);
                        this.refuse(code);
                        ready!(this.poll_close(cx))?;
                        this.closed_read()
                    }
                }
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                let Phase::AwaitingHead { started } = this.phase else {
                    // Hyper will not read again on its own once the answer is out and the
                    // client is silent: the end of the request wakes this read instead.
                    this.shared.wake_me_when_done(cx.waker());
                    let (dispatched, completed) = this.shared.counts();
                    if dispatched == completed {
                        // Done between the look above and the registration: look again now.
                        cx.waker().wake_by_ref();
                    }
                    return Poll::Pending;
                };
                if this.deadline.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if started {
                    this.refuse(ErrorCode::RequestTimeout);
                    ready!(this.poll_close(cx))?;
                } else {
                    // Idle between requests: a quiet close, as any keep-alive timeout.
                    this.closing = Some(Closing::Closed);
                }
                this.closed_read()
            }
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for GuardedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.closing.is_some() {
            // Our own answer is the last thing this connection says.
            ready!(this.poll_close(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(this.poll_outgoing(cx))?;
        this.refresh();
        let (dispatched, completed) = this.shared.counts();
        if dispatched == completed
            && let Some(code) = hypers_own_refusal(buf)
        {
            // Hyper refused a head without asking the service: same status, our envelope.
            this.outgoing = Some((envelope_response(code, None), 0));
            ready!(this.poll_outgoing(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_outgoing(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_outgoing(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// The code of a bodiless error answer hyper wrote on its own (a head it could not parse), if
/// `buf` is one: a whole status line and head with `content-length: 0`. Any other write, the
/// tail of an earlier answer included, is not.
fn hypers_own_refusal(buf: &[u8]) -> Option<ErrorCode> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    if !buf.ends_with(b"\r\n\r\n") || !contains(buf, b"\r\ncontent-length: 0\r\n") {
        return None;
    }
    match rest.get(..4)? {
        b"400 " => Some(ErrorCode::BadRequest),
        b"408 " => Some(ErrorCode::RequestTimeout),
        b"414 " => Some(ErrorCode::UriTooLong),
        b"431 " => Some(ErrorCode::RequestHeaderTooLarge),
        _ => None,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

/// A whole HTTP/1.1 answer of `code` with the `{error, code}` envelope, closing the connection.
pub(crate) fn envelope_response(code: ErrorCode, retry_after: Option<u64>) -> Vec<u8> {
    let error = ApiError::new(code, refusal_message(code));
    let body = error.body().to_string();
    let status = code.http_status();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\ncache-control: no-store\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    if let Some(seconds) = retry_after.or_else(|| code.default_retry_after_sec()) {
        head.push_str(&format!("retry-after: {seconds}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// What a connection-level refusal tells the human reading it.
pub(crate) fn refusal_message(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::RequestTimeout => "the request head did not arrive in time",
        ErrorCode::UriTooLong => "the request line is longer than this server accepts",
        ErrorCode::RequestHeaderTooLarge => {
            "the request headers are larger than this server accepts"
        }
        ErrorCode::TooManyCookies => "the request carries more cookies than this server accepts",
        ErrorCode::InvalidHost => "send exactly one Host header",
        ErrorCode::ServerBusy => "this server holds as many connections as it can; retry shortly",
        _ => "the request could not be read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> HeadLimits {
        HeadLimits {
            header_read_timeout: Duration::from_secs(1),
            keepalive_idle: Duration::from_secs(1),
            max_header_bytes: 64,
            max_url_bytes: 24,
        }
    }

    #[test]
    fn a_head_ends_at_its_blank_line_in_any_split() {
        let head = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nbody";
        for split in 0..head.len() {
            let mut scan = HeadScan::default();
            let first = scan.feed(&head[..split], &limits());
            let outcome = if first == Scan::Complete {
                first
            } else {
                scan.feed(&head[split..], &limits())
            };
            assert_eq!(outcome, Scan::Complete, "split at {split}");
        }
        let mut bare = HeadScan::default();
        assert_eq!(bare.feed(b"GET / HTTP/1.0\n\n", &limits()), Scan::Complete);
    }

    #[test]
    fn long_lines_and_heads_are_refused_as_they_arrive() {
        let mut scan = HeadScan::default();
        let long_url = format!("GET /{} HTTP/1.1\r\n", "a".repeat(40));
        assert_eq!(
            scan.feed(long_url.as_bytes(), &limits()),
            Scan::Refuse(ErrorCode::UriTooLong)
        );
        let mut scan = HeadScan::default();
        let long_head = format!("GET / HTTP/1.1\r\nCookie: {}\r\n\r\n", "a".repeat(60));
        assert_eq!(
            scan.feed(long_head.as_bytes(), &limits()),
            Scan::Refuse(ErrorCode::RequestHeaderTooLarge)
        );
    }

    #[test]
    fn hypers_bodiless_refusals_are_recognised_and_nothing_else() {
        let refusal =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(
            hypers_own_refusal(refusal),
            Some(ErrorCode::RequestHeaderTooLarge)
        );
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hypers_own_refusal(ok), None);
        assert_eq!(hypers_own_refusal(b"0\r\n\r\n"), None);
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(hypers_own_refusal(with_body), None);
    }

    #[test]
    fn the_envelope_answer_is_a_whole_response() {
        let bytes = envelope_response(ErrorCode::RequestTimeout, None);
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["code"], "request_timeout");
        let busy = String::from_utf8(envelope_response(ErrorCode::ServerBusy, None)).unwrap();
        assert!(busy.contains("retry-after: 5\r\n"));
    }
}
