//! The rate controller (`autotune`): it probes each tuned room's `healthUrl` and moves the
//! room's rate within `[minRate, maxRate]` from what the origin's health says.
//!
//! Every `AUTOTUNE_PROBE_MS` the room's health URL is fetched (a plain `GET`, timed out at twice
//! the target, at most 10 s); a probe fails on a timeout, a refused connection or a status that
//! is not 2xx, and a failed probe counts as one at the timeout. Once a decision has at least
//! [`MIN_SAMPLES`] probes taken since the last change, and the cool-down (`coolDownSec`) since
//! that change has passed:
//! - p95 over the target, or more than [`MAX_ERROR_SHARE`] of probes failed → lower the rate by
//!   a tenth (at least 1), not under `minRate`;
//! - p95 under [`RAISE_UNDER`] of the target and no probe failed → raise it by a twentieth (at
//!   least 1), not over `maxRate`;
//! - in between → hold. That band, the smaller step up than down and the cool-down keep the
//!   rate from oscillating: a steady origin settles, it does not swing.
//!
//! A rate outside the bounds (set by an operator) is brought inside at the next decision. Each
//! change is an ordinary rate change (journaled like an operator's) and an audit entry
//! `room.autotune` by `autotune · system` whose summary says why ("rate lowered to 90/min:
//! origin p95 1800 ms over the 1500 ms target"), which the console's audit trail shows.
//! Probes and decisions are this engine's; with several engines each tunes on its own probes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use qm_core::room::Autotune;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::access::Access;
use crate::shutdown::stopped;
use crate::store::Store;

/// Probes a decision needs since the last change.
pub(crate) const MIN_SAMPLES: usize = 5;
/// Probes kept per room (the newest).
const KEPT_SAMPLES: usize = 60;
/// More than this share of failed probes lowers the rate.
pub(crate) const MAX_ERROR_SHARE: f64 = 0.05;
/// The rate is raised only while the p95 is under this share of the target.
pub(crate) const RAISE_UNDER: f64 = 0.8;
/// The longest a probe waits.
const PROBE_TIMEOUT_MOST: Duration = Duration::from_secs(10);

/// One probe of a health URL.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probe {
    latency_ms: u64,
    ok: bool,
}

/// A change of rate, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) rate: u32,
    pub(crate) reason: String,
}

/// The p95 of the probes' latencies (nearest rank).
fn p95(probes: &[Probe]) -> u64 {
    let mut latencies: Vec<u64> = probes.iter().map(|probe| probe.latency_ms).collect();
    latencies.sort_unstable();
    let rank = (latencies.len() * 95).div_ceil(100).max(1);
    latencies.get(rank - 1).copied().unwrap_or(0)
}

/// The rule: the next rate for `rate` from `probes`, or `None` to hold.
fn decide(settings: &Autotune, rate: u32, probes: &[Probe]) -> Option<Change> {
    let (low, high) = (settings.min_rate(), settings.max_rate());
    if rate < low || rate > high {
        let inside = rate.clamp(low, high);
        return Some(Change {
            rate: inside,
            reason: format!("rate set to {inside}/min: within autotune's bounds {low}–{high}/min"),
        });
    }
    if probes.len() < MIN_SAMPLES {
        return None;
    }
    let target = settings.target_p95_ms();
    let p95 = p95(probes);
    let failed = probes.iter().filter(|probe| !probe.ok).count();
    let error_share = failed as f64 / probes.len() as f64;
    let (next, why) = if error_share > MAX_ERROR_SHARE {
        let next = rate.saturating_sub((rate / 10).max(1)).max(low);
        (
            next,
            format!(
                "{failed} of {} health probes failed (over {:.0} %)",
                probes.len(),
                MAX_ERROR_SHARE * 100.0
            ),
        )
    } else if p95 > target {
        let next = rate.saturating_sub((rate / 10).max(1)).max(low);
        (
            next,
            format!("origin p95 {p95} ms over the {target} ms target"),
        )
    } else if (p95 as f64) < target as f64 * RAISE_UNDER && failed == 0 {
        let next = rate.saturating_add((rate / 20).max(1)).min(high);
        (
            next,
            format!(
                "origin p95 {p95} ms under {:.0} % of the {target} ms target",
                RAISE_UNDER * 100.0
            ),
        )
    } else {
        return None;
    };
    if next == rate {
        return None;
    }
    let verb = if next < rate { "lowered" } else { "raised" };
    Some(Change {
        rate: next,
        reason: format!("rate {verb} to {next}/min: {why}"),
    })
}

/// One tuned room: its prober and what it measured since the last change.
struct Tuned {
    url: String,
    prober: JoinHandle<()>,
    probes: Arc<Mutex<VecDeque<Probe>>>,
    last_change: Option<Instant>,
}

impl Drop for Tuned {
    fn drop(&mut self) {
        self.prober.abort();
    }
}

/// Probes `url` every `every` into `probes` until aborted.
async fn probe_forever(
    http: reqwest::Client,
    url: String,
    timeout: Duration,
    every: Duration,
    probes: Arc<Mutex<VecDeque<Probe>>>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let started = Instant::now();
        let answered = tokio::time::timeout(timeout, http.get(&url).send()).await;
        let ok = matches!(&answered, Ok(Ok(response)) if response.status().is_success());
        let latency = if ok {
            started.elapsed()
        } else {
            timeout.max(started.elapsed())
        };
        let probe = Probe {
            latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            ok,
        };
        let mut kept = probes.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() == KEPT_SAMPLES {
            kept.pop_front();
        }
        kept.push_back(probe);
    }
}

/// Runs the controller once a second until the stop flag is set.
pub(crate) async fn run(
    store: Arc<dyn Store>,
    access: Arc<Access>,
    probe_every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let http = reqwest::Client::new();
    let mut tuned: HashMap<String, Tuned> = HashMap::new();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopped(&mut stop) => break,
        }
        let Ok(rooms) = store.list_rooms().await else {
            continue;
        };
        let mut seen = Vec::new();
        for room in &rooms {
            let Some((id, settings, rate)) = tuned_room(room) else {
                continue;
            };
            let Some(url) = settings.health_url.clone() else {
                continue;
            };
            seen.push(id.to_owned());
            let entry = match tuned.get_mut(id) {
                Some(entry) if entry.url == url => entry,
                _ => {
                    let probes = Arc::new(Mutex::new(VecDeque::new()));
                    let timeout = Duration::from_millis(settings.target_p95_ms().saturating_mul(2))
                        .min(PROBE_TIMEOUT_MOST);
                    let prober = tokio::spawn(probe_forever(
                        http.clone(),
                        url.clone(),
                        timeout,
                        probe_every,
                        probes.clone(),
                    ));
                    tuned.insert(
                        id.to_owned(),
                        Tuned {
                            url,
                            prober,
                            probes,
                            last_change: None,
                        },
                    );
                    match tuned.get_mut(id) {
                        Some(entry) => entry,
                        None => continue,
                    }
                }
            };
            let cool_down = Duration::from_secs(settings.cool_down_sec());
            if entry.last_change.is_some_and(|at| at.elapsed() < cool_down) {
                continue;
            }
            let probes: Vec<Probe> = entry
                .probes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .copied()
                .collect();
            let Some(change) = decide(&settings, rate, &probes) else {
                continue;
            };
            if apply(&*store, &access, id, rate, &change, &probes).await {
                entry.last_change = Some(Instant::now());
                entry
                    .probes
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
            }
        }
        tuned.retain(|id, _| seen.contains(id));
    }
}

/// The room's id, enabled settings and rate, when `autotune` is on.
fn tuned_room(room: &Value) -> Option<(&str, Autotune, u32)> {
    let id = room.get("id")?.as_str()?;
    let settings: Autotune = serde_json::from_value(room.get("autotune")?.clone()).ok()?;
    let rate = u32::try_from(room.get("ratePerMinute")?.as_u64()?).ok()?;
    settings.enabled.then_some((id, settings, rate))
}

async fn apply(
    store: &dyn Store,
    access: &Access,
    room_id: &str,
    previous: u32,
    change: &Change,
    probes: &[Probe],
) -> bool {
    if let Err(error) = store.set_rate(room_id.to_owned(), change.rate).await {
        tracing::warn!(room = room_id, code = %error.code, error = %error.message, "autotune could not change the room's rate");
        return false;
    }
    tracing::info!(room = room_id, rate = change.rate, reason = %change.reason, "autotune");
    let summary = json!({
        "rate": change.rate,
        "previous": previous,
        "reason": change.reason,
        "p95Ms": (!probes.is_empty()).then(|| p95(probes)),
        "probes": probes.len(),
        "failed": probes.iter().filter(|probe| !probe.ok).count(),
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
    if let Err(error) = access.append_audit(entry).await {
        tracing::warn!(room = room_id, code = %error.code, "autotune's audit entry was not written");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Autotune {
        Autotune {
            enabled: true,
            min_rate: Some(50),
            max_rate: Some(120),
            target_p95_ms: Some(200),
            health_url: Some("http://origin/health".into()),
            cool_down_sec: Some(1),
        }
    }

    fn probes(latency_ms: u64, failed: usize) -> Vec<Probe> {
        (0..10)
            .map(|index| Probe {
                latency_ms,
                ok: index >= failed,
            })
            .collect()
    }

    #[test]
    fn a_slow_origin_lowers_the_rate_by_a_tenth_down_to_the_floor() {
        let slow = probes(300, 0);
        let change = decide(&settings(), 100, &slow).map(|change| change.rate);
        assert_eq!(change, Some(90));
        let reason = decide(&settings(), 100, &slow).map(|change| change.reason);
        assert_eq!(
            reason.as_deref(),
            Some("rate lowered to 90/min: origin p95 300 ms over the 200 ms target")
        );
        assert_eq!(
            decide(&settings(), 52, &slow).map(|change| change.rate),
            Some(50)
        );
        assert_eq!(decide(&settings(), 50, &slow), None, "never under minRate");
    }

    #[test]
    fn failures_lower_it_even_when_fast_and_a_healthy_origin_raises_it_to_the_ceiling() {
        assert_eq!(
            decide(&settings(), 100, &probes(10, 1)).map(|c| c.rate),
            Some(90)
        );
        assert_eq!(
            decide(&settings(), 100, &probes(10, 0)).map(|c| c.rate),
            Some(105)
        );
        assert_eq!(
            decide(&settings(), 118, &probes(10, 0)).map(|c| c.rate),
            Some(120)
        );
        assert_eq!(
            decide(&settings(), 120, &probes(10, 0)),
            None,
            "never over maxRate"
        );
    }

    #[test]
    fn inside_the_band_or_with_too_few_probes_it_holds() {
        // 0.8 × 200 = 160 ≤ p95 ≤ 200: hold.
        assert_eq!(decide(&settings(), 100, &probes(160, 0)), None);
        assert_eq!(decide(&settings(), 100, &probes(200, 0)), None);
        assert_eq!(
            decide(&settings(), 100, &probes(300, 0)[..MIN_SAMPLES - 1]),
            None
        );
    }

    #[test]
    fn a_rate_outside_the_bounds_is_brought_inside() {
        assert_eq!(decide(&settings(), 500, &[]).map(|c| c.rate), Some(120));
        assert_eq!(decide(&settings(), 10, &[]).map(|c| c.rate), Some(50));
    }

    #[test]
    fn the_p95_is_the_nearest_rank() {
        let mut many: Vec<Probe> = (1..=100)
            .map(|ms| Probe {
                latency_ms: ms,
                ok: true,
            })
            .collect();
        assert_eq!(p95(&many), 95);
        many.truncate(10);
        assert_eq!(p95(&many), 10);
        assert_eq!(p95(&[]), 0);
    }
}
