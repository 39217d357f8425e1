//! The browser-test harness: Debian's `chromium`, driven headless through `chromedriver`
//! (WebDriver) with the `fantoccini` crate, against an app started by [`crate::spawn_app`].
//!
//! One chromedriver runs per test binary, on a free loopback port, started on first use and
//! gone when the binary exits (a watchdog shell holds the read end of a pipe whose write end
//! lives in this process: when the process ends, however it ends, the shell kills the driver's
//! process group). Each [`Browser`] is a fresh session with a new, empty `--user-data-dir`, so
//! a second profile without the first one's cookies and storage is simply a second `Browser`.
//!
//! Every session records the browser console (`goog:loggingPrefs` {browser: ALL}); tests read
//! it with [`Browser::console_errors`] and assert there is none. [`Browser::axe`] runs axe-core
//! (from npm, fetched by the harness when missing, see [`crate::axe`]) in the page.
//! [`Browser::screenshot`] saves a PNG under `target/screenshots/`. Every wait is bounded
//! ([`wait_for`], [`run`]).
//!
//! Nothing is skipped: without chromium or chromedriver the test fails with one line saying
//! what to install; without axe-core (and no npm to fetch it) a test that runs it does too.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

pub use crate::axe::{axe_path, target_dir};

/// Where Debian puts the two programs; `QM_CHROMIUM` and `QM_CHROMEDRIVER` override.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// How to get what the browser tests need, said by every failure that lacks it.
const INSTALL_BROWSER: &str = "the browser tests need Debian's chromium and chromedriver: \
     apt-get install chromium chromium-driver (or set QM_CHROMIUM / QM_CHROMEDRIVER)";

/// A desktop window and a phone-sized one (the sizes the screenshots are taken at).
pub const DESKTOP: (u32, u32) = (1280, 800);
pub const PHONE: (u32, u32) = (375, 812);

/// How many tests drive a browser at once: the machine this runs on may have two cores, and a
/// chromium per test beside the app would starve the timing the tests measure.
/// `QM_BROWSER_PARALLEL` overrides.
fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS.get_or_init(|| {
        let parallel = std::env::var("QM_BROWSER_PARALLEL")
            .ok()
            .and_then(|value| value.parse::<usize>().ok())
            .filter(|value| *value > 0)
            .unwrap_or(2);
        Semaphore::new(parallel)
    })
}

/// Runs one browser test: waits for a free slot, then runs `body` within `limit_secs`, so a
/// page that never reaches a state fails the test instead of hanging it. Dropping the body on
/// timeout closes its browsers (see [`Browser`]'s Drop).
pub async fn run<F: Future<Output = ()>>(limit_secs: u64, body: F) {
    // axe-core is fetched (once per binary) before the clock starts, so a slow registry does
    // not eat a test's limit; a failure here is reported by the tests that run axe-core.
    let _ = tokio::task::spawn_blocking(crate::axe::ensure_axe).await;
    let _slot = tokio::time::timeout(Duration::from_secs(1800), slots().acquire())
        .await
        .expect("a browser slot frees up within 30 minutes")
        .expect("the slot semaphore is never closed");
    tokio::time::timeout(Duration::from_secs(limit_secs), body)
        .await
        .unwrap_or_else(|_| panic!("browser test did not finish within {limit_secs} s"));
}

/// Polls `probe` every 100 ms until it returns `Ok`, for at most `limit`; the panic names
/// `what` and the last thing the probe saw (its `Err`).
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let seen = match probe().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            panic!("waited {limit:?} for {what}; last seen: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn program(env: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(env)
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        path.is_file(),
        "{} not found at {}: {INSTALL_BROWSER}",
        Path::new(default)
            .file_name()
            .map_or(default.into(), |name| name.to_string_lossy()),
        path.display()
    );
    path
}

/// The chromedriver of this test binary.
struct Driver {
    port: u16,
    /// The write end of the watchdog's pipe: never written, closed when the process ends.
    _lifeline: Mutex<ChildStdin>,
    _watchdog: Mutex<Child>,
}

fn driver() -> &'static Driver {
    static DRIVER: OnceLock<Driver> = OnceLock::new();
    DRIVER.get_or_init(start_driver)
}

fn start_driver() -> Driver {
    let chromedriver = program("QM_CHROMEDRIVER", CHROMEDRIVER);
    program("QM_CHROMIUM", CHROMIUM);
    let port = crate::process::free_addr().port();
    // The driver's log lives as long as the driver: the watchdog removes it, and a driver that
    // does not come up has it quoted in the failure.
    let log = std::env::temp_dir().join(format!("qm-chromedriver-{}.log", std::process::id()));
    // The shell runs in a process group of its own; when its stdin reaches EOF (this process
    // is gone) it takes the group down, chromedriver and any chromium a crashed test left.
    let script = r#"
"$0" --port="$1" --allowed-ips=127.0.0.1 --log-path="$2" </dev/null >/dev/null 2>&1 &
cat >/dev/null
rm -f "$2"
kill -s TERM 0
"#;
    let mut watchdog = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(&chromedriver)
        .arg(port.to_string())
        .arg(&log)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|error| panic!("start {}: {error}", chromedriver.display()));
    let lifeline = watchdog
        .stdin
        .take()
        .expect("the watchdog's stdin is piped");
    let driver = Driver {
        port,
        _lifeline: Mutex::new(lifeline),
        _watchdog: Mutex::new(watchdog),
    };
    for _ in 0..200 {
        if let Ok(reply) = raw_http(port, "GET", "/status", None)
            && reply.contains("\"ready\":true")
        {
            return driver;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "chromedriver on 127.0.0.1:{port} did not answer /status within 10 s; {INSTALL_BROWSER}\n\
         its log ({}):\n{}",
        log.display(),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// A blocking HTTP/1.1 request to chromedriver (for start-up and for Drop, where there is no
/// runtime to await on). Returns the body.
fn raw_http(port: u16, method: &str, path: &str, body: Option<&str>) -> std::io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    // chromedriver keeps the connection open whatever the request says, so read the head,
    // then exactly Content-Length bytes of body.
    let mut reply = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = reply.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&reply[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while reply.len() < head_end + length {
        let read = stream.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        reply.extend_from_slice(&buffer[..read]);
    }
    Ok(String::from_utf8_lossy(&reply[head_end..]).into_owned())
}

/// A raw WebDriver command on the current session: chromedriver's extensions fantoccini has
/// no method for (the console log, network conditions).
#[derive(Debug)]
struct SessionCommand {
    method: http::Method,
    path: &'static str,
    body: Option<Value>,
}

impl WebDriverCompatibleCommand for SessionCommand {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/{}",
            session_id.unwrap_or(""),
            self.path
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            self.method.clone(),
            self.body.as_ref().map(Value::to_string),
        )
    }
}

/// How a browser session starts.
#[derive(Debug, Clone)]
pub struct Options {
    pub window: (u32, u32),
    /// The browser's language list (Accept-Language and navigator.languages), e.g. `th`.
    pub lang: Option<String>,
    /// Host names the browser resolves to 127.0.0.1 (`--host-resolver-rules`), so a page can be
    /// opened on a name of its own (an inline host) and the server sees that `Host`.
    pub loopback_hosts: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            window: DESKTOP,
            lang: None,
            loopback_hosts: Vec::new(),
        }
    }
}

/// One entry of the browser console log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub level: String,
    pub source: String,
    pub message: String,
}

/// One axe-core violation.
#[derive(Debug, Clone)]
pub struct Violation {
    pub id: String,
    pub impact: String,
    pub help: String,
    /// The CSS targets and failure summaries of the offending nodes.
    pub nodes: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "[{}] {}: {}", self.impact, self.id, self.help)?;
        for node in &self.nodes {
            writeln!(f, "    {node}")?;
        }
        Ok(())
    }
}

/// A fresh chromium session with an empty profile. Dropping it ends the session and removes
/// the profile, also when the test panicked or timed out.
pub struct Browser {
    pub client: fantoccini::Client,
    session_id: String,
    profile: PathBuf,
    /// Every console entry read so far (reading the log drains it in chromedriver).
    log: Mutex<Vec<LogEntry>>,
}

impl Browser {
    /// A desktop-sized session in the browser's default language.
    pub async fn open() -> Browser {
        Browser::open_with(Options::default()).await
    }

    pub async fn open_with(options: Options) -> Browser {
        static PROFILES: AtomicU64 = AtomicU64::new(0);
        let driver = tokio::task::spawn_blocking(driver)
            .await
            .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
        let profile = std::env::temp_dir().join(format!(
            "qm-browser-{}-{}",
            std::process::id(),
            PROFILES.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).expect("create a browser profile directory");
        let (width, height) = options.window;
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--user-data-dir={}", profile.display()),
            format!("--window-size={width},{height}"),
        ];
        if !options.loopback_hosts.is_empty() {
            let rules: Vec<String> = options
                .loopback_hosts
                .iter()
                .map(|host| format!("MAP {host} 127.0.0.1"))
                .collect();
            args.push(format!("--host-resolver-rules={}", rules.join(",")));
        }
        let mut prefs = serde_json::Map::new();
        if let Some(lang) = &options.lang {
            args.push(format!("--lang={lang}"));
            prefs.insert("intl.accept_languages".into(), json!(lang));
        }
        let mut chrome_options = json!({ "args": args, "prefs": prefs });
        if let Some(binary) = std::env::var_os("QM_CHROMIUM").filter(|value| !value.is_empty()) {
            chrome_options["binary"] = json!(binary.to_string_lossy());
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), chrome_options);
        capabilities.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        capabilities.insert("pageLoadStrategy".into(), json!("normal"));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let started = tokio::time::timeout(
            Duration::from_secs(60),
            fantoccini::ClientBuilder::new(connector)
                .capabilities(capabilities)
                .connect(&format!("http://127.0.0.1:{}/", driver.port)),
        )
        .await;
        let client = match started {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => panic!("chromium did not start: {error}; {INSTALL_BROWSER}"),
            Err(_) => panic!("chromium did not start within 60 s; {INSTALL_BROWSER}"),
        };
        let session_id = client
            .session_id()
            .await
            .ok()
            .flatten()
            .expect("a new WebDriver session has an id");
        let browser = Browser {
            client,
            session_id,
            profile,
            log: Mutex::new(Vec::new()),
        };
        browser.resize(options.window).await;
        browser
    }

    /// Opens `url` and waits for its load event.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|error| panic!("open {url}: {error}"));
    }

    /// Reloads the page.
    pub async fn reload(&self) {
        self.client
            .refresh()
            .await
            .unwrap_or_else(|error| panic!("reload: {error}"));
    }

    pub async fn current_url(&self) -> Result<String, String> {
        self.client
            .current_url()
            .await
            .map(String::from)
            .map_err(|error| error.to_string())
    }

    /// Runs `script` (a function body: `return` gives the value) with `args`.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Result<Value, String> {
        self.client
            .execute(script, args)
            .await
            .map_err(|error| format!("script failed: {error}"))
    }

    /// The trimmed text of the first element matching `selector`, `Err` when there is none.
    pub async fn text(&self, selector: &str) -> Result<String, String> {
        let value = self
            .js(
                "var e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null;",
                vec![json!(selector)],
            )
            .await?;
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no element matches {selector}"))
    }

    /// Whether the first element matching `selector` is rendered and visible.
    pub async fn visible(&self, selector: &str) -> Result<bool, String> {
        let value = self
            .js(
                "var e = document.querySelector(arguments[0]);\
                 if (!e || e.closest('[hidden]')) { return false; }\
                 var style = window.getComputedStyle(e);\
                 return style.display !== 'none' && style.visibility !== 'hidden' && e.getClientRects().length > 0;",
                vec![json!(selector)],
            )
            .await?;
        Ok(value.as_bool().unwrap_or(false))
    }

    /// Clicks the first element matching `selector` as a user would (WebDriver's element
    /// click: scrolled into view, refused when something covers it).
    pub async fn click(&self, selector: &str) -> Result<(), String> {
        let element = self
            .client
            .find(fantoccini::Locator::Css(selector))
            .await
            .map_err(|error| format!("no element matches {selector}: {error}"))?;
        element
            .click()
            .await
            .map_err(|error| format!("click {selector}: {error}"))
    }

    /// Clears the control matching `selector` and types `text` into it, key by key.
    pub async fn fill(&self, selector: &str, text: &str) -> Result<(), String> {
        let element = self
            .client
            .find(fantoccini::Locator::Css(selector))
            .await
            .map_err(|error| format!("no element matches {selector}: {error}"))?;
        element
            .clear()
            .await
            .map_err(|error| format!("clear {selector}: {error}"))?;
        element
            .send_keys(text)
            .await
            .map_err(|error| format!("type into {selector}: {error}"))
    }

    /// Types `keys` into whatever has focus (`fantoccini::key::Key` values for special keys,
    /// e.g. `&char::from(Key::Tab).to_string()`).
    pub async fn press(&self, keys: &str) -> Result<(), String> {
        let element = self
            .client
            .active_element()
            .await
            .map_err(|error| format!("find the focused element: {error}"))?;
        element
            .send_keys(keys)
            .await
            .map_err(|error| format!("press {keys:?}: {error}"))
    }

    /// An attribute of `<html>` (`lang`, `data-qm-state`, …).
    pub async fn html_attr(&self, name: &str) -> Result<Option<String>, String> {
        let value = self
            .js(
                "return document.documentElement.getAttribute(arguments[0]);",
                vec![json!(name)],
            )
            .await?;
        Ok(value.as_str().map(str::to_owned))
    }

    /// `localStorage[key]` of the current page's origin.
    pub async fn local_storage(&self, key: &str) -> Result<Option<String>, String> {
        let value = self
            .js(
                "return window.localStorage.getItem(arguments[0]);",
                vec![json!(key)],
            )
            .await?;
        Ok(value.as_str().map(str::to_owned))
    }

    /// The value of cookie `name` for the current page (HttpOnly ones included).
    pub async fn cookie(&self, name: &str) -> Result<Option<String>, String> {
        let cookies = self
            .client
            .get_all_cookies()
            .await
            .map_err(|error| error.to_string())?;
        Ok(cookies
            .into_iter()
            .find(|cookie| cookie.name() == name)
            .map(|cookie| cookie.value().to_owned()))
    }

    /// Sizes the viewport (what the page lays out in, and what a screenshot holds) to
    /// `width`×`height`: WebDriver sizes the outer window, which headless chromium still
    /// frames with room for its toolbar, so the frame is measured and added.
    pub async fn resize(&self, (width, height): (u32, u32)) {
        let mut outer = (width, height);
        for _ in 0..3 {
            self.client
                .set_window_size(outer.0, outer.1)
                .await
                .unwrap_or_else(|error| panic!("resize to {width}x{height}: {error}"));
            let inner = self
                .js("return [window.innerWidth, window.innerHeight];", vec![])
                .await
                .unwrap_or_else(|error| panic!("read the viewport size: {error}"));
            let size =
                |index: usize| u32::try_from(inner[index].as_u64().unwrap_or(0)).unwrap_or(0);
            let (inner_width, inner_height) = (size(0), size(1));
            if (inner_width, inner_height) == (width, height) {
                return;
            }
            outer = (
                (outer.0 + width).saturating_sub(inner_width),
                (outer.1 + height).saturating_sub(inner_height),
            );
        }
        panic!("could not size the viewport to {width}x{height}");
    }

    /// Saves a PNG of the viewport as `target/screenshots/<name>.png`; returns the path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|error| panic!("screenshot {name}: {error}"));
        let dir = target_dir().join("screenshots");
        std::fs::create_dir_all(&dir).expect("create target/screenshots");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write the screenshot");
        path
    }

    /// Takes the page offline (or back online) with chromedriver's network conditions: new
    /// requests fail as they would without a network.
    pub async fn set_offline(&self, offline: bool) {
        let command = SessionCommand {
            method: http::Method::POST,
            path: "chromium/network_conditions",
            body: Some(json!({
                "network_conditions": {
                    "offline": offline,
                    "latency": 0,
                    "download_throughput": -1,
                    "upload_throughput": -1,
                }
            })),
        };
        self.client
            .issue_cmd(command)
            .await
            .unwrap_or_else(|error| panic!("set network conditions offline={offline}: {error}"));
    }

    /// Forgets every console entry logged so far: a later check sees only what follows.
    pub async fn forget_console_log(&self) {
        self.console_log().await;
        self.log.lock().expect("log lock").clear();
    }

    /// Every console entry the browser logged so far, in order.
    pub async fn console_log(&self) -> Vec<LogEntry> {
        let command = SessionCommand {
            method: http::Method::POST,
            path: "se/log",
            body: Some(json!({ "type": "browser" })),
        };
        let fresh = self
            .client
            .issue_cmd(command)
            .await
            .unwrap_or_else(|error| panic!("read the browser console log: {error}"));
        let mut log = self.log.lock().expect("log lock");
        for entry in fresh.as_array().into_iter().flatten() {
            let field = |name: &str| entry[name].as_str().unwrap_or("").to_owned();
            log.push(LogEntry {
                level: field("level"),
                source: field("source"),
                message: field("message"),
            });
        }
        log.clone()
    }

    /// The SEVERE entries of the console log: script errors, failed loads, CSP refusals.
    pub async fn console_errors(&self) -> Vec<LogEntry> {
        self.console_log()
            .await
            .into_iter()
            .filter(|entry| entry.level == "SEVERE")
            .collect()
    }

    /// Fails the test when the console holds any error.
    pub async fn assert_no_console_errors(&self) {
        let errors = self.console_errors().await;
        assert!(
            errors.is_empty(),
            "the browser console logged errors:\n{}",
            errors
                .iter()
                .map(|entry| format!("  {} {}: {}", entry.level, entry.source, entry.message))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Runs axe-core on the current page; returns the violations of impact serious or critical.
    pub async fn axe(&self) -> Vec<Violation> {
        let source = tokio::task::spawn_blocking(crate::axe::axe_source)
            .await
            .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
        let loaded = self
            .js(&format!("{source}\n;return typeof window.axe;"), vec![])
            .await
            .unwrap_or_else(|error| panic!("inject axe-core: {error}"));
        assert_eq!(loaded, json!("object"), "axe-core did not load in the page");
        let result = self
            .client
            .execute_async(
                "var done = arguments[arguments.length - 1];\
                 window.axe.run(document, { resultTypes: ['violations'] })\
                   .then(function (r) { done({ violations: r.violations }); })\
                   .catch(function (e) { done({ error: String(e) }); });",
                vec![],
            )
            .await
            .unwrap_or_else(|error| panic!("run axe-core: {error}"));
        if let Some(error) = result["error"].as_str() {
            panic!("axe-core failed: {error}");
        }
        result["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|violation| {
                matches!(violation["impact"].as_str(), Some("serious" | "critical"))
            })
            .map(|violation| Violation {
                id: violation["id"].as_str().unwrap_or("").to_owned(),
                impact: violation["impact"].as_str().unwrap_or("").to_owned(),
                help: violation["help"].as_str().unwrap_or("").to_owned(),
                nodes: violation["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|node| {
                        format!(
                            "{} — {}",
                            node["target"],
                            node["failureSummary"]
                                .as_str()
                                .unwrap_or("")
                                .replace('\n', " ")
                        )
                    })
                    .collect(),
            })
            .collect()
    }

    /// Fails the test when axe-core finds a serious or critical violation on the page.
    pub async fn assert_accessible(&self, what: &str) {
        let violations = self.axe().await;
        assert!(
            violations.is_empty(),
            "axe-core found serious or critical violations on {what}:\n{}",
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<String>()
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Blocking on purpose: the test's runtime may be shutting down, and a session left open
        // keeps a chromium running until the binary exits.
        let _ = raw_http(
            driver().port,
            "DELETE",
            &format!("/session/{}", self.session_id),
            None,
        );
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A tiny site on a loopback port standing in for a room's `targetUrl`: every path answers a
/// small HTML page (with an inline icon, so the browser asks for nothing that could fail).
pub struct TargetSite {
    origin: String,
    task: tokio::task::JoinHandle<()>,
}

impl TargetSite {
    pub async fn start() -> TargetSite {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind an ephemeral loopback port");
        let origin = format!(
            "http://{}",
            listener
                .local_addr()
                .expect("bound listener has an address")
        );
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 2048];
                    // Read the request head; the body (there is none) does not matter.
                    while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => request.extend_from_slice(&buffer[..read]),
                        }
                    }
                    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
                                <link rel=\"icon\" href=\"data:,\"><title>Checkout</title></head>\
                                <body><main><h1>Checkout</h1></main></body></html>";
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                        page.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        TargetSite { origin, task }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }
}

impl Drop for TargetSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}
