//! The snippet connector in its real runtime.
