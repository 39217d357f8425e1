//! Inline mode: this gateway standing in front of a site. A request whose Host is one of
//! INLINE_HOSTS never reaches the gateway's own routes by its path: `/__qm/*` is the waiting
//! page's own contract (assets, join, status, events, notify, the no-JavaScript form), rewritten
//! onto the gateway's routes with the room fixed by the host and any `?token=` dropped (the
//! credential travels in cookies only there); every other path is the site's and goes through
//! the gate ([`gate`]) to the room's `proxyOrigin` ([`proxy`]). Requests for any other host are
//! handed to the gateway's router untouched.

mod admitted;
mod answers;
mod gate;
mod origin_pool;
mod own_routes;
mod page;
mod proxy;
mod rooms;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt as _;

use crate::GatewayState;
use crate::request::request_host;

/// The prefix of the waiting page's own paths on an inline host.
pub(crate) const OWN_PREFIX: &str = "/__qm";

/// What the front needs for every inline request: one per gateway.
struct InlineFront {
    state: GatewayState,
    /// The gateway's own router: other hosts, and the rewritten `/__qm` routes.
    routes: Router,
    origin: proxy::OriginClient,
    rooms: rooms::RoomCache,
    admitted: admitted::AdmittedKeys,
    /// The origins' answers, sampled for the engine's rate controller.
    answers: Arc<answers::OriginAnswers>,
}

/// The gateway's router behind the inline front (only when INLINE_HOSTS names a host).
pub(crate) fn front(state: GatewayState, routes: Router) -> Router {
    let timeout = Duration::from_secs(state.config.inline_origin_timeout_sec);
    let front = Arc::new(InlineFront {
        state,
        routes,
        origin: proxy::OriginClient::new(timeout),
        rooms: rooms::RoomCache::default(),
        admitted: admitted::AdmittedKeys::default(),
        answers: Arc::default(),
    });
    Router::new().fallback(move |request: Request| {
        let front = front.clone();
        async move { front.serve(request).await }
    })
}

impl InlineFront {
    async fn serve(&self, request: Request) -> Response {
        let room_id = request_host(request.headers(), request.uri()).and_then(|host| {
            self.state
                .config
                .inline_hosts
                .room_for(&host)
                .map(str::to_owned)
        });
        let Some(room_id) = room_id else {
            return self.own(request).await;
        };
        let path = request.uri().path();
        if path == OWN_PREFIX || path.starts_with("/__qm/") {
            return own_routes::serve(self, request, &room_id).await;
        }
        gate::serve(self, request, &room_id).await
    }

    /// The gateway's own routes for `request` as it is.
    async fn own(&self, request: Request) -> Response {
        match self.routes.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
        .into_response()
    }
}
