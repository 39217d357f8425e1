//! The engine's own Prometheus metrics, answered by the `Metrics` RPC as text exposition (format
//! 0.0.4) for the admin process's `GET /metrics` to serve beside the rooms' figures.
//!
//! Two kinds: what the durable store counts as it works ([`StoreMetrics`]: the journal's commit
//! latency and batch size, Valkey and Postgres errors, rebuilds), recorded where it happens; and
//! what the engine's `Stats` already says (rooms, readiness, fail-open checks, landings), read
//! into gauges and counters at each scrape so there is one count, not two. Every registry here
//! belongs to one engine: tests run several in one process, and `qm all` keeps its parts apart.

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use qm_proto::StatsReply;

/// A backend the durable store talks to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Backend {
    Valkey,
    Postgres,
}

impl Backend {
    fn label(self) -> &'static str {
        match self {
            Backend::Valkey => "valkey",
            Backend::Postgres => "postgres",
        }
    }
}

/// What the durable store records as it works.
#[derive(Clone)]
pub struct StoreMetrics {
    registry: Registry,
    commit_seconds: Histogram,
    batch_events: Histogram,
    errors: IntCounterVec,
    rebuilds: IntCounter,
}

impl std::fmt::Debug for StoreMetrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("StoreMetrics")
    }
}

/// Registers `collector` on `registry`; the names are this module's constants, so a refusal is
/// a mistake here that the tests catch, never something a request causes.
fn registered<C: Collector + Clone + 'static>(registry: &Registry, collector: C) -> C {
    if let Err(error) = registry.register(Box::new(collector.clone())) {
        tracing::error!(%error, "a metric could not be registered");
    }
    collector
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    registered(
        registry,
        Histogram::with_opts(opts).expect("increasing buckets"),
    )
}

impl Default for StoreMetrics {
    fn default() -> StoreMetrics {
        let registry = Registry::new();
        let commit_seconds = histogram(
            &registry,
            "qm_journal_commit_seconds",
            "Time to write one group commit of room events to the Postgres journal.",
            vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ],
        );
        let batch_events = histogram(
            &registry,
            "qm_journal_batch_events",
            "Room events written by one group commit.",
            vec![
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
            ],
        );
        let errors = registered(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "qm_store_errors_total",
                    "Calls to a backend of the durable store that failed.",
                ),
                &["store"],
            )
            .expect("one label"),
        );
        let rebuilds = registered(
            &registry,
            IntCounter::new(
                "qm_room_rebuilds_total",
                "Rooms rebuilt from the journal after Valkey lost or diverged from it.",
            )
            .expect("a valid name"),
        );
        StoreMetrics {
            registry,
            commit_seconds,
            batch_events,
            errors,
            rebuilds,
        }
    }
}

impl StoreMetrics {
    /// One group commit that took `seconds` and wrote `events` events.
    pub(crate) fn journal_committed(&self, seconds: f64, events: usize) {
        self.commit_seconds.observe(seconds);
        self.batch_events.observe(events as f64);
    }

    pub(crate) fn failed(&self, backend: Backend) {
        self.errors.with_label_values(&[backend.label()]).inc();
    }

    pub(crate) fn rebuilt(&self) {
        self.rebuilds.inc();
    }

    fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        self.registry.gather()
    }
}

/// The engine's exposition: `stats` read at this scrape, then what the store recorded.
pub(crate) fn exposition(stats: &StatsReply, store: Option<&StoreMetrics>) -> String {
    let registry = Registry::new();
    let gauge = |name: &str, help: &str, value: f64| {
        if let Ok(gauge) = Gauge::new(name, help) {
            gauge.set(value);
            registered(&registry, gauge);
        }
    };
    let counter = |name: &str, help: &str, value: u64| {
        if let Ok(counter) = IntCounter::new(name, help) {
            counter.inc_by(value);
            registered(&registry, counter);
        }
    };
    if let Ok(rooms) = IntGauge::new("qm_engine_rooms", "Rooms this engine knows.") {
        rooms.set(i64::try_from(stats.rooms).unwrap_or(i64::MAX));
        registered(&registry, rooms);
    }
    gauge(
        "qm_engine_storage_ready",
        "1 when the store can persist changes (Valkey and Postgres both answer), else 0.",
        f64::from(u8::from(stats.storage_ready)),
    );
    gauge(
        "qm_engine_start_time_seconds",
        "When this engine started, in seconds since the Unix epoch.",
        stats.started_at_ms as f64 / 1000.0,
    );
    counter(
        "qm_check_no_room_total",
        "Door checks for a room that does not exist, answered pass (fail open).",
        stats.no_room_checks,
    );
    if stats.store != "memory" {
        counter(
            "qm_valkey_landings_total",
            "Batches of room changes offered to Valkey.",
            stats.landings,
        );
        counter(
            "qm_valkey_stale_landings_total",
            "Batches Valkey refused because another engine changed the room first.",
            stats.stale_landings,
        );
    }
    let mut families = registry.gather();
    if let Some(store) = store {
        families.extend(store.gather());
    }
    let mut text = Vec::new();
    if let Err(error) = TextEncoder::new().encode(&families, &mut text) {
        tracing::error!(%error, "the engine's metrics could not be encoded");
    }
    String::from_utf8(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_counts_show_beside_the_stats() {
        let store = StoreMetrics::default();
        store.journal_committed(0.003, 5);
        store.failed(Backend::Postgres);
        store.failed(Backend::Postgres);
        store.rebuilt();
        let stats = StatsReply {
            rooms: 3,
            no_room_checks: 7,
            store: "valkey+pg".into(),
            storage_ready: true,
            started_at_ms: 1_700_000_000_000,
            landings: 11,
            stale_landings: 2,
        };
        let text = exposition(&stats, Some(&store));
        for line in [
            "qm_engine_rooms 3",
            "qm_engine_storage_ready 1",
            "qm_check_no_room_total 7",
            "qm_valkey_landings_total 11",
            "qm_valkey_stale_landings_total 2",
            "qm_journal_commit_seconds_count 1",
            "qm_journal_commit_seconds_bucket{le=\"0.005\"} 1",
            "qm_journal_batch_events_sum 5",
            "qm_store_errors_total{store=\"postgres\"} 2",
            "qm_room_rebuilds_total 1",
            "# TYPE qm_journal_commit_seconds histogram",
        ] {
            assert!(text.lines().any(|got| got == line), "{line} in\n{text}");
        }
    }

    #[test]
    fn the_memory_store_names_no_durable_figures() {
        let stats = StatsReply {
            store: "memory".into(),
            storage_ready: true,
            ..StatsReply::default()
        };
        let text = exposition(&stats, None);
        assert!(text.contains("qm_engine_rooms 0"));
        assert!(!text.contains("qm_valkey_"), "{text}");
        assert!(!text.contains("qm_journal_"), "{text}");
    }
}
