//! A real WordPress for the plugin's tests: Debian's `wordpress` package served by PHP's
//! built-in server, on a fresh MariaDB database, with the Queue Manager plugin installed from
//! the files its `connector.json` packages.
//!
//! Nothing is left behind: the docroot is a temporary directory whose entries link to
//! `/usr/share/wordpress` (Debian's own `wp-config.php`, which reads `/etc/wordpress`, is
//! replaced by the test's), the content directory (plugins, the test's must-use plugin,
//! uploads) lives in it too, and both it and the database go when [`WordPress`] is dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Where Debian's package puts WordPress.
const WORDPRESS: &str = "/usr/share/wordpress";
/// What to install when the runtime is missing.
const INSTALL_HINT: &str = "apt-get install wordpress php-cli php-mysql";
/// The MariaDB the tests create their databases on (root, no password), unless
/// `QM_TEST_MYSQL` names another `host:port`.
const DEFAULT_MYSQL: &str = "127.0.0.1:3306";
/// The test site's administrator password (its login is `admin`).
pub(crate) const ADMIN_PASSWORD: &str = "test-admin-password-0123";

/// The test's own PHP files, written into the docroot.
const ROUTER: &str = include_str!("router.php");
const WP_CONFIG: &str = include_str!("wp-config.php");
const INSTALL: &str = include_str!("install.php");
const TEST_SITE: &str = include_str!("test-site.php");

/// What the plugin is configured with at install.
pub(crate) struct PluginSettings<'a> {
    pub(crate) server: &'a str,
    pub(crate) room_id: &'a str,
    pub(crate) api_key: &'a str,
}

/// One installed WordPress: its docroot and its database.
pub(crate) struct WordPress {
    root: PathBuf,
    database: String,
    mysql: String,
    /// The site's address as installed (`http://127.0.0.1:<port>`).
    pub(crate) home: String,
}

/// Fails the test with what to install when the runtime is not on this machine.
fn require_runtime() {
    assert!(
        Path::new(WORDPRESS).join("wp-settings.php").is_file(),
        "the WordPress tests need Debian's WordPress and PHP: {INSTALL_HINT}"
    );
    let php = Command::new("php")
        .args(["-r", "exit(extension_loaded('mysqli') ? 0 : 3);"])
        .status();
    match php {
        Ok(status) if status.success() => {}
        Ok(_) => panic!("PHP has no mysqli extension: apt-get install php-mysql"),
        Err(_) => panic!("the WordPress tests need PHP: {INSTALL_HINT}"),
    }
}

/// Every file `connector.json` packages, copied into `plugins/queue-manager/` as the zip would
/// unpack, so a file missing from the manifest breaks this test too.
fn install_plugin(plugins: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors/wordpress");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(source.join("connector.json")).expect("read connector.json"),
    )
    .expect("connector.json is JSON");
    let target = plugins.join("queue-manager");
    for file in manifest["files"].as_array().expect("files") {
        let file = file.as_str().expect("a file name");
        let destination = target.join(file);
        std::fs::create_dir_all(destination.parent().expect("a parent"))
            .expect("create the plugin directory");
        std::fs::copy(source.join(file), &destination)
            .unwrap_or_else(|error| panic!("copy {file} into the plugin: {error}"));
    }
}

impl WordPress {
    /// Installs WordPress for the site at `home` on a fresh database, with the plugin active
    /// and configured with `settings`.
    pub(crate) async fn install(home: &str, settings: PluginSettings<'_>) -> WordPress {
        require_runtime();
        static SITES: AtomicUsize = AtomicUsize::new(0);
        let n = SITES.fetch_add(1, Ordering::SeqCst);
        let name = format!("qm_wp_{}_{n}", std::process::id());
        let root = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&root);
        let content = root.join("wp-content");
        for dir in ["plugins", "mu-plugins", "themes", "uploads"] {
            std::fs::create_dir_all(content.join(dir)).expect("create wp-content");
        }
        for entry in std::fs::read_dir(WORDPRESS).expect("read /usr/share/wordpress") {
            let entry = entry.expect("a directory entry");
            let file_name = entry.file_name();
            if file_name == "wp-config.php" || file_name == "wp-content" {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), root.join(&file_name))
                .expect("link WordPress into the docroot");
        }
        std::fs::write(root.join("router.php"), ROUTER).expect("write router.php");
        std::fs::write(root.join("wp-config.php"), WP_CONFIG).expect("write wp-config.php");
        std::fs::write(root.join("install.php"), INSTALL).expect("write install.php");
        std::fs::write(content.join("mu-plugins/test-site.php"), TEST_SITE)
            .expect("write the must-use plugin");
        install_plugin(&content.join("plugins"));

        let wordpress = WordPress {
            root,
            database: name,
            mysql: std::env::var("QM_TEST_MYSQL").unwrap_or_else(|_| DEFAULT_MYSQL.to_owned()),
            home: home.to_owned(),
        };
        let installed = wordpress
            .php_command(home)
            .arg(wordpress.root.join("install.php"))
            .arg(&wordpress.root)
            .env("QM_WP_SERVER", settings.server)
            .env("QM_WP_ROOM_ID", settings.room_id)
            .env("QM_WP_API_KEY", settings.api_key)
            .env("QM_WP_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .output()
            .await
            .expect("run php install.php");
        assert!(
            installed.status.success(),
            "installing WordPress failed (it needs a MariaDB server on {} taking root without a \
             password: apt-get install mariadb-server): {}{}",
            wordpress.mysql,
            String::from_utf8_lossy(&installed.stdout),
            String::from_utf8_lossy(&installed.stderr)
        );
        wordpress
    }

    /// `php` with the environment the test's wp-config.php reads, for the site at `home`.
    fn php_command(&self, home: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("php");
        command
            .env("QM_WP_DB", &self.database)
            .env("QM_WP_DB_HOST", &self.mysql)
            .env("QM_WP_HOME", home)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `code` (PHP, without `<?php`) inside this WordPress from the command line, with
    /// `env` set, and returns what it printed. It fails the test when PHP does.
    pub(crate) async fn run_php(&self, code: &str, env: &[(&str, &str)]) -> String {
        let script = self.root.join(format!(
            "script-{}.php",
            SCRIPTS.fetch_add(1, Ordering::SeqCst)
        ));
        let prelude = "<?php\n\
            $_SERVER['HTTP_HOST'] = parse_url(getenv('QM_WP_HOME'), PHP_URL_HOST) . ':' . parse_url(getenv('QM_WP_HOME'), PHP_URL_PORT);\n\
            $_SERVER['REQUEST_URI'] = '/';\n\
            $_SERVER['REQUEST_METHOD'] = 'GET';\n\
            define('ABSPATH', __DIR__ . '/');\n\
            require ABSPATH . 'wp-load.php';\n";
        std::fs::write(&script, format!("{prelude}{code}")).expect("write the PHP script");
        let mut command = self.php_command(&self.home);
        command.arg(&script);
        for (name, value) in env {
            command.env(name, value);
        }
        let output = tokio::time::timeout(Duration::from_secs(30), command.output())
            .await
            .expect("the PHP script ends within 30 s")
            .expect("run php");
        let _ = std::fs::remove_file(&script);
        assert!(
            output.status.success(),
            "PHP failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("PHP printed UTF-8")
    }

    /// Serves this WordPress with `php -S` on `addr` as the site `http://<addr>`, with `env`
    /// (the must-use plugin's `QM_WP_ROOM`, `QM_WP_FAIL_MODE` overrides), and waits until it
    /// answers.
    pub(crate) async fn serve(&self, addr: SocketAddr, env: &[(&str, &str)]) -> PhpServer {
        let url = format!("http://{addr}");
        let log = self.root.join(format!("php-{}.log", addr.port()));
        let mut command = Command::new("php");
        command
            .args([
                "-d",
                "opcache.enable_cli=1",
                "-d",
                "display_errors=stderr",
                "-S",
            ])
            .arg(addr.to_string())
            .arg("-t")
            .arg(&self.root)
            .arg(self.root.join("router.php"))
            .env("QM_WP_DB", &self.database)
            .env("QM_WP_DB_HOST", &self.mysql)
            .env("QM_WP_HOME", &url)
            // One process: the child is the whole server, so killing it stops it all.
            .env_remove("PHP_CLI_SERVER_WORKERS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create the php -S log"));
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("start php -S");
        let mut server = PhpServer {
            url,
            child,
            log: log.clone(),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "php -S exited with {status}: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "php -S did not listen on {addr} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        server
    }

    /// What WordPress logged (PHP warnings, the plugin's `error_log` lines), for a failure's
    /// message.
    pub(crate) fn debug_log(&self) -> String {
        std::fs::read_to_string(self.root.join("debug.log"))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.contains("PHP Deprecated"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

static SCRIPTS: AtomicUsize = AtomicUsize::new(0);

impl Drop for WordPress {
    fn drop(&mut self) {
        let (host, port) = self.mysql.split_once(':').unwrap_or((&self.mysql, "3306"));
        let _ = Command::new("php")
            .arg("-r")
            .arg(format!(
                "mysqli_report(MYSQLI_REPORT_OFF); $db = @new mysqli('{host}', 'root', '', '', {port}); \
                 if (!$db->connect_errno) {{ $db->query('DROP DATABASE IF EXISTS `{}`'); }}",
                self.database
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A running `php -S`, stopped when dropped.
pub(crate) struct PhpServer {
    /// `http://127.0.0.1:<port>`.
    pub(crate) url: String,
    child: Child,
    log: PathBuf,
}

impl PhpServer {
    /// What the server logged (requests and PHP errors), for a failure's message.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for PhpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
