//! The rate controller (`autotune`): it reads each tuned room's origin health and moves the
//! room's rate within `[minRate, maxRate]` from what it says.
//!
//! What it reads ([`sources`]): a room that names a `healthUrl` is probed every
//! `AUTOTUNE_PROBE_MS` (a plain `GET`, timed out at twice the target, at most 10 s; a failed
//! probe counts as one at the timeout). An inline room (a `proxyOrigin`) that names none is read
//! from the answers the gateways' inline gates forwarded to its origin: each gateway reports a
//! sample of them every second (`OriginAnswers`), an answer failed when the origin refused, could
//! not be reached, did not answer in time, or answered 5xx.
//!
//! Once a decision has at least [`rule::MIN_SAMPLES`] samples taken since the last change, and
//! the cool-down (`coolDownSec`) since that change has passed, [`rule::decide`] lowers the rate
//! by a tenth on a p95 over the target or more than 5 % failed, raises it by a twentieth on a p95
//! under 80 % of the target with none failed, and holds in between. That band, the smaller step
//! up than down and the cool-down keep the rate from oscillating: a steady origin settles, it
//! does not swing. A rate outside the bounds (set by an operator) is brought inside at the next
//! decision.
//!
//! Each change is an ordinary rate change (journaled like an operator's) and an audit entry
//! `room.autotune` by `autotune · system` whose summary says why ("rate lowered to 90/min:
//! origin p95 1800 ms over the 1500 ms target"), which the console shows. Samples and decisions
//! are this engine's; with several engines each tunes on what it sees.

mod rule;
mod sources;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use qm_core::room::Autotune;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::access::Access;
use crate::shutdown::stopped;
use crate::store::Store;
use rule::{Change, Sample, Source};
pub(crate) use sources::InlineAnswers;
use sources::Samples;

/// The longest a probe waits.
const PROBE_TIMEOUT_MOST: Duration = Duration::from_secs(10);

/// One tuned room: where its samples come from and what they say since the last change.
struct Tuned {
    /// The health URL probed, `None` for an inline room read from its answers.
    url: Option<String>,
    /// The health URL's prober (none for an inline room).
    prober: Option<JoinHandle<()>>,
    samples: Samples,
    last_change: Option<Instant>,
}

impl Tuned {
    fn source(&self) -> Source {
        match self.url {
            Some(_) => Source::HealthUrl,
            None => Source::Inline,
        }
    }
}

impl Drop for Tuned {
    fn drop(&mut self) {
        if let Some(prober) = &self.prober {
            prober.abort();
        }
    }
}

/// What the controller needs besides the store.
pub(crate) struct Controller {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) access: Arc<Access>,
    pub(crate) inline_answers: Arc<InlineAnswers>,
    pub(crate) probe_every: Duration,
}

/// Runs the controller once a second until the stop flag is set.
pub(crate) async fn run(controller: Controller, mut stop: watch::Receiver<bool>) {
    let http = reqwest::Client::new();
    let mut tuned: HashMap<String, Tuned> = HashMap::new();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopped(&mut stop) => break,
        }
        let Ok(rooms) = controller.store.list_rooms().await else {
            continue;
        };
        let mut seen = Vec::new();
        for room in &rooms {
            let Some(tuning) = tuned_room(room) else {
                continue;
            };
            seen.push(tuning.id.to_owned());
            let entry = match tuned.remove(tuning.id) {
                Some(entry) if entry.url == tuning.settings.health_url => entry,
                _ => start(&controller, &http, &tuning),
            };
            let entry = tuned.entry(tuning.id.to_owned()).or_insert(entry);
            decide_and_apply(&controller, &tuning, entry).await;
        }
        tuned.retain(|id, _| seen.contains(id));
        controller
            .inline_answers
            .retain(|id| tuned.get(id).is_some_and(|entry| entry.url.is_none()));
    }
}

/// Begins reading a room's health: its prober, or its inline answers.
fn start(controller: &Controller, http: &reqwest::Client, tuning: &Tuning<'_>) -> Tuned {
    let Some(url) = tuning.settings.health_url.clone() else {
        return Tuned {
            url: None,
            prober: None,
            samples: controller.inline_answers.listen(tuning.id),
            last_change: None,
        };
    };
    let samples = Samples::default();
    let timeout = Duration::from_millis(tuning.settings.target_p95_ms().saturating_mul(2))
        .min(PROBE_TIMEOUT_MOST);
    let prober = tokio::spawn(sources::probe_forever(
        http.clone(),
        url.clone(),
        timeout,
        controller.probe_every,
        samples.clone(),
    ));
    Tuned {
        url: Some(url),
        prober: Some(prober),
        samples,
        last_change: None,
    }
}

async fn decide_and_apply(controller: &Controller, tuning: &Tuning<'_>, entry: &mut Tuned) {
    let cool_down = Duration::from_secs(tuning.settings.cool_down_sec());
    if entry.last_change.is_some_and(|at| at.elapsed() < cool_down) {
        return;
    }
    let samples: Vec<Sample> = entry
        .samples
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .copied()
        .collect();
    let source = entry.source();
    let Some(change) = rule::decide(&tuning.settings, source, tuning.rate, &samples) else {
        return;
    };
    if apply(controller, tuning, source, &change, &samples).await {
        entry.last_change = Some(Instant::now());
        entry
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// A room the controller tunes this pass.
struct Tuning<'a> {
    id: &'a str,
    settings: Autotune,
    rate: u32,
}

/// The room, when `autotune` is on and it has something to read (a health URL, or inline
/// answers for a room with a proxyOrigin).
fn tuned_room(room: &Value) -> Option<Tuning<'_>> {
    let id = room.get("id")?.as_str()?;
    let settings: Autotune = serde_json::from_value(room.get("autotune")?.clone()).ok()?;
    let rate = u32::try_from(room.get("ratePerMinute")?.as_u64()?).ok()?;
    let inline = room.get("proxyOrigin").is_some_and(Value::is_string);
    (settings.enabled && (settings.health_url.is_some() || inline)).then_some(Tuning {
        id,
        settings,
        rate,
    })
}

async fn apply(
    controller: &Controller,
    tuning: &Tuning<'_>,
    source: Source,
    change: &Change,
    samples: &[Sample],
) -> bool {
    let room_id = tuning.id;
    if let Err(error) = controller
        .store
        .set_rate(room_id.to_owned(), change.rate)
        .await
    {
        tracing::warn!(room = room_id, code = %error.code, error = %error.message, "autotune could not change the room's rate");
        return false;
    }
    tracing::info!(room = room_id, rate = change.rate, reason = %change.reason, "autotune");
    let summary = json!({
        "rate": change.rate,
        "previous": tuning.rate,
        "reason": change.reason,
        "source": source.as_str(),
        "p95Ms": (!samples.is_empty()).then(|| rule::p95(samples)),
        "samples": samples.len(),
        "failed": samples.iter().filter(|sample| !sample.ok).count(),
    });
    let entry = qm_proto::AuditEntry {
        at_ms: qm_core::clock::now_ms(),
        actor_kind: "system".into(),
        actor_name: "autotune".into(),
        action: "room.autotune".into(),
        room_id: room_id.to_owned(),
        summary: summary.to_string(),
        ..Default::default()
    };
    if let Err(error) = controller.access.append_audit(entry).await {
        tracing::warn!(room = room_id, code = %error.code, "autotune's audit entry was not written");
    }
    true
}
