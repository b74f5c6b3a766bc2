//! The deployment files parse and say what the README promises: a sidecar
//! that reads the database read-only, Kafka in KRaft mode, MinIO with an
//! Object Lock anchor bucket under a separate account, a nightly verify,
//! and an image that runs as a non-root user. (No Docker engine or
//! compose plugin exists on these machines, so the files are parsed here.)

use crate::common;

use yaml_rust2::{Yaml, YamlLoader};

fn compose() -> Yaml {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docker-compose.yml")).unwrap();
    YamlLoader::load_from_str(&text)
        .expect("docker-compose.yml is valid YAML")
        .remove(0)
}

fn strings(y: &Yaml) -> Vec<String> {
    y.as_vec()
        .map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn compose_file_describes_the_deployment() {
    let doc = compose();
    let services = &doc["services"];
    for name in [
        "writer",
        "follower",
        "kafka",
        "minio",
        "minio-setup",
        "verify",
        "keygen",
    ] {
        assert!(!services[name].is_badvalue(), "service {name} missing");
    }
    let follower = &services["follower"];
    let volumes = strings(&follower["volumes"]);
    assert!(
        volumes.contains(&"audit-db:/data:ro".to_owned()),
        "the follower mounts the database read-only: {volumes:?}"
    );
    assert!(
        strings(&services["writer"]["volumes"]).contains(&"audit-db:/data".to_owned()),
        "the writer shares the volume"
    );
    assert!(
        !strings(&services["writer"]["volumes"])
            .iter()
            .any(|v| v.starts_with("keys:")),
        "the writer never sees the signing key"
    );
    assert_eq!(
        services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"].as_str(),
        Some("broker,controller"),
        "KRaft"
    );
    let setup = strings(&services["minio-setup"]["command"]).join(" ");
    assert!(
        setup.contains("--with-lock local/anchors") && setup.contains("mc admin user add local anchor-writer"),
        "{setup}"
    );
    assert_eq!(strings(&services["verify"]["profiles"]), vec!["nightly"]);
    // The healthcheck asks the follower's /healthz; it never runs anything that touches the sink.
    let health = services["follower"]["healthcheck"]["test"]
        .as_vec()
        .expect("a healthcheck test list")
        .iter()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(health.contains("http://127.0.0.1:9464/healthz"), "{health}");
    assert!(!health.contains("chainship"), "{health}");
    assert!(
        strings(&services["verify"]["command"])
            .join(" ")
            .contains("chainship anchor verify")
    );
    for name in ["audit-db", "follower-state", "keys"] {
        assert!(
            doc["volumes"]
                .as_hash()
                .unwrap()
                .contains_key(&Yaml::String(name.into())),
            "volume {name}"
        );
    }
}

#[test]
fn the_follower_config_file_is_accepted_by_chainship() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/chainship.toml");
    let out = common::run(&["config", "check", "--config", config]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(common::stdout(&out).contains("sink = kafka://kafka:9092/agentrt.audit"));
}

#[test]
fn dockerfile_is_multi_stage_and_non_root() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile")).unwrap();
    let froms = text.lines().filter(|l| l.starts_with("FROM ")).count();
    assert_eq!(froms, 2, "build stage and runtime stage");
    let user = text.lines().rfind(|l| l.starts_with("USER ")).expect("a USER line");
    assert_ne!(user.trim(), "USER root");
    assert!(text.contains("cargo build --release --locked"));
}
