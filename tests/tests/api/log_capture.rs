//! Capturing one test's log lines. Each test runs on the single-threaded test runtime, so every
//! component it starts logs on the test's thread, into the subscriber set as its default.
//!
//! tracing caches each callsite's interest process-wide, computed once by the first thread that
//! reaches it. While exactly one dispatcher is registered, that computation asks the *calling*
//! thread's default: a sibling test's thread, with no subscriber, would cache "never" for a
//! callsite this test is waiting to see, and the line would be dropped before any subscriber
//! saw it (tokio-rs/tracing#3611). A second dispatcher pinned for the whole run keeps the
//! registry on its general path, which asks every registered dispatcher, the capture among them.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::Dispatch;
use tracing::subscriber::DefaultGuard;

/// The lines a test's components logged, shared with the subscriber that writes them.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Starts capturing everything at `level` and above on this thread until the guard drops.
    pub(crate) fn start(level: tracing::Level) -> (Captured, DefaultGuard) {
        static PINNED: OnceLock<Dispatch> = OnceLock::new();
        PINNED.get_or_init(|| Dispatch::new(tracing_subscriber::registry()));
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        // Callsites another thread registered before this subscriber existed hold an interest
        // computed without it: recompute them all now.
        tracing::callsite::rebuild_interest_cache();
        (captured, guard)
    }

    /// Everything captured so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}
