//! What the tests take from the npm registry when it is missing — axe-core for the browser
//! tests, workerd and Express for the connector tests — into the git-ignored target directory,
//! so `cargo test --workspace` passes on a fresh checkout without a setup step. Each names an
//! environment variable that points at a copy elsewhere instead (nothing is fetched then).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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

/// A runtime (or library) the tests take from the npm registry into `<target>/<dir_name>`
/// when it is missing (axe-core, workerd, Express): npm installs into a staging
/// directory of this process that is then renamed into place in one step, so two test
/// binaries fetching at once never see (nor leave) a half-written copy, and the one that loses
/// the race uses the winner's. `override_var` names a path to use instead; a path it names that
/// does not exist is never replaced by a download.
pub struct NpmRuntime<'a> {
    /// What the one-line messages call it.
    pub what: &'a str,
    pub override_var: &'a str,
    pub dir_name: &'a str,
    /// What `npm install` is given, e.g. `workerd@1.20261123.1`.
    pub package: &'a str,
    /// Paths inside the prefix, in order of preference: the first present is the answer.
    pub wanted: &'a [&'a str],
}

impl NpmRuntime<'_> {
    /// The wanted path, fetched first when missing and npm is on the PATH. Blocking (it may
    /// run npm): call it off the async runtime's threads. `Err` is the one line a test that
    /// needs it fails with.
    pub fn locate_or_fetch(&self) -> Result<PathBuf, String> {
        let what = self.what;
        let var = self.override_var;
        if let Some(path) = std::env::var_os(var).filter(|path| !path.is_empty()) {
            let path = PathBuf::from(path);
            return if path.exists() {
                Ok(path)
            } else {
                Err(format!(
                    "{what} not found at {} ({var}): point {var} at it, or unset it to have the \
                     tests fetch it with npm",
                    path.display()
                ))
            };
        }
        let prefix = target_dir().join(self.dir_name);
        if let Some(found) = self.found_in(&prefix) {
            return Ok(found);
        }
        let command = format!(
            "npm install --no-save --no-audit --no-fund --prefix {} {}",
            prefix.display(),
            self.package
        );
        if !npm_available() {
            return Err(format!(
                "{what} not found under {} and npm is not installed to fetch it: apt-get install \
                 npm (then the tests run `{command}` themselves), or set {var}",
                prefix.display()
            ));
        }
        self.fetch_into(&prefix).map_err(|reason| {
            format!(
                "{what} not found under {} and `{command}` failed: {reason}",
                prefix.display()
            )
        })?;
        let found = self
            .found_in(&prefix)
            .ok_or_else(|| format!("`{command}` finished but left no {what}"))?;
        // Straight to stderr, past the test harness's capture: the one line says what was done.
        let _ = writeln!(
            std::io::stderr(),
            "qm-tests: {what} was missing; fetched {} with `{command}`",
            self.package
        );
        Ok(found)
    }

    fn found_in(&self, prefix: &Path) -> Option<PathBuf> {
        self.wanted
            .iter()
            .map(|relative| prefix.join(relative))
            .find(|path| path.exists())
    }

    /// Installs under a staging prefix beside `prefix`, then renames it to `prefix` (a
    /// leftover `prefix` without the wanted files, from an interrupted install, is moved aside
    /// first; losing the race to another process's complete copy is success).
    fn fetch_into(&self, prefix: &Path) -> Result<(), String> {
        let parent = prefix.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("create {}: {error}", parent.display()))?;
        let pid = std::process::id();
        let staging = parent.join(format!("{}.partial-{pid}", self.dir_name));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|error| format!("create {}: {error}", staging.display()))?;
        let placed = self.run_npm_install(&staging).and_then(|()| {
            if self.found_in(&staging).is_none() {
                return Err(format!("npm finished but left no {}", self.what));
            }
            self.move_into_place(&staging, prefix)
        });
        // Nothing is left behind: on success the rename consumed the staging directory (or
        // another process won the race and this copy is surplus), on failure it is half-written.
        let _ = std::fs::remove_dir_all(&staging);
        placed
    }

    /// Renames `staging` to `prefix`; a leftover `prefix` without the wanted files, from an
    /// interrupted install, is moved aside first. Losing the race to another process that placed
    /// a complete copy first is success.
    fn move_into_place(&self, staging: &Path, prefix: &Path) -> Result<(), String> {
        if prefix.exists() && self.found_in(prefix).is_none() {
            let aside =
                prefix.with_file_name(format!("{}.stale-{}", self.dir_name, std::process::id()));
            // Another process may move the same leftover first: then there is nothing to do.
            if std::fs::rename(prefix, &aside).is_ok() {
                let _ = std::fs::remove_dir_all(&aside);
            }
        }
        match std::fs::rename(staging, prefix) {
            Ok(()) => Ok(()),
            Err(_) if self.found_in(prefix).is_some() => Ok(()),
            Err(error) => Err(format!(
                "move {} to {}: {error}",
                staging.display(),
                prefix.display()
            )),
        }
    }

    fn run_npm_install(&self, staging: &Path) -> Result<(), String> {
        let output = Command::new("npm")
            .args([
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(staging)
            .arg(self.package)
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

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: NpmRuntime<'static> = NpmRuntime {
        what: "the fixture",
        override_var: "QM_NPM_FIXTURE_UNSET",
        dir_name: "fixture",
        package: "fixture@1",
        wanted: &["node_modules/fixture/index.js"],
    };

    /// A fresh directory under the system temp dir, named for this test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("qm-npm-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        dir
    }

    /// An npm prefix holding the fixture's file, reading `marker`.
    fn prefix_with_file(dir: &Path, marker: &str) -> PathBuf {
        let file = dir.join(FIXTURE.wanted[0]);
        std::fs::create_dir_all(file.parent().expect("the file has a folder"))
            .expect("create node_modules/fixture");
        std::fs::write(&file, marker).expect("write the file");
        dir.to_path_buf()
    }

    fn file_text(prefix: &Path) -> String {
        std::fs::read_to_string(prefix.join(FIXTURE.wanted[0])).unwrap_or_default()
    }

    #[test]
    fn a_fetched_copy_replaces_a_missing_or_half_written_one() {
        let root = scratch("replace");
        let prefix = root.join("fixture");
        let staging = prefix_with_file(&root.join("first"), "first");
        FIXTURE
            .move_into_place(&staging, &prefix)
            .expect("placed where nothing was");
        assert_eq!(file_text(&prefix), "first");
        assert!(!staging.exists());

        // An interrupted install: the folder is there, the file is not.
        std::fs::remove_file(prefix.join(FIXTURE.wanted[0])).expect("remove the file");
        let staging = prefix_with_file(&root.join("second"), "second");
        FIXTURE
            .move_into_place(&staging, &prefix)
            .expect("placed over the leftover");
        assert_eq!(file_text(&prefix), "second");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn losing_the_race_to_a_complete_copy_keeps_that_copy() {
        let root = scratch("race");
        let prefix = prefix_with_file(&root.join("fixture"), "winner");
        let staging = prefix_with_file(&root.join("loser"), "loser");
        FIXTURE
            .move_into_place(&staging, &prefix)
            .expect("the winner's copy serves");
        assert_eq!(file_text(&prefix), "winner");
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
