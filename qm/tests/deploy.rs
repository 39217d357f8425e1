//! The deploy manifests in `deploy/`, checked by the tools that read them and against the binary
//! they run:
//! - the systemd units pass `systemd-analyze verify` (warnings included) in a root holding the
//!   built `qm` where the units expect it;
//! - the Kubernetes manifests pass `kubernetes-validate --strict` (PyPI) and have what the
//!   deployment relies on: readiness and liveness on each process, resources, the admin Service
//!   not exposed, a disruption budget for the gateways and the engines;
//! - `deploy/compose.yaml`, resolved by `docker-compose config`, runs every service with a health
//!   check, the qm services with the env file, the edges after a healthy engine.
//!
//! Every `qm` command line the manifests hold (a container's arguments, a health check) is run
//! with `--help` against the built binary, so a manifest cannot name a subcommand that does not
//! exist.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("qm/ sits in the repository")
        .to_path_buf()
}

fn deploy() -> PathBuf {
    repo().join("deploy")
}

/// Runs a tool the check needs; a missing tool fails the test and says how to install it.
fn run(command: &mut Command, install: &str) -> Output {
    let program = command.get_program().to_string_lossy().into_owned();
    match command.output() {
        Ok(output) => output,
        Err(error) => panic!("{program} could not run ({error}); install it: {install}"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The arguments a manifest passes to `qm` are a command the binary knows.
fn assert_qm_accepts(args: &[String], source: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_qm"))
        .args(args)
        .arg("--help")
        .output()
        .expect("the qm binary runs");
    assert!(
        output.status.success(),
        "{source}: `qm {}` is not a qm command: {}",
        args.join(" "),
        text(&output.stderr)
    );
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a list of strings: {value}"))
        .iter()
        .map(|item| item.as_str().expect("a string").to_owned())
        .collect()
}

#[test]
fn the_systemd_units_verify() {
    let root = std::env::temp_dir().join(format!("qm-deploy-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let units = root.join("etc/systemd/system");
    std::fs::create_dir_all(&units).expect("a unit directory");
    std::fs::create_dir_all(root.join("usr/local/bin")).expect("a bin directory");
    std::fs::copy(env!("CARGO_BIN_EXE_qm"), root.join("usr/local/bin/qm"))
        .expect("the binary where the units run it");
    // The units name the host's own targets (network-online.target, multi-user.target).
    let system = Path::new("/usr/lib/systemd/system");
    assert!(
        system.is_dir(),
        "no {} on this machine: install systemd (apt-get install systemd)",
        system.display()
    );
    std::fs::create_dir_all(root.join("usr/lib/systemd")).expect("usr/lib/systemd");
    run(
        Command::new("cp")
            .arg("-r")
            .arg(system)
            .arg(root.join("usr/lib/systemd")),
        "coreutils",
    );
    let names = [
        "qm-engine.service",
        "qm-gateway.service",
        "qm-admin.service",
    ];
    for name in names {
        std::fs::copy(deploy().join(name), units.join(name)).expect("the unit is in deploy/");
    }
    let output = run(
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", root.display()))
            .args(names),
        "apt-get install systemd",
    );
    let _ = std::fs::remove_dir_all(&root);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

/// Every document of every file in deploy/k8s, as JSON values.
fn kubernetes_documents() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy().join("k8s"))
        .expect("deploy/k8s")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a readable manifest");
        for document in serde_yaml_ng::Deserializer::from_str(&source) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            documents.push((file.display().to_string(), value));
        }
    }
    documents
}

#[test]
fn the_kubernetes_manifests_validate() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy().join("k8s"))
        .expect("deploy/k8s")
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    files.sort();
    // 1.27: the oldest release with gRPC probes, which the engine's probes are.
    for version in ["1.27.0", "1.37.0"] {
        let output = run(
            Command::new("kubernetes-validate")
                .args(["--strict", "--kubernetes-version", version])
                .args(&files),
            "pip install kubernetes-validate",
        );
        assert!(
            output.status.success(),
            "kubernetes-validate {version}: {}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }

    let documents = kubernetes_documents();
    let of_kind = |kind: &str| -> Vec<&Value> {
        documents
            .iter()
            .filter(|(_, doc)| doc["kind"] == kind)
            .map(|(_, doc)| doc)
            .collect()
    };
    let component = |doc: &Value| -> String {
        let label = &doc["metadata"]["labels"]["app.kubernetes.io/component"];
        label.as_str().unwrap_or_default().to_owned()
    };

    let deployments = of_kind("Deployment");
    let names: Vec<String> = deployments.iter().map(|doc| component(doc)).collect();
    for wanted in ["engine", "gateway", "admin"] {
        assert!(
            names.iter().any(|name| name == wanted),
            "a {wanted} Deployment"
        );
    }
    for deployment in &deployments {
        let which = component(deployment);
        let template = &deployment["spec"]["template"];
        assert_eq!(
            deployment["spec"]["selector"]["matchLabels"], template["metadata"]["labels"],
            "{which}: the selector picks the template's pods"
        );
        let container = &template["spec"]["containers"][0];
        assert_qm_accepts(&strings(&container["args"]), &format!("{which} args"));
        for probe in ["readinessProbe", "livenessProbe"] {
            assert!(container[probe].is_object(), "{which}: a {probe}");
        }
        for bound in ["requests", "limits"] {
            assert!(
                container["resources"][bound]["memory"].is_string(),
                "{which}: resources.{bound}.memory"
            );
        }
        assert!(
            container["resources"]["requests"]["cpu"].is_string(),
            "{which}: resources.requests.cpu"
        );
        assert!(
            template["spec"]["terminationGracePeriodSeconds"]
                .as_u64()
                .is_some_and(|grace| grace > 10),
            "{which}: longer than the default 10 s drain"
        );
        if which != "engine" {
            assert_eq!(
                container["readinessProbe"]["httpGet"]["path"], "/healthz",
                "{which}: ready on /healthz"
            );
        } else {
            assert_eq!(container["readinessProbe"]["grpc"]["port"], 50051);
        }
    }

    let services = of_kind("Service");
    for service in &services {
        let which = component(service);
        assert!(
            deployments.iter().any(|deployment| {
                deployment["spec"]["template"]["metadata"]["labels"] == service["spec"]["selector"]
            }),
            "the {which} Service selects a Deployment's pods"
        );
    }
    let admin = services
        .iter()
        .find(|service| component(service) == "admin")
        .expect("an admin Service");
    assert_eq!(
        admin["spec"]["type"], "ClusterIP",
        "the operator API is never exposed"
    );

    let budgets: Vec<Value> = of_kind("PodDisruptionBudget")
        .iter()
        .map(|doc| doc["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"].clone())
        .collect();
    for wanted in ["engine", "gateway"] {
        assert!(
            budgets.contains(&Value::from(wanted)),
            "a disruption budget for the {wanted}"
        );
    }
}

#[test]
fn the_compose_file_runs_every_service_with_a_health_check() {
    // `docker-compose config` resolves the file as compose would: the env file must exist and
    // the journal's password be set.
    let project = std::env::temp_dir().join(format!("qm-deploy-compose-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(&project).expect("a project directory");
    for file in ["compose.yaml", "valkey.conf", "Dockerfile"] {
        std::fs::copy(deploy().join(file), project.join(file)).expect("the file is in deploy/");
    }
    std::fs::copy(deploy().join("qm.env.example"), project.join("qm.env"))
        .expect("the env example");
    let resolve = |password: Option<&str>| {
        let mut command = Command::new("docker-compose");
        command
            .current_dir(&project)
            .args(["-f", "compose.yaml", "config"]);
        command.env_remove("POSTGRES_PASSWORD");
        if let Some(password) = password {
            command.env("POSTGRES_PASSWORD", password);
        }
        run(&mut command, "apt-get install docker-compose")
    };
    let unset = resolve(None);
    assert!(
        !unset.status.success() && text(&unset.stderr).contains("POSTGRES_PASSWORD"),
        "compose refuses to start without the journal's password: {}",
        text(&unset.stderr)
    );
    let output = resolve(Some("compose-test-password"));
    let _ = std::fs::remove_dir_all(&project);
    assert!(
        output.status.success(),
        "docker-compose config: {}",
        text(&output.stderr)
    );
    let resolved: Value =
        serde_yaml_ng::from_slice(&output.stdout).expect("docker-compose config prints YAML");
    let services = &resolved["services"];

    for service in ["valkey", "postgres", "engine", "gateway", "admin"] {
        let test = &services[service]["healthcheck"]["test"];
        assert!(test.is_array(), "{service}: a health check");
    }
    for service in ["engine", "gateway", "admin"] {
        let definition = &services[service];
        let environment = &definition["environment"];
        assert!(
            environment["SECRET"].is_string() && environment["ADMIN_KEY"].is_string(),
            "{service}: the env file's settings"
        );
        assert_qm_accepts(&strings(&definition["command"]), service);
        let check = strings(&definition["healthcheck"]["test"]);
        assert_eq!(
            check[..2],
            ["CMD", "qm"],
            "{service}: the image's own check"
        );
        assert_qm_accepts(&check[2..], &format!("{service} healthcheck"));
    }
    assert_eq!(
        services["engine"]["environment"]["ENGINE_ADDR"],
        "0.0.0.0:50051"
    );
    assert_eq!(
        services["engine"]["environment"]["DATABASE_URL"],
        "postgres://qm:compose-test-password@postgres:5432/qm"
    );
    for edge in ["gateway", "admin"] {
        assert_eq!(
            services[edge]["environment"]["ENGINE_CONNECT"], "engine:50051",
            "{edge} reaches the engine by its service name"
        );
        assert_eq!(
            services[edge]["depends_on"]["engine"]["condition"], "service_healthy",
            "{edge} starts after a healthy engine"
        );
    }
    for store in ["valkey", "postgres"] {
        assert_eq!(
            services["engine"]["depends_on"][store]["condition"],
            "service_healthy"
        );
    }
    let published: Vec<String> = services["admin"]["ports"]
        .as_array()
        .expect("the admin port is published")
        .iter()
        .map(|port| port.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        published.iter().all(|port| port.starts_with("127.0.0.1:")),
        "the operator API is published on loopback only: {published:?}"
    );
}
