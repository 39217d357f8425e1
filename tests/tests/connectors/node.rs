//! The Node middleware (`connectors/node`, the npm package `queue-manager-connector`) under the
//! machine's Node (18 or later), mounted on a bare `node:http` server with a two-layer
//! `use`-style chain (the middleware, then a proxy to a test origin), as Express would call it,
//! and under Express itself: the shared journey, failing closed when told to, the one-time fall
//! back from `/api/v1` to `/api` on an old server, what it vouches, and the `verify` command
//! against the live app.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use qm_tests::origin::TestOrigin;
use serde_json::{Value, json};

use crate::journey::{self, API_KEY, GHOST_ROOM, ROOM};
use crate::support::{self, RuntimeChild, StandInServer, workspace_root};
use qm_tests::npm::NpmRuntime;

/// The site a test starts: the connector's `use` chain in front of the origin. Arguments: the
/// package directory, the middleware's options (JSON), the origin's URL, the port.
const SITE_JS: &str = r#"
const http = require("node:http");
const queue = require(process.argv[2]);
const options = JSON.parse(process.argv[3]);
const origin = new URL(process.argv[4]);
const port = Number(process.argv[5]);

function toOrigin(req, res) {
  const upstream = http.request(
    { host: origin.hostname, port: origin.port, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (error) => {
    res.statusCode = 502;
    res.end(`origin: ${error.message}`);
  });
  req.pipe(upstream);
}

const chain = [queue(options), toOrigin];
http
  .createServer((req, res) => {
    let at = 0;
    const next = (error) => {
      if (error) {
        res.statusCode = 500;
        res.end(String(error));
        return;
      }
      chain[at++](req, res, next);
    };
    next();
  })
  .listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
"#;

/// The same under Express (fetched from the npm registry, see [`express_dir`]), with the
/// middleware mounted on `/shop` only: inside it Express strips the mount from `req.url`, so
/// the page's URL must come from `req.originalUrl`. Arguments: Express's directory, then as
/// for [`SITE_JS`].
const EXPRESS_SITE_JS: &str = r#"
const http = require("node:http");
const express = require(process.argv[2]);
const queue = require(process.argv[3]);
const options = JSON.parse(process.argv[4]);
const origin = new URL(process.argv[5]);
const port = Number(process.argv[6]);

const app = express();
app.use("/shop", queue(options));
app.use((req, res) => {
  const upstream = http.request(
    { host: origin.hostname, port: origin.port, method: req.method, path: req.originalUrl, headers: req.headers },
    (answer) => {
      res.status(answer.statusCode).set(answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (error) => res.status(502).send(`origin: ${error.message}`));
  req.pipe(upstream);
});
app.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
"#;

/// The Express release the Express test runs under (and `.ci/run` installs).
const EXPRESS_PACKAGE: &str = "express@5";

/// Express's package directory, fetched into `<target>/express` when missing (or
/// `QM_EXPRESS`); panics with the one line saying what to install.
async fn express_dir() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    tokio::task::spawn_blocking(|| {
        FOUND
            .get_or_init(|| {
                NpmRuntime {
                    what: "Express",
                    override_var: "QM_EXPRESS",
                    dir_name: "express",
                    package: EXPRESS_PACKAGE,
                    wanted: &["node_modules/express"],
                }
                .locate_or_fetch()
            })
            .clone()
    })
    .await
    .expect("the Express lookup ran")
    .unwrap_or_else(|reason| panic!("{reason}"))
}

/// Node, or the one line saying what to install.
fn node_binary() -> String {
    let node = std::env::var("QM_NODE")
        .ok()
        .filter(|node| !node.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    let version = Command::new(&node)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    let Some(version) = version else {
        panic!(
            "node not found ({node}): apt-get install nodejs (Node 18 or later), or set QM_NODE \
             to a node binary"
        );
    };
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 18,
        "node {version} is too old for the connector (it needs the global fetch of Node 18 or \
         later): apt-get install nodejs from a newer release, or set QM_NODE"
    );
    node
}

/// The middleware configured with `options` (server, roomId, ...) in front of `origin`.
async fn site(options: Value, origin: &TestOrigin) -> RuntimeChild {
    let node = node_binary();
    let addr = qm_tests::process::free_addr();
    let scratch = RuntimeChild::scratch_dir("node", addr.port());
    std::fs::write(scratch.join("site.js"), SITE_JS).expect("write the site script");
    let mut command = Command::new(node);
    command
        .arg(scratch.join("site.js"))
        .arg(workspace_root().join("connectors/node"))
        .arg(options.to_string())
        .arg(&origin.url)
        .arg(addr.port().to_string());
    RuntimeChild::start("node", command, scratch, addr).await
}

/// The middleware under Express, mounted on `/shop`, in front of `origin`.
async fn express_site(options: Value, origin: &TestOrigin) -> RuntimeChild {
    let express = express_dir().await;
    let node = node_binary();
    let addr = qm_tests::process::free_addr();
    let scratch = RuntimeChild::scratch_dir("express", addr.port());
    std::fs::write(scratch.join("site.js"), EXPRESS_SITE_JS).expect("write the site script");
    let mut command = Command::new(node);
    command
        .arg(scratch.join("site.js"))
        .arg(express)
        .arg(workspace_root().join("connectors/node"))
        .arg(options.to_string())
        .arg(&origin.url)
        .arg(addr.port().to_string());
    RuntimeChild::start("node (Express)", command, scratch, addr).await
}

fn options(server: &str, room_id: &str) -> Value {
    json!({ "server": server, "roomId": room_id, "apiKey": API_KEY })
}

#[tokio::test]
async fn the_middleware_carries_a_visitor_through_the_journey() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let site_for_room = site(options(&app.gateway, ROOM), &origin).await;
    let ghost = site(options(&app.gateway, GHOST_ROOM), &origin).await;
    journey::prepare_room(&app, &site_for_room.url).await;
    journey::run(app, &site_for_room.url, &ghost.url, true).await;
}

#[tokio::test]
async fn the_middleware_carries_a_visitor_through_the_journey_under_express() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let site_for_room = express_site(options(&app.gateway, ROOM), &origin).await;
    let ghost = express_site(options(&app.gateway, GHOST_ROOM), &origin).await;
    journey::prepare_room(&app, &site_for_room.url).await;
    journey::run(app, &site_for_room.url, &ghost.url, true).await;
}

#[tokio::test]
async fn the_middleware_fails_closed_when_told_to_and_the_server_cannot_answer() {
    let origin = TestOrigin::start().await;
    // Nothing listens on this address: the queue server is down.
    let down = format!("http://{}", qm_tests::process::free_addr());
    let mut closed_options = options(&down, ROOM);
    closed_options["failMode"] = json!("closed");
    let closed = site(closed_options, &origin).await;
    let response = reqwest::get(format!("{}/shop/item", closed.url))
        .await
        .expect("the site answers");
    assert_eq!(
        response.status(),
        503,
        "failMode closed, the server down: {}",
        closed.log_tail()
    );
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    assert_eq!(header("retry-after").as_deref(), Some("30"));
    assert_eq!(header("cache-control").as_deref(), Some("no-store"));
    assert_eq!(
        origin.hits(),
        0,
        "a closed connector keeps visitors off the site"
    );

    // A server that answers, but not the check (a 502 page from a proxy): closed says 503,
    // and the default fails open.
    let broken = StandInServer::broken().await;
    let mut closed_options = options(&broken.url, ROOM);
    closed_options["failMode"] = json!("closed");
    let closed = site(closed_options, &origin).await;
    let answer = journey::visit(&format!("{}/shop/item", closed.url), None).await;
    assert_eq!(answer.status, 503, "failMode closed, the server broken");
    let open = site(options(&broken.url, ROOM), &origin).await;
    let answer = journey::visit(&format!("{}/shop/item", open.url), None).await;
    assert!(
        journey::served(&answer, "/shop/item"),
        "failMode open, the server broken: {} {}",
        answer.status,
        answer.body
    );

    // A server that does not answer within timeoutMs counts as down.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a server that never answers");
    let mut slow_options = options(
        &format!("http://{}", silent.local_addr().expect("its address")),
        ROOM,
    );
    slow_options["failMode"] = json!("closed");
    slow_options["timeoutMs"] = json!(300);
    let slow = site(slow_options, &origin).await;
    let started = std::time::Instant::now();
    let answer = journey::visit(&format!("{}/shop/item", slow.url), None).await;
    assert_eq!(answer.status, 503, "a check that times out fails closed");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "timeoutMs bounds the wait: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_middleware_falls_back_to_api_once_on_an_old_server_and_vouches_for_the_visitor() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let old = StandInServer::old_release(&app.gateway).await;
    let protected = site(options(&old.url, ROOM), &origin).await;
    journey::prepare_room(&app, &protected.url).await;

    let checks =
        support::assert_falls_back_once(&old, &protected.url, || protected.log_tail()).await;
    assert_eq!(
        checks[0].param("ip"),
        Some("127.0.0.1"),
        "the socket's peer"
    );
}

#[tokio::test]
async fn the_middleware_trusts_forwarded_headers_only_when_told_to() {
    let app = journey::start_app().await;
    let origin = TestOrigin::start().await;
    let old = StandInServer::old_release(&app.gateway).await;
    let mut trusting_options = options(&old.url, ROOM);
    trusting_options["trustProxy"] = json!(true);
    let trusting = site(trusting_options, &origin).await;
    let plain = site(options(&old.url, ROOM), &origin).await;
    journey::prepare_room(&app, &trusting.url).await;

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a reqwest client");
    for protected in [&trusting, &plain] {
        client
            .get(format!("{}/about", protected.url))
            .header("x-forwarded-for", "203.0.113.7, 10.0.0.1")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "shop.example")
            .send()
            .await
            .expect("the site answers");
    }
    let checks = old.seen_on("/api/check");
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(checks[0].param("ip"), Some("203.0.113.7"));
    assert_eq!(checks[0].param("url"), Some("https://shop.example/about"));
    assert_eq!(checks[1].param("ip"), Some("127.0.0.1"));
    assert_eq!(
        checks[1].param("url"),
        Some(format!("{}/about", plain.url).as_str())
    );
}

/// Runs `queue-manager-connector verify` with `args`: (exit code, stdout).
fn run_verify(args: &[&str]) -> (i32, String) {
    let output = Command::new(node_binary())
        .arg(workspace_root().join("connectors/node/bin/queue-manager-connector.js"))
        .arg("verify")
        .args(args)
        .env("QM_API_KEY", API_KEY)
        .stdin(Stdio::null())
        .output()
        .expect("run the verify command");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        output.status.code().unwrap_or(-1),
        format!("{stdout}{stderr}"),
    )
}

#[tokio::test]
async fn the_verify_command_reports_the_install_and_checks_in() {
    let app = journey::start_app().await;
    let site_url = "http://127.0.0.1:8080";
    journey::prepare_room(&app, site_url).await;
    let page = format!("{site_url}/shop/item");

    let gateway = app.gateway.clone();
    let (code, out) = tokio::task::spawn_blocking({
        let (gateway, page) = (gateway.clone(), page.clone());
        move || run_verify(&["--server", &gateway, "--room", ROOM, "--url", &page])
    })
    .await
    .expect("the command ran");
    assert_eq!(code, 0, "a right install verifies: {out}");
    for id in ["room_exists", "room_live", "origin_allowed", "url_in_scope"] {
        assert!(out.contains(&format!("PASS {id}")), "{id} passes: {out}");
    }
    assert!(out.contains("ok: the install is ready"), "{out}");

    let listed = app
        .admin_call(
            reqwest::Method::GET,
            &format!("/rooms/{ROOM}/connectors"),
            None,
        )
        .await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let connectors = listed.body["connectors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        connectors.iter().any(|entry| entry["connector"] == "node"
            && entry["version"] == "1.0.0"
            && entry["origin"] == site_url),
        "the node connector checked in with its version: {}",
        listed.text
    );

    // A page the room does not queue, and a room the server does not know: exit 1, saying
    // which check failed.
    let (code, out) = tokio::task::spawn_blocking({
        let gateway = gateway.clone();
        move || {
            run_verify(&[
                "--server",
                &gateway,
                "--room",
                GHOST_ROOM,
                "--url",
                "http://127.0.0.1:8080/shop/item",
            ])
        }
    })
    .await
    .expect("the command ran");
    assert_eq!(code, 1, "an unknown room fails the check: {out}");
    assert!(out.contains("FAIL room_exists"), "{out}");
    assert!(out.contains("not ok"), "{out}");

    // The server unreachable: exit 1 with the reason.
    let down = format!("http://{}", qm_tests::process::free_addr());
    let (code, out) =
        tokio::task::spawn_blocking(move || run_verify(&["--server", &down, "--room", ROOM]))
            .await
            .expect("the command ran");
    assert_eq!(code, 1, "an unreachable server fails: {out}");
    assert!(out.contains("queue-manager-connector:"), "{out}");
}
