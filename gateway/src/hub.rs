//! Visitor fan-out: one engine `Watch` stream per room that has listeners in this process. The
//! first listener of a room creates its hub, which follows the room's view (reconnecting with
//! backoff when the stream breaks) into a `tokio::sync::watch`; every listener reads the latest
//! view from there. The last listener to leave drops the hub and its engine stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qm_core::shutdown::stopped;
use qm_proto::{EngineClient, RoomView, WatchRequest};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::presence::{StreamPresence, StreamTickets, report_room};
use crate::status_body::Branding;

const FIRST_RETRY: Duration = Duration::from_millis(100);
const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// A room's view with its branding already read, shared by every listener.
#[derive(Debug)]
pub(crate) struct HubView {
    pub(crate) view: RoomView,
    pub(crate) branding: Branding,
}

/// The latest view of a room; `None` until the engine sent the first one.
pub(crate) type LatestView = Option<Arc<HubView>>;

/// Every room hub of this process.
pub(crate) struct RoomHubs {
    engine: EngineClient,
    /// Weak, so a hub lives exactly as long as its listeners. A std mutex: held only to look up
    /// or insert, never across an await.
    rooms: Mutex<HashMap<String, std::sync::Weak<RoomHub>>>,
    next_hub_id: AtomicU64,
    shutdown: watch::Receiver<bool>,
}

/// One room's fan-out, held by each of its listeners.
pub(crate) struct RoomHub {
    hubs: Arc<RoomHubs>,
    room_id: String,
    hub_id: u64,
    views: watch::Receiver<LatestView>,
    follower: AbortHandle,
    /// The tickets of this room's open streams, reported to the engine every heartbeat.
    stream_tickets: Arc<StreamTickets>,
    reporter: AbortHandle,
}

impl RoomHubs {
    pub(crate) fn new(engine: EngineClient, shutdown: watch::Receiver<bool>) -> Arc<RoomHubs> {
        Arc::new(RoomHubs {
            engine,
            rooms: Mutex::new(HashMap::new()),
            next_hub_id: AtomicU64::new(1),
            shutdown,
        })
    }

    /// The room's hub, created (with its engine stream) if this is its first listener.
    pub(crate) fn subscribe(self: &Arc<Self>, room_id: &str) -> Arc<RoomHub> {
        let mut rooms = self
            .rooms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(hub) = rooms.get(room_id).and_then(std::sync::Weak::upgrade) {
            return hub;
        }
        let (sender, views) = watch::channel(None);
        let follower = tokio::spawn(follow_room(
            self.engine.clone(),
            room_id.to_owned(),
            sender,
            self.shutdown.clone(),
        ));
        let stream_tickets = Arc::new(StreamTickets::default());
        let reporter = tokio::spawn(report_room(
            self.engine.clone(),
            room_id.to_owned(),
            stream_tickets.clone(),
            self.shutdown.clone(),
        ));
        let hub = Arc::new(RoomHub {
            hubs: self.clone(),
            room_id: room_id.to_owned(),
            hub_id: self.next_hub_id.fetch_add(1, Ordering::Relaxed),
            views,
            follower: follower.abort_handle(),
            stream_tickets,
            reporter: reporter.abort_handle(),
        });
        rooms.insert(room_id.to_owned(), Arc::downgrade(&hub));
        tracing::debug!(room_id, "room hub opened");
        hub
    }

    /// Each room with listeners here, and how many (each open stream holds its room's hub).
    pub(crate) fn listeners(&self) -> Vec<(String, usize)> {
        let rooms = self
            .rooms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        rooms
            .iter()
            .map(|(room_id, hub)| (room_id.clone(), hub.strong_count()))
            .filter(|(_, listeners)| *listeners > 0)
            .collect()
    }

    /// Rooms with at least one listener here.
    pub(crate) fn rooms_followed(&self) -> usize {
        let rooms = self
            .rooms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        rooms.values().filter(|hub| hub.strong_count() > 0).count()
    }
}

impl RoomHub {
    /// A receiver of the room's latest view; its current value is already marked seen.
    pub(crate) fn views(&self) -> watch::Receiver<LatestView> {
        let mut views = self.views.clone();
        views.mark_unchanged();
        views
    }

    /// A stream's entry in the room's presence report (empty until the stream sets a ticket).
    pub(crate) fn presence(&self) -> StreamPresence {
        StreamPresence::new(self.stream_tickets.clone())
    }
}

impl Drop for RoomHub {
    fn drop(&mut self) {
        self.follower.abort();
        self.reporter.abort();
        let mut rooms = self
            .hubs
            .rooms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A listener may already have replaced this dying hub with a new one: leave that one be.
        let still_ours = rooms
            .get(&self.room_id)
            .is_some_and(|hub| hub.strong_count() == 0);
        if still_ours {
            rooms.remove(&self.room_id);
        }
        tracing::debug!(room_id = %self.room_id, hub_id = self.hub_id, "room hub closed");
    }
}

/// Follows one room's engine `Watch` stream into `sender` until aborted or shut down.
async fn follow_room(
    mut engine: EngineClient,
    room_id: String,
    sender: watch::Sender<LatestView>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut retry_in = FIRST_RETRY;
    // Warn once per outage, not on every retry of every followed room.
    let mut failing = false;
    loop {
        let request = WatchRequest {
            room_id: room_id.clone(),
        };
        let opened = tokio::select! {
            opened = engine.watch(request) => opened,
            _ = stopped(&mut shutdown) => return,
        };
        let failure = match opened {
            Ok(response) => {
                let mut stream = response.into_inner();
                loop {
                    let message = tokio::select! {
                        message = stream.message() => message,
                        _ = stopped(&mut shutdown) => return,
                    };
                    match message {
                        Ok(Some(view)) => {
                            if failing {
                                tracing::info!(room_id, "engine watch stream restored");
                                failing = false;
                            }
                            retry_in = FIRST_RETRY;
                            let branding = Branding::parse(&view.branding_json);
                            sender.send_replace(Some(Arc::new(HubView { view, branding })));
                        }
                        Ok(None) => break None,
                        Err(status) => break Some(status),
                    }
                }
            }
            Err(status) => Some(status),
        };
        match failure {
            Some(status) if !failing => {
                tracing::warn!(room_id, code = ?status.code(), message = status.message(), "engine watch stream broke, reconnecting");
                failing = true;
            }
            Some(status) => {
                tracing::debug!(room_id, code = ?status.code(), "engine watch still unavailable");
            }
            None => tracing::debug!(room_id, "engine watch stream ended, reconnecting"),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry_in) => {}
            _ = stopped(&mut shutdown) => return,
        }
        retry_in = (retry_in * 2).min(LONGEST_RETRY);
    }
}
