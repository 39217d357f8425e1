//! The state the durable store's tasks share: the two servers, the room table, which rooms
//! wait for a rebuild, whether both servers answer, and the counters of landings.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::{mpsc, watch};

use super::committer::Committer;
use super::feed::Change;
use super::journal::Journal;
use super::outflow::Sightings;
use super::valkey::Valkey;
use super::writer::{Trouble, Writer};
use crate::Environment;
use crate::metrics::{Backend, StoreMetrics};
use crate::rooms::{RoomTable, lock};

pub(crate) struct Shared {
    pub(crate) engine_id: String,
    /// The clock and the randomness commands run with.
    pub(crate) environment: Environment,
    pub(crate) valkey: Valkey,
    pub(crate) journal: Journal,
    /// Each room id this engine knows: the replica (committed events only; every read and
    /// Watch stream answers from it) and, beside it, the writer with the live copy.
    pub(crate) rooms: RoomTable<Writer>,
    /// Set once the committer runs (it needs this state to apply what it commits).
    pub(crate) committer: std::sync::OnceLock<Committer>,
    /// Rooms whose Valkey state is ahead of (or lost from) the journal, waiting for a rebuild.
    diverged: Mutex<HashSet<String>>,
    journal_ok: AtomicBool,
    valkey_ok: AtomicBool,
    pub(crate) ready: watch::Sender<bool>,
    /// Changes to announce, in order, by a task of their own so no commit waits on pub/sub.
    pub(crate) announcements: mpsc::UnboundedSender<Change>,
    /// Sightings of holders (QM-345) waiting to be written to Valkey, once a second per room.
    pub(crate) sightings: Sightings,
    /// Batches offered to Valkey, and those refused because another engine landed first.
    pub(crate) landings: AtomicU64,
    pub(crate) stale_landings: AtomicU64,
    /// The journal's commit latency and batch size, backend errors and rebuilds (`/metrics`).
    pub(crate) metrics: StoreMetrics,
}

impl Shared {
    pub(crate) fn new(
        valkey: Valkey,
        journal: Journal,
        announcements: mpsc::UnboundedSender<Change>,
        environment: Environment,
    ) -> Shared {
        Shared {
            engine_id: qm_core::ids::new_session_id(),
            environment,
            valkey,
            journal,
            rooms: RoomTable::default(),
            committer: std::sync::OnceLock::new(),
            diverged: Mutex::new(HashSet::new()),
            journal_ok: AtomicBool::new(true),
            valkey_ok: AtomicBool::new(true),
            ready: watch::channel(true).0,
            announcements,
            sightings: Sightings::default(),
            landings: AtomicU64::new(0),
            stale_landings: AtomicU64::new(0),
            metrics: StoreMetrics::default(),
        }
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.environment.now_ms()
    }

    pub(crate) fn is_diverged(&self, room_id: &str) -> bool {
        lock(&self.diverged).contains(room_id)
    }

    /// Marks a room for rebuild: it refuses changes until then.
    pub(crate) fn diverge(&self, room_id: &str) {
        lock(&self.diverged).insert(room_id.to_owned());
        if let Some(slot) = self.rooms.get(room_id)
            && slot.extra.trouble().is_none()
        {
            slot.extra.set_trouble(Some(Trouble::Rebuilding));
        }
    }

    pub(crate) fn undiverge(&self, room_id: &str) {
        lock(&self.diverged).remove(room_id);
    }

    pub(crate) fn diverged(&self) -> Vec<String> {
        lock(&self.diverged).iter().cloned().collect()
    }

    pub(crate) fn set_journal_ok(&self, ok: bool) {
        if !ok {
            self.metrics.failed(Backend::Postgres);
        }
        self.journal_ok.store(ok, Ordering::Relaxed);
        self.update_ready();
    }

    pub(crate) fn set_valkey_ok(&self, ok: bool) {
        if !ok {
            self.metrics.failed(Backend::Valkey);
        }
        self.valkey_ok.store(ok, Ordering::Relaxed);
        self.update_ready();
    }

    /// Valkey answered the last call or probe.
    pub(crate) fn is_valkey_ok(&self) -> bool {
        self.valkey_ok.load(Ordering::Relaxed)
    }

    pub(crate) fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    fn update_ready(&self) {
        let ready =
            self.journal_ok.load(Ordering::Relaxed) && self.valkey_ok.load(Ordering::Relaxed);
        self.ready.send_if_modified(|current| {
            let changed = *current != ready;
            *current = ready;
            changed
        });
    }

    /// The slot of `room_id`, made with an unborn room when this engine has none.
    pub(crate) fn slot(&self, room_id: &str) -> std::sync::Arc<crate::rooms::Slot<Writer>> {
        self.rooms.get_or_make(room_id, || {
            Writer::new(crate::domain::Room::unborn(room_id))
        })
    }
}
