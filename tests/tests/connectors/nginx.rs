//! The nginx connector in its real runtime: Debian's nginx, run in the foreground as a child
//! of the test on loopback ports, in front of a [`TestOrigin`], with the connector's own files
//! (`connectors/nginx/`) included unchanged — once with njs (`qm-njs.conf` + `qm.js`) and once
//! as plain `auth_request` to the queue server's status form (`qm-plain.conf`, no njs loaded).
//! Each carries a visitor through the shared [`journey`]; both also fail closed when told to.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use qm_tests::origin::TestOrigin;
use qm_tests::process::free_addr;

use super::journey::{self, API_KEY, GHOST_ROOM, ROOM};

/// Where Debian's libnginx-mod-http-js puts the njs module.
const NJS_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_js_module.so";
/// What to install when the runtime is missing.
const INSTALL: &str = "apt-get install nginx libnginx-mod-http-js";

/// Which of the connector's two configurations a server block includes.
#[derive(Clone, Copy, PartialEq)]
enum Flavor {
    Njs,
    Plain,
}

/// One protected server block: the address it listens on and the room it protects.
struct Site {
    addr: SocketAddr,
    room: &'static str,
    fail_closed: bool,
    /// The `$qm_*` variables are set in `location /` rather than the server block: the way
    /// one nginx gives different locations different rooms.
    per_location: bool,
}

impl Site {
    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A running nginx (one process: no master, no daemon), killed and its directory removed on
/// drop.
struct Nginx {
    child: Child,
    dir: PathBuf,
}

fn connector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("connectors")
        .join("nginx")
        .canonicalize()
        .expect("connectors/nginx exists")
}

/// The nginx binary, or a failure that says what to install.
fn nginx_binary() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("nginx is not installed: {INSTALL}"))
}

impl Nginx {
    /// Starts nginx with one server block per site, each including the connector's
    /// configuration for `flavor`, and `location / { proxy_pass <origin>; }` left as a site
    /// would have it. Waits until every site accepts connections.
    async fn start(flavor: Flavor, gateway: &str, origin: &str, sites: &[Site]) -> Nginx {
        let binary = nginx_binary();
        if flavor == Flavor::Njs {
            assert!(
                Path::new(NJS_MODULE).exists(),
                "the njs module ({NJS_MODULE}) is not installed: {INSTALL}"
            );
        }
        let dir = std::env::temp_dir().join(format!(
            "qm-nginx-{}-{}",
            std::process::id(),
            sites[0].addr.port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("logs")).expect("create the nginx directory");
        let connector = connector_dir();
        let config = config(flavor, &dir, &connector, gateway, origin, sites);
        std::fs::write(dir.join("nginx.conf"), config).expect("write nginx.conf");
        let child = Command::new(&binary)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-e")
            .arg(dir.join("logs/error.log"))
            .args(["-g", "daemon off; master_process off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", binary.display()));
        let mut nginx = Nginx { child, dir };
        for site in sites {
            nginx.wait_listening(site.addr).await;
        }
        nginx
    }

    async fn wait_listening(&mut self, addr: SocketAddr) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "nginx exited with {status}; its error log:\n{}",
                    self.error_log()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "nginx did not listen on {addr} within 10 s; its error log:\n{}",
                self.error_log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The failure is easier to read with what nginx said about it.
            eprintln!("nginx error log:\n{}", self.error_log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// nginx.conf: everything nginx writes stays in `dir`; the connector's files are included
/// from the repository as they ship.
fn config(
    flavor: Flavor,
    dir: &Path,
    connector: &Path,
    gateway: &str,
    origin: &str,
    sites: &[Site],
) -> String {
    let dir = dir.display();
    let connector = connector.display();
    let mut text = String::new();
    if flavor == Flavor::Njs {
        let _ = writeln!(text, "load_module {NJS_MODULE};");
    }
    let _ = write!(
        text,
        "pid {dir}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log {dir}/logs/access.log;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
"
    );
    if flavor == Flavor::Njs {
        let _ = writeln!(text, "    js_import qm from {connector}/qm.js;");
    }
    for site in sites {
        let include = match flavor {
            Flavor::Njs => "qm-njs.conf",
            Flavor::Plain => "qm-plain.conf",
        };
        let mut settings = format!(
            "set $qm_server {gateway}; set $qm_room {room}; set $qm_api_key {API_KEY}; \
             set $qm_fail_mode {mode};",
            room = site.room,
            mode = if site.fail_closed { "closed" } else { "open" },
        );
        if flavor == Flavor::Plain {
            let _ = write!(settings, " set $qm_session $cookie_qm_dk_{};", site.room);
        }
        let (in_server, in_location) = if site.per_location {
            ("", settings.as_str())
        } else {
            (settings.as_str(), "")
        };
        let _ = writeln!(
            text,
            "    server {{
        listen {addr};
        {in_server}
        include {connector}/{include};
        location / {{ {in_location} proxy_pass {origin}; }}
    }}",
            addr = site.addr,
        );
    }
    text.push_str("}\n");
    text
}

/// The journey through nginx configured with `flavor`: one server block for [`ROOM`], one
/// for [`GHOST_ROOM`]. njs is configured per location here and per server in the fail-closed
/// test; the plain config the other way round, so both placements are proven for both.
async fn journey_through(flavor: Flavor) {
    let app = journey::start_app().await;
    let site = Site {
        addr: free_addr(),
        room: ROOM,
        fail_closed: false,
        per_location: flavor == Flavor::Njs,
    };
    let ghost = Site {
        addr: free_addr(),
        room: GHOST_ROOM,
        fail_closed: false,
        per_location: false,
    };
    let (site_url, ghost_url) = (site.url(), ghost.url());
    journey::prepare_room(&app, &site_url).await;
    let origin = TestOrigin::start().await;
    let _nginx = Nginx::start(flavor, &app.gateway, &origin.url, &[site, ghost]).await;
    journey::run(app, &site_url, &ghost_url, true).await;
}

#[tokio::test]
async fn njs_carries_a_visitor_through_the_journey() {
    journey_through(Flavor::Njs).await;
}

#[tokio::test]
async fn plain_auth_request_carries_a_visitor_through_the_journey() {
    journey_through(Flavor::Plain).await;
}

/// A made-up door-session key is expired and its visitor queued; with `$qm_fail_mode closed`,
/// a queue server that cannot answer keeps the page shut: 503 with `Retry-After: 30`, and the
/// origin never sees the request.
async fn fails_closed(flavor: Flavor) {
    let app = journey::start_app().await;
    let site = Site {
        addr: free_addr(),
        room: ROOM,
        fail_closed: true,
        per_location: flavor == Flavor::Plain,
    };
    let url = site.url();
    journey::prepare_room(&app, &url).await;
    let origin = TestOrigin::start().await;
    let _nginx = Nginx::start(flavor, &app.gateway, &origin.url, &[site]).await;
    let page = format!("{url}/shop/item");
    let queued = journey::visit(&page, None).await;
    journey::assert_queued(&app, &queued, &page, "closed, the server up");
    // A made-up key is no way past the line, malformed or well-formed: the visitor is queued
    // and the cookie expired.
    let cookie = journey::session_cookie();
    for key in ["not-a-key!", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"] {
        let forged = journey::visit(&page, Some(&format!("{cookie}={key}"))).await;
        journey::assert_queued(&app, &forged, &page, &format!("a made-up key {key}"));
        let line = forged.cookie_line(&cookie).unwrap_or("");
        assert!(
            line.starts_with(&format!("{cookie}=;")) && line.contains("Max-Age=0"),
            "the made-up key {key} is expired: {line:?}"
        );
    }
    app.stop().await;
    let hits = origin.hits();
    let shut = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a reqwest client")
        .get(&page)
        .send()
        .await
        .expect("nginx answers");
    assert_eq!(shut.status(), 503, "closed, the server down");
    assert_eq!(
        shut.headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()),
        Some("30")
    );
    assert_eq!(origin.hits(), hits, "the origin was never asked");
}

#[tokio::test]
async fn njs_expires_made_up_keys_and_fails_closed_when_told_to() {
    fails_closed(Flavor::Njs).await;
}

#[tokio::test]
async fn plain_auth_request_expires_made_up_keys_and_fails_closed_when_told_to() {
    fails_closed(Flavor::Plain).await;
}

/// The version the manifest announces is the one the files carry (the njs module's constant,
/// which it logs, and both configs' headers), so an upgrade never ships a mixed set.
#[test]
fn the_files_carry_the_manifests_version() {
    let dir = connector_dir();
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("connector.json")).expect("connector.json"),
    )
    .expect("connector.json is JSON");
    let version = manifest["version"].as_str().expect("version");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
    assert!(
        read("qm.js").contains(&format!("var VERSION = '{version}';")),
        "qm.js carries {version}"
    );
    for conf in ["qm-njs.conf", "qm-plain.conf"] {
        let first = read(conf).lines().next().unwrap_or("").to_owned();
        assert!(
            first.ends_with(&format!("version {version}.")),
            "{conf} names {version} on its first line: {first}"
        );
    }
    let files: Vec<&str> = manifest["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|file| file.as_str())
        .collect();
    assert_eq!(files, ["qm.js", "qm-njs.conf", "qm-plain.conf"]);
}

/// A queue server that accepts connections and never answers: both configs give up after
/// their 2 s timeout and serve the page (fail open, the default).
#[tokio::test]
async fn a_queue_server_that_never_answers_fails_open_after_two_seconds() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the silent server");
    let silent_url = format!("http://{}", silent.local_addr().expect("its address"));
    // Holds every connection open without a byte; ends with the test.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let origin = TestOrigin::start().await;
    for flavor in [Flavor::Njs, Flavor::Plain] {
        let site = Site {
            addr: free_addr(),
            room: ROOM,
            fail_closed: false,
            per_location: false,
        };
        let page = format!("{}/shop/item", site.url());
        let _nginx = Nginx::start(flavor, &silent_url, &origin.url, &[site]).await;
        let started = std::time::Instant::now();
        let answer = journey::visit(&page, None).await;
        let waited = started.elapsed();
        assert!(
            journey::served(&answer, "/shop/item"),
            "served after the timeout; got {} {:?}",
            answer.status,
            answer.location
        );
        assert!(
            waited >= Duration::from_millis(1500) && waited < Duration::from_secs(6),
            "the check gave up after about 2 s, not {waited:?}"
        );
    }
    holder.abort();
}
