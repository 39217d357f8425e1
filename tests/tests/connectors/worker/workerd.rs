//! workerd, Cloudflare's Worker runtime, serving `connectors/worker/worker.js` in front of a
//! test origin.
//!
//! The binary is `QM_WORKERD` when set, else the one npm installs under
//! `<target>/workerd` (`<target>` being `CARGO_TARGET_DIR` or the workspace's `target/`). When it
//! is missing and npm is on the PATH, the harness fetches it itself, once per test binary, with
//! `npm install --no-save --no-audit --no-fund --prefix <target>/workerd workerd@<WORKERD_VERSION>`
//! (the `workerd` package ships the linux-64 binary through its optional dependency
//! `@cloudflare/workerd-linux-64`), exactly as `qm_tests::axe` fetches axe-core: into a
//! staging directory renamed into place in one step, so two test binaries never see a
//! half-written copy.
//!
//! The Worker's configuration is written as a `config.capnp` into a scratch directory: the
//! Worker's bindings, a service binding `QM_ORIGIN` to the origin (on Cloudflare the route's
//! origin is reached with a plain `fetch(request)`; under workerd there is none behind the
//! socket), and an outbound network that may reach loopback (workerd's default allows only
//! public addresses, and the queue server listens on 127.0.0.1).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::support::{RuntimeChild, workspace_root};

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
    FOUND.get_or_init(locate_or_fetch).clone()
}

fn locate_or_fetch() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("QM_WORKERD").filter(|path| !path.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "workerd not found at {} (QM_WORKERD): point QM_WORKERD at a workerd binary, or \
                 unset it to have the tests fetch workerd with npm",
                path.display()
            ))
        };
    }
    let prefix = qm_tests::axe::target_dir().join("workerd");
    if let Some(binary) = binary_in(&prefix) {
        return Ok(binary);
    }
    let command = install_command_line(&prefix);
    if !npm_available() {
        return Err(format!(
            "workerd not found under {} and npm is not installed to fetch it: apt-get install npm \
             (then the tests run `{command}` themselves), or set QM_WORKERD to a workerd binary",
            prefix.display()
        ));
    }
    fetch_into(&prefix).map_err(|reason| {
        format!(
            "workerd not found under {} and `{command}` failed: {reason}",
            prefix.display()
        )
    })?;
    let binary = binary_in(&prefix)
        .ok_or_else(|| format!("`{command}` finished but left no workerd binary"))?;
    // Straight to stderr, past the test harness's capture: the one line says what was done.
    let _ = writeln!(
        std::io::stderr(),
        "qm-tests: workerd was missing; fetched workerd {WORKERD_VERSION} with `{command}`"
    );
    Ok(binary)
}

fn binary_in(prefix: &Path) -> Option<PathBuf> {
    BINARY_IN_PREFIX
        .iter()
        .map(|relative| prefix.join(relative))
        .find(|path| path.is_file())
}

fn install_command_line(prefix: &Path) -> String {
    format!(
        "npm install --no-save --no-audit --no-fund --prefix {} workerd@{WORKERD_VERSION}",
        prefix.display()
    )
}

fn npm_available() -> bool {
    Command::new("npm")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Installs workerd under a staging prefix beside `prefix`, then renames it to `prefix` (a
/// leftover `prefix` without the binary, from an interrupted install, is moved aside first;
/// losing the race to another process's complete copy is success).
fn fetch_into(prefix: &Path) -> Result<(), String> {
    let parent = prefix.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .map_err(|error| format!("create {}: {error}", parent.display()))?;
    let staging = parent.join(format!("workerd.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|error| format!("create {}: {error}", staging.display()))?;
    let placed = run_npm_install(&staging).and_then(|()| {
        if binary_in(&staging).is_none() {
            return Err("npm finished but left no workerd binary".to_owned());
        }
        if prefix.exists() && binary_in(prefix).is_none() {
            let aside = prefix.with_file_name(format!("workerd.stale-{}", std::process::id()));
            if std::fs::rename(prefix, &aside).is_ok() {
                let _ = std::fs::remove_dir_all(&aside);
            }
        }
        match std::fs::rename(&staging, prefix) {
            Ok(()) => Ok(()),
            Err(_) if binary_in(prefix).is_some() => Ok(()),
            Err(error) => Err(format!(
                "move {} to {}: {error}",
                staging.display(),
                prefix.display()
            )),
        }
    });
    let _ = std::fs::remove_dir_all(&staging);
    placed
}

fn run_npm_install(staging: &Path) -> Result<(), String> {
    let output = Command::new("npm")
        .args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(staging)
        .arg(format!("workerd@{WORKERD_VERSION}"))
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("start npm: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    // npm's last lines carry the reason (registry unreachable, no such version).
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    Err(format!("npm exited with {}: {tail}", output.status))
}
