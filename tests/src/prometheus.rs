//! Real Prometheus parts for the metrics tests: `promtool check metrics` on an exposition, a
//! scrape's text read into samples, and a `prometheus` server started on loopback with a config
//! of the test's own, queried through its HTTP API. Both binaries come from Debian's
//! `prometheus` package; without them a test fails saying so, never skips.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const INSTALL: &str = "the metrics tests need Debian's prometheus (prometheus and promtool): apt-get install prometheus";

fn binary(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    found.unwrap_or_else(|| panic!("{name} is not on the PATH; {INSTALL}"))
}

/// Runs `promtool check metrics` on `exposition`: panics with promtool's findings unless clean.
pub fn promtool_check(exposition: &str) {
    let mut child = Command::new(binary("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("promtool starts: {error}; {INSTALL}"));
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(exposition.as_bytes())
        .expect("promtool reads the exposition");
    let output = child.wait_with_output().expect("promtool ends");
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\nexposition:\n{exposition}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// The value of the sample written exactly `series` (`name{label="value",…}` as the exposition
/// spells it, or a bare name), if the exposition has it.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        rest.split(' ').next()?.parse().ok()
    })
}

/// A `prometheus` server on loopback, stopped when dropped.
pub struct PrometheusServer {
    pub url: String,
    child: Child,
    dir: TempDir,
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl PrometheusServer {
    /// Starts `prometheus` with `config` (YAML) on a free loopback port, its data in a private
    /// directory, and waits until it is ready.
    pub async fn start(config: &str) -> PrometheusServer {
        let dir = std::env::temp_dir().join(format!(
            "qm-prometheus-{}-{}",
            std::process::id(),
            qm_core::ids::new_session_id()
        ));
        std::fs::create_dir_all(&dir).expect("a private directory");
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).expect("the config is written");
        let addr = crate::process::free_addr();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("a log file");
        let child = Command::new(binary("prometheus"))
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("prometheus starts: {error}; {INSTALL}"));
        let server = PrometheusServer {
            url: format!("http://{addr}"),
            child,
            dir: TempDir(dir),
        };
        server.wait_ready().await;
        server
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("prometheus.log")).unwrap_or_default()
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tokio::time::Instant::now() < deadline {
            if let Ok(response) = client.get(format!("{}/-/ready", self.url)).send().await
                && response.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("prometheus never became ready; its log:\n{}", self.log());
    }

    /// A GET of the HTTP API at `path` with `query`, as JSON.
    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .query(query)
            .send()
            .await
            .expect("prometheus answers")
            .json()
            .await
            .expect("JSON")
    }

    /// An instant query through the HTTP API: the result vector.
    pub async fn query(&self, promql: &str) -> Vec<Value> {
        let reply = self.api("/api/v1/query", &[("query", promql)]).await;
        assert_eq!(reply["status"], "success", "{promql}: {reply}");
        reply["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The first value `promql` answers, if any.
    pub async fn value(&self, promql: &str) -> Option<f64> {
        self.query(promql)
            .await
            .first()
            .and_then(|series| series["value"][1].as_str())
            .and_then(|value| value.parse().ok())
    }

    /// Waits until `promql` answers `expected`; panics with what it answered last and the
    /// scrape targets' health otherwise.
    pub async fn wait_for(&self, promql: &str, expected: f64, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        let mut last = None;
        while tokio::time::Instant::now() < deadline {
            last = self.value(promql).await;
            if last == Some(expected) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let targets = self.api("/api/v1/targets", &[]).await;
        panic!(
            "{promql}: expected {expected}, last answered {last:?}; targets: {targets}\nlog:\n{}",
            self.log()
        );
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
