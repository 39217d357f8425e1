//! The live queue in Valkey: the `qm` function library (`qm.lua`, loaded with FUNCTION LOAD so
//! it survives a restart and replicates) and typed calls of its functions. Every key of a room
//! carries the hash tag `{roomId}`, so a room's keys live on one Valkey Cluster slot.

use std::time::Duration;

use fred::prelude::*;
use fred::types::config::{ConnectionConfig, PerformanceConfig, ReconnectPolicy};
use qm_core::room::RoomConfig;

use crate::domain::Room;

const LIBRARY: &str = include_str!("qm.lua");
/// Set once a Valkey holds rooms rebuilt or written by an engine; a Valkey that answers
/// without it has lost its data (a restart without persistence) and is rebuilt.
pub(crate) const EPOCH_KEY: &str = "qm:epoch";
/// Pub/sub channel of committed changes, so every engine's replicas and Watch streams follow.
pub(crate) const CHANGES_CHANNEL: &str = "qm:changes";

/// A function's reply: `status` is the new seq (> 0), 0 for "nothing changed", or one of the
/// negative statuses of `qm.lua` (-1, "another engine holds the lease", needs no name: the
/// tick simply does nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) status: i64,
    pub(crate) values: Vec<i64>,
}

impl Reply {
    pub(crate) fn value(&self, index: usize) -> u64 {
        self.values.get(index).copied().unwrap_or_default().max(0) as u64
    }

    /// Every value from `index` on (the ghost tickets a promotion appends).
    pub(crate) fn values_from(&self, index: usize) -> Vec<u64> {
        self.values
            .iter()
            .skip(index)
            .map(|value| (*value).max(0) as u64)
            .collect()
    }
}

pub(crate) const HELD: i64 = -2;
pub(crate) const MISSING: i64 = -3;
pub(crate) const NO_ROOM: i64 = -4;
pub(crate) const IDENTITY_LIMIT: i64 = -5;
pub(crate) const BYPASS: i64 = -6;
pub(crate) const EXISTS: i64 = -7;
pub(crate) const PRE_QUEUE_FULL: i64 = -8;
pub(crate) const HANDLE_TAKEN: i64 = -9;
pub(crate) const DOORS_OPEN: i64 = -10;
pub(crate) const DRAW_PENDING: i64 = -11;
pub(crate) const STALE_DRAW: i64 = -12;
pub(crate) const DOORS_SHUT: i64 = -13;

/// The keys of one room, in the order `qm.lua` expects them.
fn keys(room_id: &str) -> Vec<String> {
    ["m", "h", "p", "t", "i", "l", "s", "n", "q", "qi"]
        .iter()
        .map(|suffix| format!("qm:{{{room_id}}}:{suffix}"))
        .collect()
}

/// The room facts the functions decide by, as function arguments:
/// state rate opens maxc ttl qmax pres pqmax.
pub(crate) fn config_args(config: &RoomConfig) -> [String; 8] {
    [
        config.state.as_str().to_owned(),
        config.rate_per_minute.to_string(),
        config.opens_at.map(|at| at.to_string()).unwrap_or_default(),
        config
            .max_concurrent
            .map(|max| max.to_string())
            .unwrap_or_default(),
        (config.passed_ttl_sec * 1000).to_string(),
        config
            .queue_max_per_ip
            .map(|cap| cap.to_string())
            .unwrap_or_default(),
        config
            .presence_sec
            .map(|seconds| (seconds * 1000).to_string())
            .unwrap_or_default(),
        pre_queue_cap_arg(config.pre_queue_max_per_ip),
    ]
}

/// `preQueueMaxPerIp` as the `pqmax` field ('' = unlimited).
pub(crate) fn pre_queue_cap_arg(cap: Option<u32>) -> String {
    cap.map(|cap| cap.to_string()).unwrap_or_default()
}

#[derive(Clone)]
pub(crate) struct Valkey {
    client: Client,
}

impl Valkey {
    /// A client that never re-sends a command that was in flight when its connection closed
    /// (a join must not run twice), gives up on a command after `timeout`, and keeps
    /// reconnecting in the background.
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Valkey, Error> {
        let config = Config::from_url(url)?;
        let client = Builder::from_config(config)
            .set_connection_config(ConnectionConfig {
                connection_timeout: timeout,
                internal_command_timeout: timeout,
                max_command_attempts: 1,
                ..ConnectionConfig::default()
            })
            .set_performance_config(PerformanceConfig {
                default_command_timeout: timeout,
                ..PerformanceConfig::default()
            })
            .set_policy(ReconnectPolicy::new_constant(0, 100))
            .build()?;
        Ok(Valkey { client })
    }

    pub(crate) async fn connect(&self) -> Result<(), Error> {
        self.client.init().await.map(|_| ())
    }

    /// Loads (or replaces) the function library.
    pub(crate) async fn load_library(&self) -> Result<(), Error> {
        self.client
            .function_load::<String, _>(true, LIBRARY)
            .await
            .map(|_| ())
    }

    async fn call(&self, function: &str, room_id: &str, args: Vec<String>) -> Result<Reply, Error> {
        let values: Vec<i64> = self.client.fcall(function, keys(room_id), args).await?;
        let status = values.first().copied().unwrap_or_default();
        Ok(Reply {
            status,
            values: values.into_iter().skip(1).collect(),
        })
    }

    pub(crate) async fn create(
        &self,
        room_id: &str,
        now_ms: i64,
        generation: u64,
        config: &RoomConfig,
    ) -> Result<Reply, Error> {
        let mut args = vec![now_ms.to_string(), generation.to_string()];
        args.extend(config_args(config));
        self.call("qm_create", room_id, args).await
    }

    pub(crate) async fn update(
        &self,
        room_id: &str,
        now_ms: i64,
        config: &RoomConfig,
    ) -> Result<Reply, Error> {
        let mut args = vec![now_ms.to_string()];
        args.extend(config_args(config));
        self.call("qm_update", room_id, args).await
    }

    pub(crate) async fn join(
        &self,
        room_id: &str,
        now_ms: i64,
        identity: &str,
        has_holder: bool,
    ) -> Result<Reply, Error> {
        let holder = if has_holder { "1" } else { "" };
        self.call(
            "qm_join",
            room_id,
            vec![now_ms.to_string(), identity.to_owned(), holder.to_owned()],
        )
        .await
    }

    /// Records a batch of sightings `(ticket, seen_at_ms)` of one room (`qm_seen`).
    pub(crate) async fn seen(
        &self,
        room_id: &str,
        now_ms: i64,
        sightings: &[(u64, i64)],
    ) -> Result<Reply, Error> {
        let mut args = Vec::with_capacity(1 + sightings.len() * 2);
        args.push(now_ms.to_string());
        for (ticket, at_ms) in sightings {
            args.push(ticket.to_string());
            args.push(at_ms.to_string());
        }
        self.call("qm_seen", room_id, args).await
    }

    pub(crate) async fn tick(
        &self,
        room_id: &str,
        now_ms: i64,
        engine_id: &str,
        lease: Duration,
    ) -> Result<Reply, Error> {
        let args = vec![
            now_ms.to_string(),
            engine_id.to_owned(),
            lease.as_millis().to_string(),
        ];
        self.call("qm_tick", room_id, args).await
    }

    pub(crate) async fn flush(
        &self,
        room_id: &str,
        now_ms: i64,
        count: u64,
    ) -> Result<Reply, Error> {
        self.call(
            "qm_flush",
            room_id,
            vec![now_ms.to_string(), count.to_string()],
        )
        .await
    }

    pub(crate) async fn eject(
        &self,
        room_id: &str,
        now_ms: i64,
        ticket: u64,
    ) -> Result<Reply, Error> {
        self.call(
            "qm_eject",
            room_id,
            vec![now_ms.to_string(), ticket.to_string()],
        )
        .await
    }

    pub(crate) async fn purge(&self, room_id: &str, now_ms: i64) -> Result<Reply, Error> {
        self.call("qm_purge", room_id, vec![now_ms.to_string()])
            .await
    }

    /// Sets one decision field (`rate`, `state` or `opens`) and records an event.
    /// Sets meta fields (`rate`, `state`, `opens`, `pqmax`) in one recorded change.
    pub(crate) async fn set(
        &self,
        room_id: &str,
        now_ms: i64,
        fields: &[(&str, String)],
    ) -> Result<Reply, Error> {
        let mut args = vec![now_ms.to_string()];
        for (field, value) in fields {
            args.push((*field).to_owned());
            args.push(value.clone());
        }
        self.call("qm_set", room_id, args).await
    }

    pub(crate) async fn prejoin(
        &self,
        room_id: &str,
        now_ms: i64,
        handle: u64,
        identity: &str,
        ceiling: u64,
        has_holder: bool,
    ) -> Result<Reply, Error> {
        let args = vec![
            now_ms.to_string(),
            handle.to_string(),
            identity.to_owned(),
            ceiling.to_string(),
            if has_holder { "1" } else { "0" }.to_owned(),
        ];
        self.call("qm_prejoin", room_id, args).await
    }

    /// Lands a draw built from a replica at `seq`; answers `{seq, first ticket}` or a status.
    pub(crate) async fn draw(
        &self,
        room_id: &str,
        now_ms: i64,
        seq: u64,
        order: &[u64],
    ) -> Result<Reply, Error> {
        let mut args = Vec::with_capacity(order.len() + 2);
        args.push(now_ms.to_string());
        args.push(seq.to_string());
        args.extend(order.iter().map(u64::to_string));
        self.call("qm_draw", room_id, args).await
    }

    pub(crate) async fn delete(&self, room_id: &str, now_ms: i64) -> Result<Reply, Error> {
        self.call("qm_delete", room_id, vec![now_ms.to_string()])
            .await
    }

    /// Marks the room held: every function refuses it until a restore lifts the hold.
    pub(crate) async fn hold(&self, room_id: &str) -> Result<(), Error> {
        let meta = &keys(room_id)[0];
        self.client
            .hset::<i64, _, _>(meta.as_str(), ("hold", "1"))
            .await
            .map(|_| ())
    }

    /// Deletes every key of the room.
    pub(crate) async fn forget(&self, room_id: &str) -> Result<(), Error> {
        self.client.del::<i64, _>(keys(room_id)).await.map(|_| ())
    }

    /// The room's seq in Valkey (`None` when Valkey has no such room at all).
    pub(crate) async fn seq(&self, room_id: &str) -> Result<Option<u64>, Error> {
        let meta = &keys(room_id)[0];
        let seq: Option<u64> = self.client.hget(meta.as_str(), "seq").await?;
        Ok(seq)
    }

    /// Replaces the room's keys with `room`, a state folded from the journal, and lifts the hold.
    pub(crate) async fn restore(&self, room: &Room) -> Result<(), Error> {
        let state = restore_state(room);
        self.call("qm_restore", room.room_id(), vec![state.to_string()])
            .await
            .map(|_| ())
    }

    pub(crate) async fn epoch(&self) -> Result<Option<String>, Error> {
        self.client.get(EPOCH_KEY).await
    }

    pub(crate) async fn set_epoch(&self, epoch: &str) -> Result<(), Error> {
        self.client
            .set::<(), _, _>(EPOCH_KEY, epoch, None, None, false)
            .await
    }

    pub(crate) async fn publish(&self, message: String) -> Result<(), Error> {
        self.client
            .publish::<i64, _, _>(CHANGES_CHANNEL, message)
            .await
            .map(|_| ())
    }
}

/// The `qm_restore` argument: every field the functions read, from a room folded from its
/// journal.
fn restore_state(room: &Room) -> serde_json::Value {
    let config = room.config();
    let [state, rate, opens, maxc, ttl, qmax, pres, pqmax] = config_args(config);
    let identities: Vec<serde_json::Value> = (room.head..room.next_ticket)
        .filter_map(|ticket| {
            let record = room.ticket(ticket)?;
            (record.status == crate::domain::TicketStatus::Waiting && !record.identity.is_empty())
                .then(|| serde_json::json!([ticket, record.identity]))
        })
        .collect();
    let passes_where = |slotless: bool| -> Vec<serde_json::Value> {
        room.passes
            .iter()
            .filter(|pass| pass.slotless == slotless)
            .map(|pass| serde_json::json!([pass.ticket, pass.at_ms]))
            .collect()
    };
    let (passes, slotless) = (passes_where(false), passes_where(true));
    let (seen, holderless) = restore_presence(room);
    serde_json::json!({
        "meta": {
            "seq": room.seq,
            "gen": room.generation,
            "exists": if room.deleted { "0" } else { "1" },
            "next": room.next_ticket,
            "head": room.head,
            "state": state, "rate": rate, "opens": opens, "maxc": maxc, "ttl": ttl, "qmax": qmax,
            "pres": pres,
            "pqmax": pqmax,
            "credit": room.carry.credit_sixtieths,
            "lastsec": "",
        },
        "holes": room.holes,
        "passes": passes,
        "slotless": slotless,
        "identities": identities,
        "seen": seen,
        "holderless": holderless,
        // Handles as strings: Lua numbers print large integers in exponent form.
        "prequeue": room
            .pre_queue
            .entries
            .iter()
            .map(|entry| {
                let holder = if entry.session_hash.is_empty() { "0" } else { "1" };
                serde_json::json!([entry.handle.to_string(), entry.identity, holder])
            })
            .collect::<Vec<_>>(),
    })
}

/// The presence a restore puts back (the `s` key of `qm.lua`): the replica's sightings (at
/// least each join) of waiting tickets and live passes with a holder, a holderless pass as seen
/// at its grant, and the holderless waiting tickets (always present, `+inf`).
fn restore_presence(room: &Room) -> (Vec<serde_json::Value>, Vec<u64>) {
    use crate::domain::TicketStatus;
    let mut seen = Vec::new();
    let mut holderless = Vec::new();
    for pass in &room.passes {
        if let Some(record) = room.ticket(pass.ticket) {
            let at_ms = if record.session_hash.is_empty() {
                pass.at_ms
            } else {
                room.presence
                    .get(&pass.ticket)
                    .copied()
                    .unwrap_or(record.joined_at_ms)
            };
            seen.push(serde_json::json!([pass.ticket, at_ms]));
        }
    }
    for ticket in room.head..room.next_ticket {
        let Some(record) = room.ticket(ticket) else {
            continue;
        };
        if record.status != TicketStatus::Waiting {
            continue;
        }
        if record.session_hash.is_empty() {
            holderless.push(ticket);
        } else {
            let at_ms = room
                .presence
                .get(&ticket)
                .copied()
                .unwrap_or(record.joined_at_ms);
            seen.push(serde_json::json!([ticket, at_ms]));
        }
    }
    (seen, holderless)
}
