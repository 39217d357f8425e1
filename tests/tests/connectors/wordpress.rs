//! The wordpress connector in its real runtime.
