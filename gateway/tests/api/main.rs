//! The gateway over real HTTP against a fake engine on 127.0.0.1:0: join, status, the event
//! stream and its fan-out, the door check and CORS, routing rules, readiness and the page, and a
//! hostile client on raw TCP (timeouts, caps, the connection ceiling).

mod address_limits;
mod door_check;
mod events;
mod fake_engine;
mod harness;
mod hostile;
mod presence;
mod routing;
mod visitor;
