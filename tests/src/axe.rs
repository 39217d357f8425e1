//! axe-core for the browser tests' accessibility check ([`crate::browser::Browser::axe`]).
//!
//! The script is `QM_AXE_JS` when set, else `<target>/axe/node_modules/axe-core/axe.min.js`
//! (`<target>` being `CARGO_TARGET_DIR` or the workspace's `target/`). When that file is missing
//! and npm is on the PATH, the harness fetches it itself, once per test binary, with
//! `npm install --no-save --no-audit --no-fund --prefix <target>/axe axe-core@4`
//! ([`crate::npm`]), so `cargo test --workspace` passes on a fresh checkout without a setup
//! step. A `QM_AXE_JS` that names a missing file is never replaced by a download: the test fails
//! and says so.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::npm::NpmRuntime;
pub use crate::npm::target_dir;

/// axe-core as the tests take it: the version range `.ci/run` and the README name.
const AXE: NpmRuntime<'static> = NpmRuntime {
    what: "axe-core",
    override_var: "QM_AXE_JS",
    dir_name: "axe",
    package: "axe-core@4",
    wanted: &["node_modules/axe-core/axe.min.js"],
};

/// Where axe-core's `axe.min.js` is read from: `QM_AXE_JS`, or `<target>/axe`.
pub fn axe_path() -> PathBuf {
    std::env::var_os(AXE.override_var)
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join(AXE.dir_name).join(AXE.wanted[0]))
}

/// Makes sure axe-core is on disk, fetching it when it is missing and may be fetched: the
/// first caller of the process does the work, every other one waits for its outcome. Blocking
/// (it may run npm): call it off the async runtime's threads. `Err` is the one line a test
/// that needs axe-core fails with.
pub fn ensure_axe() -> Result<PathBuf, String> {
    static FETCHED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FETCHED.get_or_init(|| AXE.locate_or_fetch()).clone()
}

/// The script's source, for injection into a page; panics with the line [`ensure_axe`] gives.
pub fn axe_source() -> String {
    let path = ensure_axe().unwrap_or_else(|reason| panic!("{reason}"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read axe-core at {}: {error}", path.display()))
}
