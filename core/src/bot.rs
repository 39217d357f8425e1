//! The bot score a join carries from the gateway to the engine (0 looks like a browser, 100
//! like a script) and the line where a room in `protection: {mode: "enforce"}` refuses it.

/// A join scoring at least this is refused in `enforce` mode and logged in `monitor` mode.
pub const BLOCK_AT: u32 = 60;
