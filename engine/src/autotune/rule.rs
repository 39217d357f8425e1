//! The controller's rule: from the samples of the origin's health taken since the last change,
//! the next rate or a hold. Pure, so every bound and step is tested without a clock or a network.

use qm_core::room::Autotune;

/// Samples a decision needs since the last change.
pub(crate) const MIN_SAMPLES: usize = 5;
/// More than this share of failed samples lowers the rate.
pub(crate) const MAX_ERROR_SHARE: f64 = 0.05;
/// The rate is raised only while the p95 is under this share of the target.
pub(crate) const RAISE_UNDER: f64 = 0.8;

/// One look at the origin's health: a probe of the health URL, or an answer the inline gate
/// forwarded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    pub(crate) latency_ms: u64,
    pub(crate) ok: bool,
}

/// Where a room's samples come from, as a reason names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The room's `healthUrl`, probed by this engine.
    HealthUrl,
    /// The answers the inline gate forwarded to the room's `proxyOrigin`.
    Inline,
}

impl Source {
    /// The audit summary's name for it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::HealthUrl => "healthUrl",
            Source::Inline => "inline",
        }
    }

    fn samples_noun(self) -> &'static str {
        match self {
            Source::HealthUrl => "health probes",
            Source::Inline => "origin answers",
        }
    }
}

/// A change of rate, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) rate: u32,
    pub(crate) reason: String,
}

/// The p95 of the samples' latencies (nearest rank).
pub(crate) fn p95(samples: &[Sample]) -> u64 {
    let mut latencies: Vec<u64> = samples.iter().map(|sample| sample.latency_ms).collect();
    latencies.sort_unstable();
    let rank = (latencies.len() * 95).div_ceil(100).max(1);
    latencies.get(rank - 1).copied().unwrap_or(0)
}

/// The next rate for `rate` from `samples`, or `None` to hold.
pub(crate) fn decide(
    settings: &Autotune,
    source: Source,
    rate: u32,
    samples: &[Sample],
) -> Option<Change> {
    let (low, high) = (settings.min_rate(), settings.max_rate());
    if rate < low || rate > high {
        let inside = rate.clamp(low, high);
        return Some(Change {
            rate: inside,
            reason: format!("rate set to {inside}/min: within autotune's bounds {low}–{high}/min"),
        });
    }
    if samples.len() < MIN_SAMPLES {
        return None;
    }
    let target = settings.target_p95_ms();
    let p95 = p95(samples);
    let failed = samples.iter().filter(|sample| !sample.ok).count();
    let error_share = failed as f64 / samples.len() as f64;
    let lowered = rate.saturating_sub((rate / 10).max(1)).max(low);
    let (next, why) = if error_share > MAX_ERROR_SHARE {
        (
            lowered,
            format!(
                "{failed} of {} {} failed (over {:.0} %)",
                samples.len(),
                source.samples_noun(),
                MAX_ERROR_SHARE * 100.0
            ),
        )
    } else if p95 > target {
        (
            lowered,
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

    fn samples(latency_ms: u64, failed: usize) -> Vec<Sample> {
        (0..10)
            .map(|index| Sample {
                latency_ms,
                ok: index >= failed,
            })
            .collect()
    }

    fn next_rate(rate: u32, samples: &[Sample]) -> Option<u32> {
        decide(&settings(), Source::HealthUrl, rate, samples).map(|change| change.rate)
    }

    #[test]
    fn a_slow_origin_lowers_the_rate_by_a_tenth_down_to_the_floor() {
        let slow = samples(300, 0);
        assert_eq!(next_rate(100, &slow), Some(90));
        let reason = decide(&settings(), Source::HealthUrl, 100, &slow).map(|change| change.reason);
        assert_eq!(
            reason.as_deref(),
            Some("rate lowered to 90/min: origin p95 300 ms over the 200 ms target")
        );
        assert_eq!(next_rate(52, &slow), Some(50));
        assert_eq!(next_rate(50, &slow), None, "never under minRate");
    }

    #[test]
    fn failures_lower_it_even_when_fast_and_a_healthy_origin_raises_it_to_the_ceiling() {
        assert_eq!(next_rate(100, &samples(10, 1)), Some(90));
        assert_eq!(next_rate(100, &samples(10, 0)), Some(105));
        assert_eq!(next_rate(118, &samples(10, 0)), Some(120));
        assert_eq!(next_rate(120, &samples(10, 0)), None, "never over maxRate");
    }

    #[test]
    fn the_reason_names_what_failed() {
        let failing = samples(10, 2);
        let probes = decide(&settings(), Source::HealthUrl, 100, &failing);
        assert_eq!(
            probes.map(|change| change.reason).as_deref(),
            Some("rate lowered to 90/min: 2 of 10 health probes failed (over 5 %)")
        );
        let answers = decide(&settings(), Source::Inline, 100, &failing);
        assert_eq!(
            answers.map(|change| change.reason).as_deref(),
            Some("rate lowered to 90/min: 2 of 10 origin answers failed (over 5 %)")
        );
    }

    #[test]
    fn inside_the_band_or_with_too_few_samples_it_holds() {
        // 0.8 × 200 = 160 ≤ p95 ≤ 200: hold.
        assert_eq!(next_rate(100, &samples(160, 0)), None);
        assert_eq!(next_rate(100, &samples(200, 0)), None);
        assert_eq!(next_rate(100, &samples(300, 0)[..MIN_SAMPLES - 1]), None);
    }

    #[test]
    fn a_rate_outside_the_bounds_is_brought_inside() {
        assert_eq!(next_rate(500, &[]), Some(120));
        assert_eq!(next_rate(10, &[]), Some(50));
    }

    #[test]
    fn the_p95_is_the_nearest_rank() {
        let mut many: Vec<Sample> = (1..=100)
            .map(|ms| Sample {
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
