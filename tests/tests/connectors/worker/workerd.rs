//! workerd, Cloudflare's Worker runtime, serving `connectors/worker/worker.js` in front of a
//! test origin.
//!
//! The binary is `QM_WORKERD` when set, else the one npm installs under
//! `<target>/workerd` (`<target>` being `CARGO_TARGET_DIR` or the workspace's `target/`). When it
//! is missing and npm is on the PATH, the harness fetches it itself, once per test binary, with
//! `npm install --no-save --no-audit --no-fund --prefix <target>/workerd workerd@<WORKERD_VERSION>`
//! (the `workerd` package ships the linux-64 binary through its optional dependency
//! `@cloudflare/workerd-linux-64`), exactly as `qm_tests::axe` fetches axe-core
//! ([`qm_tests::npm::NpmRuntime`]).
//!
//! The Worker's configuration is written as a `config.capnp` into a scratch directory: the
//! Worker's bindings, a service binding `QM_ORIGIN` to the origin (on Cloudflare the route's
//! origin is reached with a plain `fetch(request)`; under workerd there is none behind the
//! socket), and an outbound network that may reach loopback (workerd's default allows only
//! public addresses, and the queue server listens on 127.0.0.1).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{RuntimeChild, workspace_root};
use qm_tests::npm::NpmRuntime;

/// The workerd release the tests (and `.ci/run`) install.
pub(crate) const WORKERD_VERSION: &str = "1.20261123.1";
/// Where npm leaves the binary inside the prefix: the platform package's own copy (a direct
/// child: killing it stops the runtime), else the `workerd` package's launcher.
const BINARY_IN_PREFIX: [&str; 2] = [
    "node_modules/@cloudflare/workerd-linux-64/bin/workerd",
    "node_modules/.bin/workerd",
];

/// What the Worker is configured with (its bindings).
pub(crate) struct WorkerConfig<'a> {
    pub(crate) server: &'a str,
    pub(crate) room_id: &'a str,
    pub(crate) api_key: &'a str,
    pub(crate) fail_mode: Option<&'a str>,
    pub(crate) timeout_ms: Option<u32>,
    /// `127.0.0.1:<port>` of the origin behind the Worker.
    pub(crate) origin: std::net::SocketAddr,
}

/// Starts workerd serving the Worker with `config`; the returned guard stops it.
pub(crate) async fn start(config: WorkerConfig<'_>) -> RuntimeChild {
    let binary = tokio::task::spawn_blocking(ensure_workerd)
        .await
        .expect("the workerd lookup ran")
        .unwrap_or_else(|reason| panic!("{reason}"));
    let addr = qm_tests::process::free_addr();
    let scratch = RuntimeChild::scratch_dir("workerd", addr.port());
    std::fs::copy(
        workspace_root().join("connectors/worker/worker.js"),
        scratch.join("worker.js"),
    )
    .expect("copy worker.js beside the config");
    std::fs::write(scratch.join("config.capnp"), capnp_config(&config))
        .expect("write the workerd config");
    let mut command = Command::new(binary);
    command
        .current_dir(&scratch)
        .arg("serve")
        .arg(scratch.join("config.capnp"))
        .arg("--socket-addr")
        .arg(format!("http={addr}"));
    RuntimeChild::start("workerd", command, scratch, addr).await
}

fn capnp_config(config: &WorkerConfig<'_>) -> String {
    let mut bindings = vec![
        text_binding("QM_SERVER", config.server),
        text_binding("QM_ROOM_ID", config.room_id),
        text_binding("QM_API_KEY", config.api_key),
        "(name = \"QM_ORIGIN\", service = \"origin\")".to_owned(),
    ];
    if let Some(mode) = config.fail_mode {
        bindings.push(text_binding("QM_FAIL_MODE", mode));
    }
    if let Some(timeout) = config.timeout_ms {
        bindings.push(text_binding("QM_TIMEOUT_MS", &timeout.to_string()));
    }
    format!(
        r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .connector),
    (name = "origin", external = (address = "{origin}", http = ())),
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [ (name = "http", http = (), service = "main") ],
);

const connector :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = "2024-09-23",
  bindings = [
    {bindings}
  ],
);
"#,
        origin = config.origin,
        bindings = bindings.join(",\n    "),
    )
}

/// A text binding; the values are the test's own (URLs, ids), so quoting is all they need.
fn text_binding(name: &str, value: &str) -> String {
    format!("(name = \"{name}\", text = {value:?})")
}

/// The workerd binary, fetched when missing and fetchable; `Err` is the one line a test that
/// needs it fails with.
fn ensure_workerd() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            NpmRuntime {
                what: "workerd",
                override_var: "QM_WORKERD",
                dir_name: "workerd",
                package: &format!("workerd@{WORKERD_VERSION}"),
                wanted: &BINARY_IN_PREFIX,
            }
            .locate_or_fetch()
        })
        .clone()
}
