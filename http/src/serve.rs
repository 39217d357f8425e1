//! Serving a router until shutdown, then draining open requests for a bounded time: a stuck
//! client must not hold a stopping process open, nor may an open event stream.
//!
//! The accept loop is ours (HTTP/1.1 on hyper) so that every connection is bounded: each is
//! watched by its guard (`guard`: header-read and idle timeouts, head and URL caps, hyper's own
//! refusals in the envelope), each request passes the gate (`gate`: one Host, the cookie cap,
//! shedding), and the listener holds at most MAX_CONNECTIONS before it sheds new ones with 503,
//! and a margin more before it closes them unanswered. An accept that fails for want of
//! descriptors (EMFILE) pauses the loop briefly instead of spinning or stopping it.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

use crate::ServeOptions;
use crate::gate::{self, GateRules, TrackedBody};
use crate::guard::{ConnShared, GuardedIo, HeadLimits};

/// How long the loop pauses after an accept that failed for want of resources.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Headers one request may have (the byte cap bounds them first; this only lifts hyper's 100).
const MAX_HEADERS: usize = 256;

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits at
/// most `options.drain` for open connections before closing them. `streams_stop` turns true the
/// moment `shutdown` resolves, before the drain: the process's event streams watch it and end,
/// so they do not hold the drain open.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    streams_stop: watch::Sender<bool>,
    options: ServeOptions,
) -> io::Result<()> {
    let options = Arc::new(options);
    let open = Arc::new(AtomicUsize::new(0));
    let (draining_tx, draining_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut accept_errors = AcceptErrors::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        // Finished connections are reaped here, so the set holds only open ones.
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                accept_errors.pause_after(error).await;
                continue;
            }
        };
        let already_open = open.load(Ordering::Acquire);
        if already_open >= options.hard_ceiling() {
            // No descriptor to spare for an answer: the client retries or goes elsewhere.
            drop(stream);
            continue;
        }
        let permit = ConnectionPermit::new(&open);
        let shed = already_open >= options.max_connections;
        connections.spawn(serve_connection(
            stream,
            peer,
            router.clone(),
            options.clone(),
            shed,
            draining_rx.clone(),
            permit,
        ));
    }
    streams_stop.send_replace(true);
    drop(listener);
    draining_tx.send_replace(true);
    let drained = tokio::time::timeout(options.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            drain_sec = options.drain.as_secs(),
            open = connections.len(),
            "drain timed out, closing open connections"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// One connection, served until it closes or, once the server drains, until its request in
/// flight is answered.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    options: Arc<ServeOptions>,
    shed: bool,
    mut draining: watch::Receiver<bool>,
    _permit: ConnectionPermit,
) {
    // Small answers go out at once rather than waiting on Nagle; failure changes nothing.
    let _ = stream.set_nodelay(true);
    let shared = Arc::new(ConnShared::default());
    let limits = HeadLimits {
        header_read_timeout: options.header_read_timeout,
        keepalive_idle: options.keepalive_idle,
        max_header_bytes: options.max_header_bytes,
        max_url_bytes: options.max_url_bytes,
    };
    let io = TokioIo::new(GuardedIo::new(stream, shared.clone(), limits));
    let rules = GateRules {
        max_cookies: options.max_cookies,
        shed,
        exempt_paths: options.exempt_paths,
    };
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        // Counted on the call itself, before any await: the guard must see the request as in
        // flight from the moment hyper hands it over.
        let in_flight = shared.begin();
        let router = router.clone();
        async move {
            let mut request = request.map(axum::body::Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let response = match gate::refusal(&request, &rules) {
                Some(error) => gate::refusal_response(error),
                // Boxed: hyper keeps a connection's request future allocated for the
                // connection's life, and an idle event stream should not hold the router's.
                None => match Box::pin(router.oneshot(request)).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
            };
            Ok::<_, Infallible>(response.map(|body| TrackedBody::new(body, in_flight)))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        // A shed connection answers once and closes.
        .keep_alive(!shed)
        // The guard keeps the time; hyper's own timer would close without an answer.
        .header_read_timeout(None)
        // Above the guard's cap, so the guard refuses first and in the envelope.
        .max_buf_size(options.max_header_bytes.saturating_add(8192))
        .max_headers(MAX_HEADERS)
        // One contiguous buffer per write, so the guard sees hyper's own answers whole.
        .writev(false);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    if !*draining.borrow_and_update() {
        tokio::select! {
            result = connection.as_mut() => {
                log_end(result);
                return;
            }
            _ = draining.changed() => {}
        }
    }
    connection.as_mut().graceful_shutdown();
    log_end(connection.await);
}

fn log_end(result: Result<(), hyper::Error>) {
    if let Err(error) = result {
        // Clients vanish, time out and send garbage all the time: nothing an operator acts on.
        tracing::debug!(error = %error, "connection ended with an error");
    }
}

/// One open connection's place under the ceiling, given back when the connection ends.
struct ConnectionPermit(Arc<AtomicUsize>);

impl ConnectionPermit {
    fn new(open: &Arc<AtomicUsize>) -> ConnectionPermit {
        open.fetch_add(1, Ordering::AcqRel);
        ConnectionPermit(open.clone())
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accept failures: a client that left before its accept is nothing; anything else (out of
/// descriptors or memory) pauses the loop, and is logged at most once a second.
#[derive(Default)]
struct AcceptErrors {
    last_logged: Option<Instant>,
}

impl AcceptErrors {
    async fn pause_after(&mut self, error: io::Error) {
        if matches!(
            error.kind(),
            io::ErrorKind::ConnectionAborted
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionRefused
                | io::ErrorKind::Interrupted
        ) {
            return;
        }
        let now = Instant::now();
        if self
            .last_logged
            .is_none_or(|last| now.duration_since(last) >= Duration::from_secs(1))
        {
            self.last_logged = Some(now);
            tracing::warn!(error = %error, "accepting a connection failed; pausing briefly");
        }
        tokio::time::sleep(ACCEPT_BACKOFF).await;
    }
}
