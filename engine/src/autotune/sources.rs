//! What the controller reads of an origin's health, per tuned room: the probes of its
//! `healthUrl`, taken here, or the answers the inline gate forwarded to its `proxyOrigin`,
//! reported by the gateways ([`InlineAnswers`], fed by the `OriginAnswers` RPC). Either way the
//! samples land in one bounded buffer the controller reads and clears at each change.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::rule::Sample;

/// A tuned room's newest samples.
pub(super) type Samples = Arc<Mutex<VecDeque<Sample>>>;

/// Health probes kept per room (the newest): a minute at the default probe interval.
const KEPT_PROBES: usize = 60;
/// Inline answers kept per room (the newest): ten seconds of every gateway's full sample.
const KEPT_ANSWERS: usize = 2_000;

fn push(samples: &Samples, kept: usize, new: impl IntoIterator<Item = Sample>) {
    let mut buffer = samples.lock().unwrap_or_else(PoisonError::into_inner);
    for sample in new {
        if buffer.len() == kept {
            buffer.pop_front();
        }
        buffer.push_back(sample);
    }
}

/// Probes `url` every `every` into `samples` until aborted. A probe fails on a timeout, a
/// refused connection or a status that is not 2xx, and a failed probe counts as one at the
/// timeout.
pub(super) async fn probe_forever(
    http: reqwest::Client,
    url: String,
    timeout: Duration,
    every: Duration,
    samples: Samples,
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
        let probe = Sample {
            latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            ok,
        };
        push(&samples, KEPT_PROBES, [probe]);
    }
}

/// The inline rooms the controller tunes from their answers, each with its samples. Answers for
/// any other room are dropped, so what gateways report costs memory only where it is read.
#[derive(Default)]
pub(crate) struct InlineAnswers {
    rooms: Mutex<HashMap<String, Samples>>,
}

impl InlineAnswers {
    /// One gateway's report for one room: `latency_ms[i]` and `ok[i]` describe answer `i`
    /// (a report whose two lists differ in length is read to the shorter).
    pub(crate) fn record(&self, room_id: &str, latency_ms: &[u32], ok: &[bool]) {
        let Some(samples) = self
            .rooms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(room_id)
            .cloned()
        else {
            return;
        };
        let answers = latency_ms.iter().zip(ok).map(|(&latency, &ok)| Sample {
            latency_ms: u64::from(latency),
            ok,
        });
        push(&samples, KEPT_ANSWERS, answers);
    }

    /// Starts keeping `room_id`'s answers; its buffer.
    pub(super) fn listen(&self, room_id: &str) -> Samples {
        self.rooms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(room_id.to_owned())
            .or_default()
            .clone()
    }

    /// Stops keeping the answers of every room `keep` refuses.
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.rooms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|room_id, _| keep(room_id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(samples: &Samples) -> Vec<Sample> {
        samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn answers_are_kept_only_for_rooms_listened_to_and_bounded() {
        let answers = InlineAnswers::default();
        answers.record("shop", &[10], &[true]);
        let shop = answers.listen("shop");
        assert!(held(&shop).is_empty(), "nothing kept before listening");
        answers.record("shop", &[10, 20, 30], &[true, false]);
        assert_eq!(
            held(&shop),
            [
                Sample {
                    latency_ms: 10,
                    ok: true
                },
                Sample {
                    latency_ms: 20,
                    ok: false
                }
            ],
            "read to the shorter list"
        );
        let many = vec![5; KEPT_ANSWERS + 10];
        answers.record("shop", &many, &vec![true; many.len()]);
        assert_eq!(held(&shop).len(), KEPT_ANSWERS);
        answers.retain(|room| room != "shop");
        answers.record("shop", &[1], &[true]);
        assert_eq!(
            held(&shop).len(),
            KEPT_ANSWERS,
            "dropped once not listened to"
        );
        answers.record("other", &[1], &[true]);
        assert!(
            answers
                .rooms
                .lock()
                .map(|rooms| rooms.is_empty())
                .unwrap_or(false)
        );
    }
}
