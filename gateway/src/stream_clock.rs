//! The clock every long-lived gateway task runs on: the visitor event stream's heartbeat, which
//! the room hub's presence report shares (a stream heartbeat is what tells the engine its holder
//! is still there). The wait for the process to stop is the one every process shares,
//! `qm_core::shutdown::stopped`.

use std::time::Duration;

/// A status frame goes out at least this often, changed or not; presence is reported as often.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);
