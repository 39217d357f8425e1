//! The engine's stop signal: one `watch` flag every long-lived task (the ticker, each Watch
//! stream, the server) waits on, so a single shutdown ends them all. The wait itself is the one
//! every process shares.

pub(crate) use qm_core::shutdown::stopped;
