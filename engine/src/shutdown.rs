//! The engine's stop signal: one `watch` flag every long-lived task (the ticker, each Watch
//! stream, the server) waits on, so a single shutdown ends them all.

use tokio::sync::watch;

/// Resolves once the flag is set, or once its sender is gone (the engine stopped anyway).
pub(crate) async fn stopped(signal: &mut watch::Receiver<bool>) {
    loop {
        if *signal.borrow_and_update() {
            return;
        }
        if signal.changed().await.is_err() {
            return;
        }
    }
}
