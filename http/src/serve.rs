//! Serving a router until shutdown, then draining open requests for a bounded time: a stuck
//! client must not hold a stopping process open, nor may an open event stream.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::sync::watch;

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits at
/// most `drain` for open connections before closing them. `streams_stop` turns true the moment
/// `shutdown` resolves, before the drain: the process's event streams watch it and end, so they
/// do not hold the drain open.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    streams_stop: watch::Sender<bool>,
    drain: Duration,
) -> std::io::Result<()> {
    let shutdown = async move {
        shutdown.await;
        streams_stop.send_replace(true);
    };
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stopping_tx.send(());
    });
    let server = tokio::spawn(async move { server.await });
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return flatten(result),
        _ = stopping_rx => {}
    }
    match tokio::time::timeout(drain, &mut server).await {
        Ok(result) => flatten(result),
        Err(_) => {
            tracing::warn!(
                drain_sec = drain.as_secs(),
                "drain timed out, closing open connections"
            );
            server.abort();
            Ok(())
        }
    }
}

fn flatten(result: Result<std::io::Result<()>, tokio::task::JoinError>) -> std::io::Result<()> {
    result.map_err(std::io::Error::other)?
}
