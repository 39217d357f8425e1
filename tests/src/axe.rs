//! axe-core for the browser tests' accessibility check ([`crate::browser::Browser::axe`]).
//!
//! The script is `QM_AXE_JS` when set, else `<target>/axe/node_modules/axe-core/axe.min.js`
//! (`<target>` being `CARGO_TARGET_DIR` or the workspace's `target/`). When that file is missing
//! and npm is on the PATH, the harness fetches it itself, once per test binary, with
//! `npm install --no-save --no-audit --no-fund --prefix <target>/axe axe-core@4`, so
//! `cargo test --workspace` passes on a fresh checkout without a setup step.
//!
//! npm installs into a staging directory of this process that is then renamed into place in one
//! step: two test binaries fetching at once never see (nor leave) a half-written `axe`, and
//! the one that loses the race uses the winner's copy. A `QM_AXE_JS` that names a missing file is
//! never replaced by a download: the test fails and says so.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The version range fetched, as `.ci/run` and the README name it.
const AXE_PACKAGE: &str = "axe-core@4";
/// Where axe-core's script sits inside an npm prefix.
const AXE_SCRIPT_IN_PREFIX: &str = "node_modules/axe-core/axe.min.js";

/// The workspace's target directory: `CARGO_TARGET_DIR` (a relative one taken from the
/// workspace root, where cargo is run), or `target/` in the workspace root.
pub fn target_dir() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace_root = manifest_dir.parent().unwrap_or(manifest_dir);
    target_dir_in(workspace_root, std::env::var_os("CARGO_TARGET_DIR"))
}

fn target_dir_in(workspace_root: &Path, configured: Option<OsString>) -> PathBuf {
    match configured {
        // Joining keeps an absolute directory as it is.
        Some(dir) if !dir.is_empty() => workspace_root.join(dir),
        _ => workspace_root.join("target"),
    }
}

/// Where axe-core's `axe.min.js` is read from: `QM_AXE_JS`, or `<target>/axe`.
pub fn axe_path() -> PathBuf {
    match configured_path() {
        Some(path) => path,
        None => default_prefix().join(AXE_SCRIPT_IN_PREFIX),
    }
}

fn configured_path() -> Option<PathBuf> {
    std::env::var_os("QM_AXE_JS")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
}

fn default_prefix() -> PathBuf {
    target_dir().join("axe")
}

/// Makes sure axe-core is on disk, fetching it when it is missing and may be fetched: the
/// first caller of the process does the work, every other one waits for its outcome. Blocking
/// (it may run npm): call it off the async runtime's threads. `Err` is the one line a test
/// that needs axe-core fails with.
pub fn ensure_axe() -> Result<PathBuf, String> {
    static FETCHED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FETCHED.get_or_init(locate_or_fetch).clone()
}

/// The script's source, for injection into a page; panics with the line [`ensure_axe`] gives.
pub fn axe_source() -> String {
    let path = ensure_axe().unwrap_or_else(|reason| panic!("{reason}"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read axe-core at {}: {error}", path.display()))
}

fn locate_or_fetch() -> Result<PathBuf, String> {
    if let Some(path) = configured_path() {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "axe-core not found at {} (QM_AXE_JS): point QM_AXE_JS at an axe.min.js, or unset \
                 it to have the tests fetch axe-core with npm",
                path.display()
            ))
        };
    }
    let prefix = default_prefix();
    let script = prefix.join(AXE_SCRIPT_IN_PREFIX);
    if script.is_file() {
        return Ok(script);
    }
    let command = install_command_line(&prefix);
    if !npm_available() {
        return Err(format!(
            "axe-core not found at {} and npm is not installed to fetch it: apt-get install npm \
             (then the tests run `{command}` themselves), or set QM_AXE_JS to an axe.min.js",
            script.display()
        ));
    }
    fetch_into(&prefix).map_err(|reason| {
        format!(
            "axe-core not found at {} and `{command}` failed: {reason}",
            script.display()
        )
    })?;
    let version = installed_version(&prefix).unwrap_or_else(|| "unknown version".to_owned());
    // Straight to stderr, past the test harness's capture: the one line says what was done.
    let _ = writeln!(
        std::io::stderr(),
        "qm-tests: axe-core was missing; fetched {version} with `{command}`"
    );
    Ok(script)
}

fn install_command_line(prefix: &Path) -> String {
    format!(
        "npm install --no-save --no-audit --no-fund --prefix {} {AXE_PACKAGE}",
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

/// Installs axe-core under a staging prefix beside `prefix`, then renames it to `prefix`. A
/// `prefix` that exists without the script (an interrupted install) is moved aside first.
fn fetch_into(prefix: &Path) -> Result<(), String> {
    let parent = prefix.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .map_err(|error| format!("create {}: {error}", parent.display()))?;
    let staging = parent.join(format!("axe.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|error| format!("create {}: {error}", staging.display()))?;
    let installed = run_npm_install(&staging);
    let placed = installed.and_then(|()| {
        if !staging.join(AXE_SCRIPT_IN_PREFIX).is_file() {
            return Err(format!("npm finished but left no {AXE_SCRIPT_IN_PREFIX}"));
        }
        move_into_place(&staging, prefix)
    });
    // Nothing is left behind: on success the rename consumed the staging directory (or another
    // process won the race and this copy is surplus), on failure it is half-written.
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
        .arg(AXE_PACKAGE)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("start npm: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    // npm's last lines carry the reason (registry unreachable, no such version): kept on the
    // failure's one line.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    Err(format!("npm exited with {}: {tail}", output.status))
}

/// Renames `staging` to `prefix`. Losing the race to another process that placed a complete
/// copy first is success.
fn move_into_place(staging: &Path, prefix: &Path) -> Result<(), String> {
    let complete = |dir: &Path| dir.join(AXE_SCRIPT_IN_PREFIX).is_file();
    if prefix.exists() && !complete(prefix) {
        let aside = prefix.with_file_name(format!("axe.stale-{}", std::process::id()));
        // Another process may move the same leftover first: then there is nothing to do.
        if std::fs::rename(prefix, &aside).is_ok() {
            let _ = std::fs::remove_dir_all(&aside);
        }
    }
    match std::fs::rename(staging, prefix) {
        Ok(()) => Ok(()),
        Err(_) if complete(prefix) => Ok(()),
        Err(error) => Err(format!(
            "move {} to {}: {error}",
            staging.display(),
            prefix.display()
        )),
    }
}

/// The `version` of the installed axe-core's package.json.
fn installed_version(prefix: &Path) -> Option<String> {
    let manifest = prefix.join("node_modules/axe-core/package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let package: serde_json::Value = serde_json::from_str(&text).ok()?;
    package["version"]
        .as_str()
        .map(|version| format!("axe-core {version}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, named for this test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("qm-axe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    /// An npm prefix holding an axe.min.js that reads `marker`.
    fn prefix_with_script(dir: &Path, marker: &str) -> PathBuf {
        let script = dir.join(AXE_SCRIPT_IN_PREFIX);
        std::fs::create_dir_all(script.parent().expect("the script has a folder"))
            .expect("create node_modules/axe-core");
        std::fs::write(&script, marker).expect("write the script");
        dir.to_path_buf()
    }

    fn script_text(prefix: &Path) -> String {
        std::fs::read_to_string(prefix.join(AXE_SCRIPT_IN_PREFIX)).unwrap_or_default()
    }

    #[test]
    fn a_fetched_copy_replaces_a_missing_or_half_written_one() {
        let root = scratch("replace");
        let prefix = root.join("axe");
        let staging = prefix_with_script(&root.join("first"), "first");
        move_into_place(&staging, &prefix).expect("placed where nothing was");
        assert_eq!(script_text(&prefix), "first");
        assert!(!staging.exists());

        // An interrupted install: the folder is there, the script is not.
        std::fs::remove_file(prefix.join(AXE_SCRIPT_IN_PREFIX)).expect("remove the script");
        let staging = prefix_with_script(&root.join("second"), "second");
        move_into_place(&staging, &prefix).expect("placed over the leftover");
        assert_eq!(script_text(&prefix), "second");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn losing_the_race_to_a_complete_copy_keeps_that_copy() {
        let root = scratch("race");
        let prefix = prefix_with_script(&root.join("axe"), "winner");
        let staging = prefix_with_script(&root.join("loser"), "loser");
        move_into_place(&staging, &prefix).expect("the winner's copy serves");
        assert_eq!(script_text(&prefix), "winner");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_target_dir_follows_cargo_target_dir_from_the_workspace_root() {
        let root = Path::new("/work/qm");
        assert_eq!(target_dir_in(root, None), root.join("target"));
        assert_eq!(target_dir_in(root, Some("".into())), root.join("target"));
        assert_eq!(
            target_dir_in(root, Some("/srv/build".into())),
            PathBuf::from("/srv/build")
        );
        assert_eq!(
            target_dir_in(root, Some("out/build".into())),
            root.join("out/build")
        );
    }
}
