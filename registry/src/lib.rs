//! The connector registry: every connector this server ships (`connectors/<name>/` at the top of
//! the repository), packaged at build time into the artifact the gateway serves, with the
//! SHA-256 computed from those exact bytes. It is static: the answer of `/api/connectors`, the
//! served `/connectors/<name>/latest.*` and `/snippet/*`, and the `connector_version` install
//! check all read this one table, so they cannot disagree.

use std::cmp::Ordering;

#[cfg(test)]
#[path = "package.rs"]
mod package;
#[cfg(test)]
mod tests;

include!(concat!(env!("OUT_DIR"), "/registry.rs"));

/// How a connector is shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactKind {
    /// The entry file as it is (a script).
    Js,
    /// A gzip'd tar in `npm pack`'s layout (`package/<file>`).
    Tgz,
    /// A zip with one top folder (`queue-manager/` for WordPress, else the connector's name).
    Zip,
}

impl ArtifactKind {
    /// The extension of `latest.<ext>`.
    pub fn extension(self) -> &'static str {
        match self {
            ArtifactKind::Js => "js",
            ArtifactKind::Tgz => "tgz",
            ArtifactKind::Zip => "zip",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            ArtifactKind::Js => "application/javascript; charset=utf-8",
            ArtifactKind::Tgz => "application/gzip",
            ArtifactKind::Zip => "application/zip",
        }
    }
}

/// One connector: its manifest and its packaged artifact.
#[derive(Debug)]
pub struct Connector {
    pub name: &'static str,
    pub title: &'static str,
    /// A semantic version (checked at build time).
    pub version: &'static str,
    pub artifact: ArtifactKind,
    /// The files the artifact was made from, sorted.
    pub files: &'static [&'static str],
    /// The served artifact, byte for byte.
    pub bytes: &'static [u8],
    /// SHA-256 of `bytes`, lowercase hex.
    pub sha256_hex: &'static str,
    /// Subresource Integrity of `bytes`: `sha256-<base64>`.
    pub integrity: &'static str,
    /// Human-readable steps; `{server}` and `{roomId}` are placeholders ([`fill`]).
    pub install: &'static str,
    pub upgrade: &'static str,
    pub verify: &'static str,
    /// What changed in this version, when the manifest says.
    pub changelog: Option<&'static str>,
    /// WordPress only, when the manifest says: lowest WordPress, tested WordPress, lowest PHP.
    pub requires: Option<&'static str>,
    pub tested: Option<&'static str>,
    pub requires_php: Option<&'static str>,
}

impl Connector {
    /// `/connectors/<name>/latest.<ext>`.
    pub fn download_path(&self) -> String {
        format!(
            "/connectors/{}/latest.{}",
            self.name,
            self.artifact.extension()
        )
    }

    /// The name a downloaded archive is saved under: `<folder>-<version>.<ext>`.
    pub fn download_file_name(&self) -> String {
        let stem = match self.name {
            "wordpress" => "queue-manager",
            other => other,
        };
        format!("{stem}-{}.{}", self.version, self.artifact.extension())
    }

    /// The content-addressed name of a script: `qm.<first 16 hex of its SHA-256>.js`.
    pub fn pinned_file_name(&self) -> String {
        let short = self.sha256_hex.get(..16).unwrap_or(self.sha256_hex);
        format!("qm.{short}.js")
    }

    /// How `version` compares with this connector's: `None` when it is not a semantic version.
    pub fn compare(&self, version: &str) -> Option<Ordering> {
        let latest = semver::Version::parse(self.version).ok()?;
        let other = semver::Version::parse(version.strip_prefix('v').unwrap_or(version)).ok()?;
        // Build metadata (`+...`) names a build, not a release: it never orders two versions.
        Some(other.cmp_precedence(&latest))
    }
}

/// Every connector, sorted by name.
pub fn all() -> &'static [Connector] {
    CONNECTORS
}

/// The connector named `name`.
pub fn find(name: &str) -> Option<&'static Connector> {
    CONNECTORS.iter().find(|connector| connector.name == name)
}

/// `text` with `{server}` replaced by the server's public base URL and `{roomId}` by the room,
/// each only when known: an unknown one stays a placeholder for the reader to fill.
pub fn fill(text: &str, server: Option<&str>, room_id: Option<&str>) -> String {
    let mut filled = text.to_owned();
    if let Some(server) = server.filter(|server| !server.is_empty()) {
        filled = filled.replace("{server}", server.trim_end_matches('/'));
    }
    if let Some(room_id) = room_id.filter(|room_id| !room_id.is_empty()) {
        filled = filled.replace("{roomId}", room_id);
    }
    filled
}
