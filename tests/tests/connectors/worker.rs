//! The worker connector in its real runtime.
