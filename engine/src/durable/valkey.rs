//! The live queue's storage in Valkey: the `qm` function library (`qm.lua`, loaded with
//! FUNCTION LOAD so it survives a restart and replicates) and typed calls of its functions.
//! Valkey decides nothing about a room: it lands the events an engine decided, in seq order,
//! only if the engine decided from the room as it stands (compare-and-set on the seq), and
//! keeps the newest of them so another engine can catch up. Every key of a room carries the
//! hash tag `{roomId}`, so a room's keys live on one Valkey Cluster slot: a `redis-cluster://`
//! VALKEY_URL runs the same calls on a cluster, the library loaded on every primary.

use std::collections::HashMap;
use std::time::Duration;

use fred::prelude::*;
use fred::types::config::{ConnectionConfig, PerformanceConfig, ReconnectPolicy};

use crate::domain::EventRecord;
use crate::targeting_counters::RoomCounts;

const LIBRARY: &str = include_str!("qm.lua");
/// Set once a Valkey holds rooms rebuilt or written by an engine; a Valkey that answers
/// without it has lost its data (a restart without persistence) and is rebuilt.
pub(crate) const EPOCH_KEY: &str = "qm:epoch";
/// Pub/sub channel of committed changes, so every engine's replicas and Watch streams follow.
pub(crate) const CHANGES_CHANNEL: &str = "qm:changes";

/// Reply statuses of `qm.lua` (its first block names the same numbers).
pub(crate) const LEASED_ELSEWHERE: i64 = -1;
pub(crate) const HELD: i64 = -2;
pub(crate) const MISSING: i64 = -3;
pub(crate) const STALE: i64 = -12;
pub(crate) const RENEWED: i64 = 1;
pub(crate) const TOOK_OVER: i64 = 2;

/// What became of a batch of events offered to Valkey.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Landing {
    Landed,
    /// Another engine landed first: Valkey is at `seq`. `events` are the ones after the seq
    /// the batch expected, when Valkey still had them all (else empty: read them yourself).
    Stale {
        seq: u64,
        events: Vec<EventRecord>,
    },
    /// The room is held for a rebuild.
    Held,
    /// Valkey lost the room (it knows nothing of it, though the engine does).
    Missing,
}

/// The room's seq in Valkey and the events after a given one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tail {
    /// `events` holds every event after the one asked for, or is empty when Valkey no longer
    /// has them all.
    At {
        seq: u64,
        events: Vec<EventRecord>,
    },
    Held,
    Missing,
}

/// The answer to a lease call, with the sightings (ticket, seen-at ms) the holder takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lease {
    Elsewhere,
    Renewed {
        sightings: Vec<(u64, i64)>,
    },
    TookOver {
        credit: u64,
        sightings: Vec<(u64, i64)>,
    },
}

/// A reply Valkey should never give: the library and the engine disagree.
fn malformed(what: &str) -> Error {
    Error::new(
        ErrorKind::Parse,
        format!("qm.lua answered an unexpected {what}"),
    )
}

fn integer(value: &Value) -> Result<i64, Error> {
    value.as_i64().ok_or_else(|| malformed("non-integer"))
}

/// Whether Valkey refused a call because it has no such function: nothing ran.
fn lost_the_library(error: &Error) -> bool {
    error.details().contains("Function not found")
}

/// Events (JSON records) from a reply; `None` if any does not parse.
fn parse_events(values: &[Value]) -> Option<Vec<EventRecord>> {
    values
        .iter()
        .map(|value| serde_json::from_str(&value.as_string()?).ok())
        .collect()
}

fn pairs(values: &[Value]) -> Result<Vec<(u64, i64)>, Error> {
    values
        .chunks(2)
        .map(|pair| match pair {
            [ticket, at] => Ok((integer(ticket)?.max(0) as u64, integer(at)?)),
            _ => Err(malformed("odd list of sightings")),
        })
        .collect()
}

/// The keys of one room, by their `qm.lua` names.
fn key(room_id: &str, suffix: &str) -> String {
    format!("qm:{{{room_id}}}:{suffix}")
}

fn keys(room_id: &str, suffixes: &[&str]) -> Vec<String> {
    suffixes.iter().map(|suffix| key(room_id, suffix)).collect()
}

#[derive(Clone)]
pub(crate) struct Valkey {
    client: Client,
}

impl Valkey {
    /// A client that never re-sends a command that was in flight when its connection closed
    /// (a landing must not run twice), gives up on a command after `timeout`, and keeps
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

    /// Loads (or replaces) the function library, on every primary of a cluster.
    pub(crate) async fn load_library(&self) -> Result<(), Error> {
        if self.client.is_clustered() {
            self.client
                .function_load_cluster::<Value, _>(true, LIBRARY)
                .await
                .map(|_| ())
        } else {
            self.client
                .function_load::<String, _>(true, LIBRARY)
                .await
                .map(|_| ())
        }
    }

    /// Calls a function; answers its status and the rest of its reply. A server that lost the
    /// library (one cluster node restarted empty) ran nothing: the call fails like any store
    /// error (the room is rebuilt), and the library is loaded again for the calls after it.
    async fn call(
        &self,
        function: &str,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<(i64, Vec<Value>), Error> {
        let mut values: Vec<Value> = match self.client.fcall(function, keys, args).await {
            Err(error) if lost_the_library(&error) => {
                tracing::warn!(%error, "valkey lost the function library; loading it again");
                if let Err(reload) = self.load_library().await {
                    tracing::warn!(error = %reload, "could not load the function library again");
                }
                return Err(error);
            }
            other => other?,
        };
        if values.is_empty() {
            return Err(malformed("empty reply"));
        }
        let status = integer(&values.remove(0))?;
        Ok((status, values))
    }

    /// Offers `events` (seq `expected + 1` on) to land on the room at `expected`. Events at or
    /// below `keep_after` are dropped from Valkey's tail (the journal has them).
    pub(crate) async fn land(
        &self,
        room_id: &str,
        expected: u64,
        keep_after: u64,
        events: &[EventRecord],
    ) -> Result<Landing, Error> {
        let mut args = Vec::with_capacity(events.len() + 2);
        args.push(expected.to_string());
        args.push(keep_after.to_string());
        for event in events {
            args.push(serde_json::to_string(event).map_err(|_| malformed("event"))?);
        }
        let (status, rest) = self
            .call("qm_land", keys(room_id, &["m", "e"]), args)
            .await?;
        Ok(match status {
            HELD => Landing::Held,
            MISSING => Landing::Missing,
            STALE => {
                let seq = rest.first().map(integer).transpose()?.unwrap_or(0).max(0) as u64;
                let events = parse_events(rest.get(1..).unwrap_or_default()).unwrap_or_default();
                Landing::Stale { seq, events }
            }
            landed if landed > 0 => Landing::Landed,
            _ => return Err(malformed("landing status")),
        })
    }

    /// The room's seq and the events after `after`.
    pub(crate) async fn tail(&self, room_id: &str, after: u64) -> Result<Tail, Error> {
        let (status, rest) = self
            .call(
                "qm_tail",
                keys(room_id, &["m", "e"]),
                vec![after.to_string()],
            )
            .await?;
        Ok(match status {
            HELD => Tail::Held,
            MISSING => Tail::Missing,
            seq if seq >= 0 => Tail::At {
                seq: seq as u64,
                events: parse_events(&rest).unwrap_or_default(),
            },
            _ => return Err(malformed("tail status")),
        })
    }

    /// Stores `sightings` and asks for the room's outflow lease for `lease`; a holder stores
    /// `credit` for whoever takes over. Sightings older than `trim_before` are forgotten.
    pub(crate) async fn lease(
        &self,
        room_id: &str,
        engine_id: &str,
        lease: Duration,
        credit: u64,
        trim_before: i64,
        sightings: &[(u64, i64)],
    ) -> Result<Lease, Error> {
        let mut args = Vec::with_capacity(4 + sightings.len() * 2);
        args.push(engine_id.to_owned());
        args.push(lease.as_millis().to_string());
        args.push(credit.to_string());
        args.push(trim_before.to_string());
        for (ticket, at_ms) in sightings {
            args.push(ticket.to_string());
            args.push(at_ms.to_string());
        }
        let (status, rest) = self
            .call("qm_lease", keys(room_id, &["m", "l", "s", "si"]), args)
            .await?;
        Ok(match status {
            LEASED_ELSEWHERE => Lease::Elsewhere,
            RENEWED => Lease::Renewed {
                sightings: pairs(&rest)?,
            },
            TOOK_OVER => Lease::TookOver {
                credit: rest.first().map(integer).transpose()?.unwrap_or(0).max(0) as u64,
                sightings: pairs(rest.get(1..).unwrap_or_default())?,
            },
            _ => return Err(malformed("lease status")),
        })
    }

    /// Replaces the room with one rebuilt from the journal at `seq` (with the outflow `credit`
    /// and this engine's `sightings`) and lifts the hold.
    pub(crate) async fn restore(
        &self,
        room_id: &str,
        seq: u64,
        credit: u64,
        sightings: &[(u64, i64)],
    ) -> Result<(), Error> {
        let mut args = vec![seq.to_string(), credit.to_string()];
        for (ticket, at_ms) in sightings {
            args.push(ticket.to_string());
            args.push(at_ms.to_string());
        }
        self.call("qm_restore", keys(room_id, &["m", "e", "s", "si"]), args)
            .await
            .map(|_| ())
    }

    /// Adds one engine's targeting counts since its last flush to the room's shared ones.
    pub(crate) async fn add_targeting(
        &self,
        room_id: &str,
        counts: &RoomCounts,
    ) -> Result<(), Error> {
        let (generation, rev) = counts.era();
        let mut args = Vec::with_capacity(4 + counts.rules.len() * 2);
        args.push(generation.to_string());
        args.push(rev.to_string());
        args.push(counts.unmatched.to_string());
        args.push(counts.no_url.to_string());
        for rule in &counts.rules {
            args.push(rule.matches.to_string());
            args.push(rule.last_matched_at_ms.unwrap_or(0).to_string());
        }
        self.call("qm_count", keys(room_id, &["tc"]), args)
            .await
            .map(|_| ())
    }

    /// The room's shared targeting counts at `era` (generation, rule revision): zeros when
    /// what is stored counts another era, or nothing is.
    pub(crate) async fn targeting(
        &self,
        room_id: &str,
        era: (u64, u64),
        rules: usize,
    ) -> Result<RoomCounts, Error> {
        let stored: HashMap<String, i64> = self.client.hgetall(key(room_id, "tc")).await?;
        let number = |field: &str| stored.get(field).copied().unwrap_or(0).max(0) as u64;
        let mut counts = RoomCounts::fresh(era.0, era.1, rules);
        if (number("g"), number("r")) != era {
            return Ok(counts);
        }
        counts.unmatched = number("unmatched");
        counts.no_url = number("no_url");
        for (index, rule) in counts.rules.iter_mut().enumerate() {
            rule.matches = number(&format!("m{index}"));
            rule.last_matched_at_ms = stored
                .get(&format!("a{index}"))
                .copied()
                .filter(|at| *at > 0);
        }
        Ok(counts)
    }

    /// Marks the room held: every landing is refused until a restore lifts the hold.
    pub(crate) async fn hold(&self, room_id: &str) -> Result<(), Error> {
        self.client
            .hset::<i64, _, _>(key(room_id, "m"), ("hold", "1"))
            .await
            .map(|_| ())
    }

    /// Deletes every key of the room.
    pub(crate) async fn forget(&self, room_id: &str) -> Result<(), Error> {
        self.client
            .del::<i64, _>(keys(room_id, &["m", "e", "l", "s", "si", "tc"]))
            .await
            .map(|_| ())
    }

    /// Deletes the keys earlier versions kept for a room (the line itself, which Valkey no
    /// longer holds): the first start of this version cleans them up.
    pub(crate) async fn drop_earlier_keys(&self, room_id: &str) -> Result<(), Error> {
        self.client
            .del::<i64, _>(keys(room_id, &["h", "p", "t", "i", "n", "q", "qi"]))
            .await
            .map(|_| ())
    }

    /// The room's seq in Valkey (`None` when Valkey has no such room at all).
    pub(crate) async fn seq(&self, room_id: &str) -> Result<Option<u64>, Error> {
        self.client.hget(key(room_id, "m"), "seq").await
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every number `qm.lua` names in its status block, and the engine's name for it.
    #[test]
    fn the_statuses_both_languages_name_are_equal() {
        let engine = [
            ("LEASED_ELSEWHERE", LEASED_ELSEWHERE),
            ("HELD", HELD),
            ("MISSING", MISSING),
            ("STALE", STALE),
            ("RENEWED", RENEWED),
            ("TOOK_OVER", TOOK_OVER),
        ];
        let lua: Vec<(String, i64)> = LIBRARY
            .lines()
            .filter_map(|line| {
                let (name, value) = line.strip_prefix("local ")?.split_once(" = ")?;
                let value: i64 = value.trim().parse().ok()?;
                Some((name.to_owned(), value))
            })
            .filter(|(name, _)| name != "MAX_STALE_EVENTS")
            .collect();
        let engine: Vec<(String, i64)> = engine
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect();
        assert_eq!(
            lua, engine,
            "qm.lua's statuses and valkey.rs's agree, in order"
        );
    }
}
