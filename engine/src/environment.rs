//! Where a store reads the time and draws its randomness. In production: the wall clock and
//! the operating system's CSPRNG (rand's thread-local ChaCha, seeded from the OS). In tests: a
//! clock the test moves and a seeded ChaCha, so a day can pass in a test and two stores given
//! the same commands draw the same pre-queue order (the differential test).

use std::sync::{Arc, Mutex, MutexGuard};

use rand::rngs::{StdRng, ThreadRng};
use rand::{CryptoRng, RngCore, SeedableRng};

/// Epoch milliseconds now.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

#[derive(Clone)]
pub struct Environment {
    clock: Clock,
    /// `None`: the OS-seeded thread generator.
    seeded: Option<Arc<Mutex<StdRng>>>,
}

impl Default for Environment {
    fn default() -> Self {
        Environment::real()
    }
}

impl Environment {
    /// The wall clock and the OS-seeded CSPRNG.
    pub fn real() -> Environment {
        Environment {
            clock: Arc::new(qm_core::clock::now_ms),
            seeded: None,
        }
    }

    /// A test's clock and a ChaCha generator seeded with `seed`.
    pub fn simulated(clock: Clock, seed: u64) -> Environment {
        Environment {
            clock,
            seeded: Some(Arc::new(Mutex::new(StdRng::seed_from_u64(seed)))),
        }
    }

    /// Starts a simulated environment's generator again from `seed` (a test's case boundary,
    /// so a failing case replays alike however the earlier ones went). No effect on the real one.
    pub fn reseed(&self, seed: u64) {
        if let Some(seeded) = &self.seeded {
            *crate::rooms::lock(seeded) = StdRng::seed_from_u64(seed);
        }
    }

    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    /// The generator for one command (hold it only as long as the command runs).
    pub fn rng(&self) -> StoreRng<'_> {
        match &self.seeded {
            None => StoreRng::Os(rand::rng()),
            Some(seeded) => StoreRng::Seeded(crate::rooms::lock(seeded)),
        }
    }
}

/// A cryptographically secure generator: the thread's, or a test's seeded one.
pub enum StoreRng<'a> {
    Os(ThreadRng),
    Seeded(MutexGuard<'a, StdRng>),
}

impl RngCore for StoreRng<'_> {
    fn next_u32(&mut self) -> u32 {
        match self {
            StoreRng::Os(rng) => rng.next_u32(),
            StoreRng::Seeded(rng) => rng.next_u32(),
        }
    }

    fn next_u64(&mut self) -> u64 {
        match self {
            StoreRng::Os(rng) => rng.next_u64(),
            StoreRng::Seeded(rng) => rng.next_u64(),
        }
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        match self {
            StoreRng::Os(rng) => rng.fill_bytes(dest),
            StoreRng::Seeded(rng) => rng.fill_bytes(dest),
        }
    }
}

/// Both variants are CSPRNGs (ChaCha).
impl CryptoRng for StoreRng<'_> {}
