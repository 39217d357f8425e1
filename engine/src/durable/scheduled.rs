//! The scheduled drop on the durable store: a pre-queue entry is one `qm_prejoin`, and the
//! draw is built by an engine from its replica (Lua has no crypto-grade randomness) and landed
//! by `qm_draw` only if Valkey still holds exactly the room that replica saw. The `Drawn` event
//! carries the whole order, so a restart across the open instant replays it, never redraws.

use qm_core::ApiError;

use super::replicas::Replica;
use super::{DurableStore, valkey};
use crate::domain::{JoinRequest, LapseReason, PlaceStatus, RoomEvent, pre_queue_full};

impl DurableStore {
    /// Enters the pre-queue. `None` when the doors opened under us (the caller joins the line).
    pub(super) async fn pre_join_now(
        &self,
        replica: &Replica,
        request: &JoinRequest,
        replaced: Option<LapseReason>,
        now: i64,
    ) -> Result<Option<PlaceStatus>, ApiError> {
        if let Some(refusal) = replica.read(|room| room.pre_join_refusal(request)) {
            return Err(refusal);
        }
        let ceiling = request.effective_pre_queue_ceiling();
        let room_id = replica.read(|room| room.room_id().to_owned());
        let handle = replica.read(|room| room.new_handle(&mut rand::rng()));
        let reply = self.guard(
            &room_id,
            self.shared
                .valkey
                .prejoin(
                    &room_id,
                    now,
                    handle,
                    &request.identity,
                    ceiling,
                    !request.session_hash.is_empty(),
                )
                .await,
        )?;
        match reply.status {
            // Valkey saw entries this replica has not applied yet; its word is final.
            valkey::IDENTITY_LIMIT => {
                return Err(replica.read(|room| room.pre_queue_identity_limit()));
            }
            valkey::PRE_QUEUE_FULL => return Err(pre_queue_full()),
            valkey::DOORS_OPEN | valkey::HANDLE_TAKEN => {
                self.shared.catch_up(&room_id).await;
                return Ok(None);
            }
            _ => {}
        }
        let event = RoomEvent::PreJoined {
            handle,
            session_hash: request.session_hash.clone(),
            identity: request.identity.clone(),
        };
        self.record(&room_id, reply.status, now, event).await?;
        Ok(Some(replica.read(|room| {
            room.minted_pre_queue_place(handle, replaced, qm_core::clock::now_ms())
        })))
    }

    /// Draws the pre-queue into the line if the doors have opened on it. A draw another engine
    /// landed first, or one built on a replica that was behind, is settled by catching up.
    pub(super) async fn draw_now(&self, replica: &Replica, now: i64) -> Result<(), ApiError> {
        let (room_id, seq, order) = replica.read(|room| {
            (
                room.room_id().to_owned(),
                room.seq(),
                room.draw_order_now(&mut rand::rng()),
            )
        });
        if order.is_empty() {
            return Ok(());
        }
        let reply = self.guard(
            &room_id,
            self.shared.valkey.draw(&room_id, now, seq, &order).await,
        )?;
        match reply.status {
            0 => return Ok(()),
            valkey::STALE_DRAW => {
                self.shared.catch_up(&room_id).await;
                return Ok(());
            }
            _ => {}
        }
        let first_ticket = reply.value(0);
        let drawn = order.len();
        self.record(
            &room_id,
            reply.status,
            now,
            RoomEvent::Drawn {
                first_ticket,
                order,
            },
        )
        .await?;
        tracing::info!(room_id, drawn, first_ticket, "pre-queue drawn");
        Ok(())
    }
}
