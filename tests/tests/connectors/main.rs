//! The installable connectors (`connectors/`), each driven end to end in the runtime it ships
//! for: the browser snippet and the Tag Manager template in headless Chromium, the Worker in
//! workerd, nginx with njs and with plain `auth_request`, the WordPress plugin under PHP, and the
//! Node middleware under Node. The server-side ones share one journey ([`journey`]).

mod gtm;
mod journey;
mod nginx;
mod node;
mod snippet;
mod support;
mod wordpress;
mod worker;
