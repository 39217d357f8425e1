//! The gtm connector in its real runtime.
