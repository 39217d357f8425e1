//! The gate's keep-alive connections to the rooms' origins, on hyper's own HTTP/1 client
//! connections (`hyper::client::conn::http1`: hyper parses and writes every message), each one
//! driven by the visitor request that is using it rather than by a task of its own.
//!
//! Why not a pooled client that runs each connection as a spawned task: then every forwarded
//! request crosses between tasks several times (the request handed to the connection's task,
//! the head handed back, each body chunk asked for and handed back), and on a small machine
//! those hand-overs cost as much as the forwarding itself. Here the request's own task polls
//! the connection while it waits for the head, and the answer's body polls it while the
//! browser's connection reads: no hand-over, no extra task.
//!
//! Once the head is in, whatever of the body the connection already holds is taken at once
//! (up to [`COALESCE_MOST`]), so a small answer leaves as one write, head and body together;
//! nothing is waited for, so a slow or long answer still streams chunk by chunk and nothing is
//! buffered whole. A connection goes back to the pool only once its answer was read to the end
//! and hyper says it can take another request; an answer the browser abandoned closes it.
//! Idle connections are kept for [`POOL_IDLE`] and at most [`IDLE_PER_ORIGIN`] per origin (the
//! newest reused first), pruned whenever one is given back to that origin.

use std::collections::{HashMap, VecDeque};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long an idle connection to an origin is kept.
pub(super) const POOL_IDLE: Duration = Duration::from_secs(60);
/// Idle connections kept per origin; one given back past it is closed.
const IDLE_PER_ORIGIN: usize = 512;
/// The most body bytes already at hand that are sent with the head instead of streamed after.
const COALESCE_MOST: usize = 64 * 1024;

type Conn = Connection<TokioIo<TcpStream>, Body>;

/// One connection to an origin: the side that sends requests and the connection it runs on.
struct Link {
    sender: SendRequest<Body>,
    conn: Conn,
}

struct Idle {
    link: Link,
    since: Instant,
}

/// Why an origin gave no answer head.
#[derive(Debug)]
pub(super) enum OriginError {
    Connect(std::io::Error),
    Http(hyper::Error),
}

impl std::fmt::Display for OriginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OriginError::Connect(error) => write!(f, "connect: {error}"),
            OriginError::Http(error) => write!(f, "{error}"),
        }
    }
}

/// The pool of one gateway, shared by every inline room.
#[derive(Clone, Default)]
pub(super) struct OriginPool {
    idle: Arc<Mutex<HashMap<Box<str>, VecDeque<Idle>>>>,
}

impl OriginPool {
    /// Sends `request` (origin-form URI, Host set) to `authority` (`host:port`) and answers with
    /// its response, whose body streams from the connection.
    pub(super) async fn send(
        &self,
        authority: &str,
        mut request: http::Request<Body>,
    ) -> Result<Response<Body>, OriginError> {
        // A pooled connection the origin closed meanwhile hands the request back unsent; the
        // next one (or a new one) gets it.
        while let Some(mut link) = self.checkout(authority) {
            let sending = link.sender.try_send_request(request);
            match drive_until_head(&mut link.conn, sending).await {
                Ok(response) => return Ok(self.answer(authority, link, response)),
                Err(mut refused) => match refused.take_message() {
                    Some(unsent) => request = unsent,
                    None => return Err(OriginError::Http(refused.into_error())),
                },
            }
        }
        let mut link = connect(authority).await?;
        let sending = link.sender.send_request(request);
        let response = drive_until_head(&mut link.conn, sending)
            .await
            .map_err(OriginError::Http)?;
        Ok(self.answer(authority, link, response))
    }

    /// The newest idle connection to `authority` that can still take a request.
    fn checkout(&self, authority: &str) -> Option<Link> {
        loop {
            let idle = {
                let mut pool = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                pool.get_mut(authority)?.pop_back()?
            };
            let mut link = idle.link;
            if idle.since.elapsed() < POOL_IDLE && still_open(&mut link) {
                return Some(link);
            }
        }
    }

    fn give_back(&self, authority: &str, link: Link) {
        let now = Instant::now();
        let mut pool = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = match pool.get_mut(authority) {
            Some(idle) => idle,
            None => pool.entry(authority.into()).or_default(),
        };
        while idle
            .front()
            .is_some_and(|oldest| now.duration_since(oldest.since) >= POOL_IDLE)
        {
            idle.pop_front();
        }
        if idle.len() < IDLE_PER_ORIGIN {
            idle.push_back(Idle { link, since: now });
        }
    }

    /// The response with what of its body is already here, and a body that drives `link` for
    /// the rest; `link` goes back to the pool as soon as the body has been read to its end.
    fn answer(&self, authority: &str, link: Link, response: Response<Incoming>) -> Response<Body> {
        let (parts, body) = response.into_parts();
        let mut driven = DrivenBody {
            body,
            link: Some(link),
            ahead: VecDeque::new(),
            pool: self.clone(),
            authority: authority.into(),
        };
        let finished = driven.take_what_is_here();
        let body = match finished {
            Some(whole) => Body::from(whole),
            None => Body::new(driven),
        };
        Response::from_parts(parts, body)
    }
}

async fn connect(authority: &str) -> Result<Link, OriginError> {
    let stream = TcpStream::connect(authority)
        .await
        .map_err(OriginError::Connect)?;
    // Small requests and answers go out at once rather than waiting on Nagle.
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::Builder::new()
        .handshake(TokioIo::new(stream))
        .await
        .map_err(OriginError::Http)?;
    Ok(Link { sender, conn })
}

/// Lets an idle connection notice a close or an error that arrived while it sat in the pool,
/// and says whether it can take a request now.
fn still_open(link: &mut Link) -> bool {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    if Pin::new(&mut link.conn).poll(&mut cx).is_ready() {
        return false;
    }
    link.sender.is_ready()
}

/// Polls the connection and the request's answer together until the answer's head is in (or
/// the connection ends, whose error the answer then carries).
async fn drive_until_head<T, E>(
    conn: &mut Conn,
    answer: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let mut answer = std::pin::pin!(answer);
    let mut conn_done = false;
    poll_fn(|cx| {
        if !conn_done && Pin::new(&mut *conn).poll(cx).is_ready() {
            conn_done = true;
        }
        answer.as_mut().poll(cx)
    })
    .await
}

/// An answer's body read from a connection this body drives itself.
struct DrivenBody {
    body: Incoming,
    /// `None` once the connection has ended (or was handed back).
    link: Option<Link>,
    /// What was read while coalescing but not yet handed on: data past the limit, trailers, or
    /// the error the body ended with.
    ahead: VecDeque<Result<Frame<Bytes>, hyper::Error>>,
    pool: OriginPool,
    authority: Box<str>,
}

impl DrivenBody {
    /// Polls the body once, driving the connection when the body has nothing yet.
    fn poll_driving(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let Some(link) = self.link.as_mut() else {
            return Poll::Pending;
        };
        if Pin::new(&mut link.conn).poll(cx).is_ready() {
            self.link = None;
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    /// Reads every frame already at hand without waiting. `Some(body)` when that was the whole
    /// body (the connection then goes back to the pool); otherwise the data read so far waits
    /// in `ahead`, and the rest streams.
    fn take_what_is_here(&mut self) -> Option<Bytes> {
        if self.body.is_end_stream() {
            self.finish();
            return Some(Bytes::new());
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut data = Gathered::default();
        let ended = loop {
            if data.len >= COALESCE_MOST {
                break false;
            }
            match self.poll_driving(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(chunk) => data.push(chunk),
                    Err(trailers) => {
                        self.hold(data, Ok(trailers));
                        return None;
                    }
                },
                Poll::Ready(None) => break true,
                Poll::Ready(Some(Err(error))) => {
                    self.hold(data, Err(error));
                    return None;
                }
                // Nothing more at hand: the rest streams.
                Poll::Pending => break false,
            }
        };
        if ended {
            self.finish();
            return Some(data.into_bytes());
        }
        if data.len > 0 {
            self.ahead.push_back(Ok(Frame::data(data.into_bytes())));
        }
        None
    }

    /// Keeps `data`, then `next`, for the stream to hand on in that order.
    fn hold(&mut self, data: Gathered, next: Result<Frame<Bytes>, hyper::Error>) {
        if data.len > 0 {
            self.ahead.push_back(Ok(Frame::data(data.into_bytes())));
        }
        self.ahead.push_back(next);
    }

    /// The body is read to its end: the connection goes back to the pool if it can take more.
    fn finish(&mut self) {
        if let Some(mut link) = self.link.take()
            && still_open(&mut link)
        {
            self.pool.give_back(&self.authority, link);
        }
    }
}

/// Body chunks gathered while coalescing: one chunk is kept as it is, more are joined.
#[derive(Default)]
struct Gathered {
    first: Option<Bytes>,
    more: BytesMut,
    len: usize,
}

impl Gathered {
    fn push(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        match self.first.take() {
            None if self.more.is_empty() => self.first = Some(chunk),
            None => self.more.extend_from_slice(&chunk),
            Some(first) => {
                self.more.reserve(first.len() + chunk.len());
                self.more.extend_from_slice(&first);
                self.more.extend_from_slice(&chunk);
            }
        }
    }

    fn into_bytes(self) -> Bytes {
        match self.first {
            Some(first) => first,
            None => self.more.freeze(),
        }
    }
}

impl HttpBody for DrivenBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(frame) = self.ahead.pop_front() {
            return Poll::Ready(Some(frame));
        }
        let polled = self.poll_driving(cx);
        if let Poll::Ready(None) = polled {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let ahead: u64 = self
            .ahead
            .iter()
            .filter_map(|frame| frame.as_ref().ok()?.data_ref())
            .map(|data| data.len() as u64)
            .sum();
        let rest = self.body.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + ahead);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + ahead);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;

    use super::*;

    /// An origin on loopback that counts the connections it accepted and answers `size` bytes,
    /// closing after each answer when `close` is set.
    async fn origin(size: usize, close: bool) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = service_fn(move |_request| async move {
                        let mut response =
                            http::Response::new(Full::new(Bytes::from(vec![b'x'; size])));
                        if close {
                            response
                                .headers_mut()
                                .insert(http::header::CONNECTION, "close".parse().unwrap());
                        }
                        Ok::<_, Infallible>(response)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (authority, accepted)
    }

    fn get(authority: &str) -> http::Request<Body> {
        http::Request::builder()
            .uri("/page")
            .header(http::header::HOST, authority)
            .body(Body::empty())
            .unwrap()
    }

    async fn fetch(pool: &OriginPool, authority: &str) -> Bytes {
        let response = pool.send(authority, get(authority)).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn answers_read_to_their_end_reuse_one_connection() {
        let (authority, accepted) = origin(5, false).await;
        let pool = OriginPool::default();
        for _ in 0..5 {
            assert_eq!(fetch(&pool, &authority).await, "xxxxx");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_origin_closes_is_never_reused() {
        let (authority, accepted) = origin(5, true).await;
        let pool = OriginPool::default();
        for _ in 0..3 {
            assert_eq!(fetch(&pool, &authority).await, "xxxxx");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_body_past_the_coalescing_limit_streams_whole() {
        let size = COALESCE_MOST * 16 + 7;
        let (authority, accepted) = origin(size, false).await;
        let pool = OriginPool::default();
        for _ in 0..2 {
            let body = fetch(&pool, &authority).await;
            assert_eq!(body.len(), size);
            assert!(body.iter().all(|byte| *byte == b'x'));
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "read to its end, then reused"
        );
    }

    #[tokio::test]
    async fn an_answer_left_unread_closes_its_connection() {
        let size = COALESCE_MOST * 16;
        let (authority, accepted) = origin(size, false).await;
        let pool = OriginPool::default();
        let abandoned = pool.send(&authority, get(&authority)).await.unwrap();
        drop(abandoned);
        assert_eq!(fetch(&pool, &authority).await.len(), size);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_origin_that_is_down_is_a_connect_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        drop(listener);
        let refused = OriginPool::default()
            .send(&authority, get(&authority))
            .await;
        assert!(matches!(refused, Err(OriginError::Connect(_))));
    }
}
