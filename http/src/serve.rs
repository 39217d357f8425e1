//! Serving a router until shutdown, then draining open requests for a bounded time: a stuck
//! client must not hold a stopping process open.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits at
/// most `drain` for open connections before closing them.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> std::io::Result<()> {
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
