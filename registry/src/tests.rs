//! The registry's promises: packaging is deterministic (two builds, the same bytes), the
//! embedded bytes are what packaging the sources gives and hash to the published digest, the
//! archives have the layout their installers expect, and a wrong manifest is refused by name.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::*;

fn connectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../connectors")
}

#[test]
fn two_builds_give_the_same_bytes_and_the_embedded_ones() {
    let first = package::package_all(&connectors_dir()).expect("connectors package");
    let second = package::package_all(&connectors_dir()).expect("connectors package");
    assert_eq!(first.len(), CONNECTORS.len());
    for ((one, two), embedded) in first.iter().zip(&second).zip(CONNECTORS) {
        assert_eq!(one.manifest.name, embedded.name);
        assert_eq!(
            one.bytes, two.bytes,
            "{}: two packagings differ",
            embedded.name
        );
        assert_eq!(
            one.bytes, embedded.bytes,
            "{}: the embedded artifact is stale",
            embedded.name
        );
        assert_eq!(one.sha256_hex(), embedded.sha256_hex);
        assert_eq!(one.manifest.version, embedded.version);
        assert_eq!(one.manifest.changelog.as_deref(), embedded.changelog);
        assert_eq!(one.manifest.requires.as_deref(), embedded.requires);
        assert_eq!(one.manifest.tested.as_deref(), embedded.tested);
        assert_eq!(one.manifest.requires_php.as_deref(), embedded.requires_php);
        assert_eq!(one.integrity(), embedded.integrity);
        assert_eq!(
            one.sources.len(),
            embedded.files.len() + 1,
            "the manifest and every listed file rerun the build"
        );
    }
}

#[test]
fn the_published_digest_is_the_served_bytes_digest() {
    for connector in all() {
        let digest = Sha256::digest(connector.bytes);
        assert_eq!(
            connector.sha256_hex,
            hex::encode(digest),
            "{}",
            connector.name
        );
        use base64::Engine as _;
        let integrity = format!(
            "sha256-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        );
        assert_eq!(connector.integrity, integrity, "{}", connector.name);
        assert!(!connector.bytes.is_empty(), "{}", connector.name);
    }
}

#[test]
fn archives_have_the_layout_their_installers_expect() {
    for connector in all() {
        match connector.artifact {
            ArtifactKind::Js => {
                assert_eq!(connector.files.len(), 1, "{}", connector.name);
            }
            ArtifactKind::Tgz => {
                let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(connector.bytes));
                let mut names = Vec::new();
                for entry in tar.entries().expect("a tar") {
                    let mut entry = entry.expect("an entry");
                    let header = entry.header();
                    assert_eq!(header.mtime().ok(), Some(package::FIXED_MTIME_EPOCH_SEC));
                    assert_eq!(header.mode().ok(), Some(0o644));
                    let name = entry.path().expect("a path").display().to_string();
                    let mut body = Vec::new();
                    entry.read_to_end(&mut body).expect("a body");
                    let source = connectors_dir()
                        .join(connector.name)
                        .join(name.trim_start_matches("package/"));
                    assert_eq!(std::fs::read(source).ok(), Some(body), "{name}");
                    names.push(name);
                }
                let expected: Vec<String> = connector
                    .files
                    .iter()
                    .map(|file| format!("package/{file}"))
                    .collect();
                assert_eq!(names, expected, "{}", connector.name);
            }
            ArtifactKind::Zip => {
                let archive =
                    zip::ZipArchive::new(std::io::Cursor::new(connector.bytes)).expect("a zip");
                let folder = package::archive_folder(connector.name);
                let names: Vec<&str> = archive.file_names().collect();
                assert!(names.contains(&format!("{folder}/").as_str()), "{names:?}");
                for file in connector.files {
                    assert!(
                        names.contains(&format!("{folder}/{file}").as_str()),
                        "{}: {file} not in {names:?}",
                        connector.name
                    );
                }
            }
        }
    }
    let wordpress = find("wordpress").expect("the wordpress connector");
    let archive = zip::ZipArchive::new(std::io::Cursor::new(wordpress.bytes)).expect("a zip");
    assert!(
        archive
            .file_names()
            .all(|name| name.starts_with("queue-manager/")),
        "a WordPress plugin unpacks into its slug's folder"
    );
}

#[test]
fn the_six_connectors_are_listed_by_name() {
    let names: Vec<&str> = all().iter().map(|connector| connector.name).collect();
    assert_eq!(
        names,
        ["gtm", "nginx", "node", "snippet", "wordpress", "worker"]
    );
    let snippet = find("snippet").expect("the snippet");
    assert_eq!(snippet.artifact, ArtifactKind::Js);
    assert_eq!(
        snippet.pinned_file_name(),
        format!("qm.{}.js", &snippet.sha256_hex[..16])
    );
    assert!(find("nosuch").is_none());
}

#[test]
fn versions_compare_by_semver_precedence() {
    let node = find("node").expect("the node connector");
    let latest = semver::Version::parse(node.version).expect("semver");
    assert_eq!(node.compare(node.version), Some(Ordering::Equal));
    assert_eq!(node.compare(&format!("v{latest}")), Some(Ordering::Equal));
    assert_eq!(
        node.compare(&format!("{latest}+build.7")),
        Some(Ordering::Equal),
        "build metadata does not order"
    );
    assert_eq!(
        node.compare(&format!("{latest}-rc.1")),
        Some(Ordering::Less),
        "a pre-release comes before its release"
    );
    let newer = format!("{}.0.0", latest.major + 1);
    assert_eq!(node.compare(&newer), Some(Ordering::Greater));
    assert_eq!(node.compare("1.x"), None);
}

#[test]
fn placeholders_are_filled_only_when_known() {
    let text = "curl {server}/api/verify?roomId={roomId}";
    assert_eq!(
        fill(text, Some("https://q.example/"), Some("sale")),
        "curl https://q.example/api/verify?roomId=sale"
    );
    assert_eq!(fill(text, Some(""), None), text);
    assert_eq!(
        fill(text, None, Some("sale")),
        "curl {server}/api/verify?roomId=sale"
    );
}

fn manifest(json: &str) -> package::Manifest {
    serde_json::from_str(json).expect("a manifest")
}

#[test]
fn a_wrong_manifest_is_refused_naming_what_to_fix() {
    let good = r#"{"name":"x","title":"X","version":"1.0.0","artifact":"js","entry":"x.js","files":["x.js"],"install":"i","upgrade":"u","verify":"v"}"#;
    assert_eq!(package::validate(&manifest(good), "x"), Ok(()));
    let cases = [
        (good, "y", "folder"),
        (&good.replace("1.0.0", "1.0"), "x", "semantic version"),
        (&good.replace("\"js\"", "\"rar\""), "x", "js, tgz or zip"),
        (&good.replace("\"entry\":\"x.js\",", ""), "x", "entry"),
        (
            &good.replace("[\"x.js\"]", "[\"../x.js\"]"),
            "x",
            "relative path",
        ),
        (
            &good.replace("[\"x.js\"]", "[\"x.js\",\"x.js\"]"),
            "x",
            "twice",
        ),
        (
            &good.replace("\"install\":\"i\"", "\"install\":\" \""),
            "x",
            "install",
        ),
    ];
    for (json, folder, says) in cases {
        let refusal = package::validate(&manifest(json), folder).expect_err(json);
        assert!(refusal.contains(says), "{refusal} should say {says}");
    }
    let missing = std::env::temp_dir().join(format!("qm-registry-missing-{}", std::process::id()));
    let folder = missing.join("x");
    std::fs::create_dir_all(&folder).expect("a temp folder");
    std::fs::write(folder.join("connector.json"), good).expect("a manifest");
    let refusal = package::package_one(&folder).expect_err("x.js does not exist");
    assert!(refusal.contains("listed file x.js"), "{refusal}");
    let _ = std::fs::remove_dir_all(&missing);
}
