//! Driving a URL with `wrk` (Debian's package), the load generator of the benches whose
//! ceiling is a bare server: one C process on its own event loops, cheap enough per request to
//! saturate a server the in-process client could not. The bench starts it, waits, and reads
//! its `--latency` report.

use std::process::Command;

use anyhow::Context as _;

/// What one wrk run measured.
#[derive(Debug, Clone)]
pub(crate) struct WrkRun {
    pub(crate) per_second: f64,
    /// Answers wrk read whole in the run (requests still in flight at its end are not).
    pub(crate) requests: u64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    /// Answers that were not 2xx/3xx, and socket errors (connect, read, write, timeout).
    pub(crate) failures: u64,
    /// The report's failure lines as wrk wrote them, for the operator to read.
    pub(crate) failure_lines: String,
}

/// How wrk is run: threads, connections (requests in flight) and seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WrkLoad {
    pub(crate) threads: usize,
    pub(crate) connections: usize,
    pub(crate) seconds: u64,
}

/// Fails with the install line when wrk is not on the PATH.
pub(crate) fn require() -> anyhow::Result<()> {
    match Command::new("wrk").arg("--version").output() {
        Ok(_) => Ok(()),
        Err(_) => anyhow::bail!(
            "wrk is not installed: this bench's load generator is Debian's wrk (apt-get install wrk)"
        ),
    }
}

/// Runs wrk against `url` with `headers` (`Name: value`) and reads its report.
pub(crate) async fn run(url: &str, headers: &[String], load: WrkLoad) -> anyhow::Result<WrkRun> {
    run_script(url, headers, None, load).await
}

/// Runs wrk with a Lua `script` (how wrk sends a method and body other than a bare GET).
pub(crate) async fn run_script(
    url: &str,
    headers: &[String],
    script: Option<&std::path::Path>,
    load: WrkLoad,
) -> anyhow::Result<WrkRun> {
    let mut command = Command::new("wrk");
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    command
        .arg(format!("-t{}", load.threads))
        .arg(format!("-c{}", load.connections))
        .arg(format!("-d{}s", load.seconds))
        .arg("--latency");
    for header in headers {
        command.arg("-H").arg(header);
    }
    command.arg(url);
    // wrk blocks; the servers under test run on this process's runtime meanwhile.
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .context("wrk's thread")?
        .context("starting wrk")?;
    let report = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "wrk failed: {report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse(&report).with_context(|| format!("reading wrk's report:\n{report}"))
}

/// One of several wrk processes run at once: its URL, headers and script.
#[derive(Debug, Clone)]
pub(crate) struct Aim {
    pub(crate) url: String,
    pub(crate) headers: Vec<String>,
    pub(crate) script: Option<std::path::PathBuf>,
}

/// Runs one wrk per aim at the same moment, each with `load`, and adds up what they measured:
/// requests/s, requests and failures are sums; p50 and p99 are the worst of the processes'.
pub(crate) async fn run_together(aims: &[Aim], load: WrkLoad) -> anyhow::Result<WrkRun> {
    let runs = futures::future::try_join_all(
        aims.iter()
            .map(|aim| run_script(&aim.url, &aim.headers, aim.script.as_deref(), load)),
    )
    .await?;
    Ok(WrkRun {
        per_second: runs.iter().map(|run| run.per_second).sum(),
        requests: runs.iter().map(|run| run.requests).sum(),
        p50_ms: runs.iter().map(|run| run.p50_ms).fold(0.0, f64::max),
        p99_ms: runs.iter().map(|run| run.p99_ms).fold(0.0, f64::max),
        failures: runs.iter().map(|run| run.failures).sum(),
        failure_lines: runs.iter().map(|run| run.failure_lines.as_str()).collect(),
    })
}

fn parse(report: &str) -> anyhow::Result<WrkRun> {
    let mut per_second = None;
    let mut requests = None;
    let mut p50_ms = None;
    let mut p99_ms = None;
    let mut failures = 0;
    let mut failure_lines = String::new();
    for line in report.lines().map(str::trim) {
        if let Some(rate) = line.strip_prefix("Requests/sec:") {
            per_second = rate.trim().parse().ok();
        } else if let Some(latency) = line.strip_prefix("50%") {
            p50_ms = milliseconds(latency.trim());
        } else if let Some(latency) = line.strip_prefix("99%") {
            p99_ms = milliseconds(latency.trim());
        } else if let Some((count, _)) = line.split_once(" requests in ") {
            requests = count.trim().parse().ok();
        } else if let Some(count) = line.strip_prefix("Non-2xx or 3xx responses:") {
            failures += count.trim().parse::<u64>().unwrap_or(1);
            failure_lines.push_str(line);
            failure_lines.push('\n');
        } else if let Some(errors) = line.strip_prefix("Socket errors:") {
            failures += errors
                .split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum::<u64>();
            failure_lines.push_str(line);
            failure_lines.push('\n');
        }
    }
    Ok(WrkRun {
        per_second: per_second.context("no Requests/sec line")?,
        requests: requests.context("no 'requests in' line")?,
        p50_ms: p50_ms.context("no 50% line")?,
        p99_ms: p99_ms.context("no 99% line")?,
        failures,
        failure_lines,
    })
}

/// `812.00us`, `1.02ms`, `1.50s` in milliseconds.
fn milliseconds(text: &str) -> Option<f64> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic())?);
    let number: f64 = number.parse().ok()?;
    match unit {
        "us" => Some(number / 1000.0),
        "ms" => Some(number),
        "s" => Some(number * 1000.0),
        "m" => Some(number * 60_000.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_report_reads_whole() {
        let report = "Running 3s test @ http://127.0.0.1:1/hello
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   812.00us  300.00us   9.00ms   90.00%
  Latency Distribution
     50%  720.00us
     75%    0.90ms
     90%    1.10ms
     99%    2.05ms
  300000 requests in 3.00s, 30.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec: 100000.00
Transfer/sec:     10.00MB
";
        let run = parse(report).unwrap();
        assert_eq!(run.per_second, 100_000.0);
        assert_eq!(run.requests, 300_000);
        assert!((run.p50_ms - 0.72).abs() < 1e-9);
        assert!((run.p99_ms - 2.05).abs() < 1e-9);
        assert_eq!(run.failures, 7);
        assert!(run.failure_lines.contains("timeout 1"));
    }
}
