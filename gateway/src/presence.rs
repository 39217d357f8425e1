//! Presence reports (QM-345). A waiting page's stream heartbeat is generated here, in the
//! gateway, from the room hub's view, so the engine never sees it; yet the heartbeat is what
//! tells the engine the holder is still there. Each room hub therefore keeps the tickets of its
//! open, bound streams and reports them to the engine in one `Seen` call per room per
//! heartbeat, however many streams the room has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use qm_core::shutdown::stopped;
use qm_proto::{EngineClient, SeenRequest};
use tokio::sync::watch;

use crate::stream_clock::HEARTBEAT;

/// Open streams per ticket of one room (a visitor may hold several tabs).
#[derive(Default)]
pub(crate) struct StreamTickets {
    /// A std mutex: held only to count, never across an await.
    tickets: Mutex<HashMap<u64, usize>>,
}

impl StreamTickets {
    fn tickets(&self) -> MutexGuard<'_, HashMap<u64, usize>> {
        self.tickets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn add(&self, ticket: u64) {
        *self.tickets().entry(ticket).or_default() += 1;
    }

    fn remove(&self, ticket: u64) {
        let mut tickets = self.tickets();
        if let Some(count) = tickets.get_mut(&ticket) {
            *count -= 1;
            if *count == 0 {
                tickets.remove(&ticket);
            }
        }
    }

    fn snapshot(&self) -> Vec<u64> {
        let mut tickets: Vec<u64> = self.tickets().keys().copied().collect();
        tickets.sort_unstable();
        tickets
    }
}

/// One stream's entry in its room's report; it leaves the report when dropped.
pub(crate) struct StreamPresence {
    tickets: Arc<StreamTickets>,
    ticket: Option<u64>,
}

impl StreamPresence {
    pub(crate) fn new(tickets: Arc<StreamTickets>) -> StreamPresence {
        StreamPresence {
            tickets,
            ticket: None,
        }
    }

    /// The ticket this stream vouches for now: `None` when its place is not (or no longer) a
    /// ticket its ownership cookie proves.
    pub(crate) fn set(&mut self, ticket: Option<u64>) {
        let ticket = ticket.filter(|ticket| *ticket > 0);
        if ticket == self.ticket {
            return;
        }
        if let Some(old) = self.ticket.take() {
            self.tickets.remove(old);
        }
        if let Some(new) = ticket {
            self.tickets.add(new);
        }
        self.ticket = ticket;
    }
}

impl Drop for StreamPresence {
    fn drop(&mut self) {
        self.set(None);
    }
}

/// Reports the room's stream tickets to the engine every heartbeat until aborted (the hub is
/// gone) or the process stops. A failed report is only logged: the next one carries the same.
pub(crate) async fn report_room(
    mut engine: EngineClient,
    room_id: String,
    tickets: Arc<StreamTickets>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(HEARTBEAT) => {}
            () = stopped(&mut shutdown) => return,
        }
        let tickets = tickets.snapshot();
        if tickets.is_empty() {
            continue;
        }
        let request = SeenRequest {
            room_id: room_id.clone(),
            tickets,
        };
        if let Err(status) = engine.seen(request).await {
            tracing::debug!(room_id, code = ?status.code(), "presence report failed");
        }
    }
}
