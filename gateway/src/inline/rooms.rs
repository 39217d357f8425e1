//! What the gate needs to know of an inline room besides the door's answer: where to forward
//! (`proxyOrigin`) and what to do while the backend is down (`onBackendDown`). Read with the
//! engine's RoomInfo and kept for [`FRESH_FOR`], so a page with fifty assets costs one door
//! check each and not two engine calls; an operator's change reaches every gateway within that
//! second. The last answer is kept past it, only for when the engine cannot be asked: a gate
//! whose engine is down still knows whether the room stays open or closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use qm_core::ApiError;
use qm_proto::RoomRef;

use super::proxy::OriginTarget;
use crate::GatewayState;

/// How long a RoomInfo answer is used before the engine is asked again.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// An inline room's forwarding settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct InlineRoom {
    pub(super) found: bool,
    /// `scheme://host[:port]`, empty when the room has none.
    pub(super) proxy_origin: String,
    /// Where `proxy_origin` points, when it is an `http://` origin.
    pub(super) target: Option<OriginTarget>,
    /// `onBackendDown: "open"`: forward unqueued while the backend is down.
    pub(super) open_when_down: bool,
}

/// The room's settings, or why they cannot be had.
pub(super) enum Lookup {
    Known(Arc<InlineRoom>),
    /// The engine could not be asked; the last answer, if there was one.
    Unreachable(ApiError, Option<Arc<InlineRoom>>),
}

#[derive(Default)]
pub(super) struct RoomCache {
    entries: Mutex<HashMap<String, (Instant, Arc<InlineRoom>)>>,
}

impl RoomCache {
    pub(super) async fn get(&self, state: &GatewayState, room_id: &str) -> Lookup {
        let cached = self.cached(room_id);
        if let Some((at, room)) = &cached
            && at.elapsed() < FRESH_FOR
        {
            return Lookup::Known(room.clone());
        }
        let asked = state
            .engine
            .clone()
            .room_info(RoomRef {
                room_id: room_id.to_owned(),
            })
            .await;
        match asked {
            Ok(info) => {
                let info = info.into_inner();
                let room = Arc::new(InlineRoom {
                    found: info.found,
                    target: OriginTarget::parse(&info.proxy_origin),
                    proxy_origin: info.proxy_origin,
                    open_when_down: info.on_backend_down == "open",
                });
                self.entries
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(room_id.to_owned(), (Instant::now(), room.clone()));
                Lookup::Known(room)
            }
            Err(status) => {
                Lookup::Unreachable(ApiError::from_status(&status), cached.map(|(_, room)| room))
            }
        }
    }

    fn cached(&self, room_id: &str) -> Option<(Instant, Arc<InlineRoom>)> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room_id)
            .cloned()
    }
}
