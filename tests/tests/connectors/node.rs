//! The node connector in its real runtime.
