//! The clock and the stop signal every long-lived gateway task runs on: the visitor event
//! stream's heartbeat, which the room hub's presence report shares (a stream heartbeat is what
//! tells the engine its holder is still there), and the wait for the process to stop.

use std::time::Duration;

use tokio::sync::watch;

/// A status frame goes out at least this often, changed or not; presence is reported as often.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);

/// Resolves once the process is stopping (the watch's guard is dropped inside, so the caller's
/// future stays `Send`).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}
