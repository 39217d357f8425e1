//! Packaging, shared by `build.rs` (which embeds the result) and the unit tests (which prove it
//! deterministic): read and validate every `connectors/<name>/connector.json`, and turn each
//! connector's `files` into the exact bytes served as its artifact. Everything that could vary
//! between two builds is fixed: entries sorted, one timestamp, one mode, no owner, a fixed
//! compression level and an empty gzip header.

use std::io::{Cursor, Write as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The timestamp of every packaged file: the one `npm pack` writes (1985-10-26 08:15:00 UTC),
/// so a tgz looks like any npm tarball and a zip's DOS date (which cannot go before 1980) agrees.
pub(crate) const FIXED_MTIME_EPOCH_SEC: u64 = 499_162_500;
/// The folder a WordPress plugin must unpack into: its slug.
pub(crate) const WORDPRESS_FOLDER: &str = "queue-manager";

/// `connectors/<name>/connector.json` as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Manifest {
    pub(crate) name: String,
    pub(crate) title: String,
    pub(crate) version: String,
    pub(crate) artifact: String,
    #[serde(default)]
    pub(crate) entry: Option<String>,
    pub(crate) files: Vec<String>,
    pub(crate) install: String,
    pub(crate) upgrade: String,
    pub(crate) verify: String,
    /// Optional: what changed in this version (the WordPress updater shows it).
    #[serde(default)]
    pub(crate) changelog: Option<String>,
    /// Optional, WordPress only: the lowest WordPress the plugin runs on.
    #[serde(default)]
    pub(crate) requires: Option<String>,
    /// Optional, WordPress only: the newest WordPress it was tested with.
    #[serde(default)]
    pub(crate) tested: Option<String>,
    /// Optional, WordPress only: the lowest PHP it runs on.
    #[serde(default)]
    pub(crate) requires_php: Option<String>,
}

/// One connector, validated and packaged.
#[derive(Debug)]
pub(crate) struct Packaged {
    pub(crate) manifest: Manifest,
    /// Every file the artifact was made from, for `rerun-if-changed`.
    pub(crate) sources: Vec<PathBuf>,
    pub(crate) bytes: Vec<u8>,
}

impl Packaged {
    pub(crate) fn sha256_hex(&self) -> String {
        hex::encode(Sha256::digest(&self.bytes))
    }

    /// Subresource Integrity: `sha256-<base64 of the digest>`.
    pub(crate) fn integrity(&self) -> String {
        let digest = Sha256::digest(&self.bytes);
        format!(
            "sha256-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    }
}

/// Every connector under `root` (one folder each), sorted by name.
pub(crate) fn package_all(root: &Path) -> Result<Vec<Packaged>, String> {
    let listing = std::fs::read_dir(root)
        .map_err(|error| format!("cannot list {}: {error}", root.display()))?;
    let mut folders: Vec<PathBuf> = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|error| format!("cannot list {}: {error}", root.display()))?;
        if entry.path().is_dir() {
            folders.push(entry.path());
        }
    }
    folders.sort();
    folders.iter().map(|folder| package_one(folder)).collect()
}

/// One connector folder: its manifest read and checked, its artifact built.
pub(crate) fn package_one(folder: &Path) -> Result<Packaged, String> {
    let manifest_path = folder.join("connector.json");
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|error| format!("cannot read {}: {error}", manifest_path.display()))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|error| {
        format!(
            "{} is not a valid manifest: {error}",
            manifest_path.display()
        )
    })?;
    let folder_name = folder
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    validate(&manifest, folder_name)
        .map_err(|why| format!("{}: {why}", manifest_path.display()))?;

    let mut files = manifest.files.clone();
    files.sort();
    let mut contents = Vec::with_capacity(files.len());
    let mut sources = vec![manifest_path.clone()];
    for file in &files {
        let path = folder.join(file);
        let bytes = std::fs::read(&path).map_err(|error| {
            format!(
                "{}: listed file {file} cannot be read ({}: {error})",
                manifest_path.display(),
                path.display()
            )
        })?;
        sources.push(path);
        contents.push((file.clone(), bytes));
    }
    let bytes = match manifest.artifact.as_str() {
        "js" => {
            let entry = manifest.entry.as_deref().unwrap_or_default();
            contents
                .iter()
                .find(|(name, _)| name == entry)
                .map(|(_, bytes)| bytes.clone())
                .unwrap_or_default()
        }
        "tgz" => tgz(&contents)?,
        _ => zip(&archive_folder(&manifest.name), &contents)?,
    };
    Ok(Packaged {
        manifest,
        sources,
        bytes,
    })
}

/// The top folder of a connector's zip: WordPress wants its plugin slug, others their name.
pub(crate) fn archive_folder(name: &str) -> String {
    match name {
        "wordpress" => WORDPRESS_FOLDER.to_owned(),
        other => other.to_owned(),
    }
}

/// Everything a manifest must get right, each refusal saying what to change.
pub(crate) fn validate(manifest: &Manifest, folder_name: &str) -> Result<(), String> {
    if manifest.name != folder_name {
        return Err(format!(
            "name {:?} must equal its folder's name {folder_name:?}",
            manifest.name
        ));
    }
    let plain_name = !manifest.name.is_empty()
        && manifest.name.len() <= 32
        && manifest
            .name
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if !plain_name {
        return Err(format!(
            "name {:?} must be 1 to 32 of a-z, 0-9 and -",
            manifest.name
        ));
    }
    if let Err(error) = semver::Version::parse(&manifest.version) {
        return Err(format!(
            "version {:?} is not a semantic version like 1.2.3 ({error})",
            manifest.version
        ));
    }
    for (field, value) in [
        ("title", &manifest.title),
        ("install", &manifest.install),
        ("upgrade", &manifest.upgrade),
        ("verify", &manifest.verify),
    ] {
        if value.trim().is_empty() {
            return Err(format!("{field} must not be empty"));
        }
    }
    if manifest.files.is_empty() {
        return Err("files must list at least one file".to_owned());
    }
    for (index, file) in manifest.files.iter().enumerate() {
        let plain = !file.is_empty()
            && !file.starts_with('/')
            && !file.contains('\\')
            && file
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..");
        if !plain {
            return Err(format!(
                "files[{index}] {file:?} must be a relative path inside the connector's folder"
            ));
        }
        if manifest.files[..index].contains(file) {
            return Err(format!("files lists {file:?} twice"));
        }
    }
    match manifest.artifact.as_str() {
        "js" => match &manifest.entry {
            Some(entry) if manifest.files.contains(entry) => Ok(()),
            Some(entry) => Err(format!("entry {entry:?} must be one of files")),
            None => Err("a js artifact names its file in entry".to_owned()),
        },
        "tgz" | "zip" => Ok(()),
        other => Err(format!("artifact {other:?} must be js, tgz or zip")),
    }
}

/// A gzip'd tar in `npm pack`'s layout: every file under `package/`.
pub(crate) fn tgz(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut header = tar::Header::new_ustar();
        header
            .set_path(format!("package/{name}"))
            .map_err(|error| format!("{name}: {error}"))?;
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(FIXED_MTIME_EPOCH_SEC);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.append(&header, bytes.as_slice())
            .map_err(|error| format!("{name}: {error}"))?;
    }
    let tar = tar.into_inner().map_err(|error| error.to_string())?;
    // GzBuilder's header carries no name and a zero mtime: nothing of the build machine.
    let mut gzip = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::best());
    gzip.write_all(&tar).map_err(|error| error.to_string())?;
    gzip.finish().map_err(|error| error.to_string())
}

/// A zip with every file under `folder/` (a directory entry first).
pub(crate) fn zip(folder: &str, files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    use zip::write::SimpleFileOptions;
    let date = zip::DateTime::from_date_and_time(1985, 10, 26, 8, 15, 0)
        .map_err(|error| error.to_string())?;
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9))
        .last_modified_time(date);
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let mut folders = vec![format!("{folder}/")];
    for (name, _) in files {
        // Subfolders get their own entries, parents first, as a zip tool writes them.
        let mut prefix = format!("{folder}/");
        let parts: Vec<&str> = name.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            prefix.push_str(part);
            prefix.push('/');
            if !folders.contains(&prefix) {
                folders.push(prefix.clone());
            }
        }
    }
    folders.sort();
    for directory in &folders {
        writer
            .add_directory(directory.as_str(), options.unix_permissions(0o755))
            .map_err(|error| format!("{directory}: {error}"))?;
    }
    for (name, bytes) in files {
        writer
            .start_file(format!("{folder}/{name}"), options.unix_permissions(0o644))
            .map_err(|error| format!("{name}: {error}"))?;
        writer
            .write_all(bytes)
            .map_err(|error| format!("{name}: {error}"))?;
    }
    let cursor = writer.finish().map_err(|error| error.to_string())?;
    Ok(cursor.into_inner())
}
