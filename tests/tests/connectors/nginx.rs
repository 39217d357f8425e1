//! The nginx connector in its real runtime.
