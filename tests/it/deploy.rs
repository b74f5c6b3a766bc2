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
    // The healthcheck asks the follower's readiness; it never runs anything that touches the sink.
    let health = services["follower"]["healthcheck"]["test"]
        .as_vec()
        .expect("a healthcheck test list")
        .iter()
        .filter_map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(health.contains("http://127.0.0.1:9464/readyz"), "{health}");
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

/// A validator the test script installs; panics, loudly, when it is missing.
fn tool(name: &str) -> std::process::Command {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{name} is not installed: these tests need it; run them through ./scripts/test, which installs it"
    );
    std::process::Command::new(name)
}

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The alert rules load, and each alert fires from sample series
/// (`promtool test rules`), the four the issue names among them.
#[test]
fn the_alert_rules_pass_promtool_and_each_alert_fires() {
    let rules = repo("deploy/prometheus/chainship-rules.yml");
    let tests = repo("deploy/prometheus/chainship-rules.test.yml");
    ok(
        &tool("promtool").arg("check").arg("rules").arg(&rules).output().unwrap(),
        "promtool check rules",
    );
    ok(
        &tool("promtool").arg("test").arg("rules").arg(&tests).output().unwrap(),
        "promtool test rules",
    );
    let rules_text = std::fs::read_to_string(&rules).unwrap();
    let tests_text = std::fs::read_to_string(&tests).unwrap();
    let alerts: Vec<&str> = rules_text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in &alerts {
        assert!(
            tests_text.contains(&format!("alertname: {alert}")),
            "{alert} has no promtool test"
        );
    }
    for needed in [
        "ChainshipVerifyFailed",
        "ChainshipVerifyNotRun",
        "ChainshipAnchorStale",
        "ChainshipExportLagHigh",
    ] {
        assert!(alerts.contains(&needed), "{needed} missing");
    }
    // Every runbook points to the book's page that says what to do, which names the alert.
    let page = std::fs::read_to_string(repo("docs/src/guides/alerts.md")).unwrap();
    let (_, section) = page.split_once("# When an alert fires").expect("the book's alert page");
    assert!(
        !rules_text.contains("README.md#"),
        "a runbook still points into the README"
    );
    for alert in &alerts {
        assert!(section.contains(alert), "the alert page does not name {alert}");
    }
}

/// The Kubernetes manifests pass kubernetes-validate in strict mode, and say
/// what the README promises: the database read-only in the sidecar, the
/// signing key mounted only there, non-root, read-only root filesystems, no
/// privilege escalation, limits, liveness on /livez and readiness on /readyz,
/// the restricted Pod Security Standard; the embedded config is
/// one `follow` accepts.
#[test]
fn the_kubernetes_manifests_pass_strict_validation_and_are_hardened() {
    let manifest = repo("deploy/kubernetes/chainship.yaml");
    let validate = std::env::var("CHAINSHIP_TEST_KUBERNETES_VALIDATE")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("CHAINSHIP_TEST_KUBERNETES_VALIDATE is not set: run this test through ./scripts/test, which installs kubernetes-validate");
    let out = std::process::Command::new(validate)
        .arg("--strict")
        .arg(&manifest)
        .output()
        .unwrap();
    ok(&out, "kubernetes-validate --strict");
    let docs = YamlLoader::load_from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"].as_str() == Some(k))
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let pod = &kind("Deployment")["spec"]["template"]["spec"];
    let containers = pod["containers"].as_vec().unwrap();
    let sidecar = containers
        .iter()
        .find(|c| c["name"].as_str() == Some("chainship"))
        .unwrap();
    let runtime = containers
        .iter()
        .find(|c| c["name"].as_str() == Some("agentrt"))
        .unwrap();
    let mounts = |c: &Yaml| c["volumeMounts"].as_vec().cloned().unwrap_or_default();
    let db = mounts(sidecar)
        .into_iter()
        .find(|m| m["name"].as_str() == Some("audit-db"))
        .unwrap();
    assert_eq!(
        db["readOnly"].as_bool(),
        Some(true),
        "the database is read-only in the sidecar"
    );
    assert!(
        mounts(sidecar)
            .iter()
            .any(|m| m["name"].as_str() == Some("signing-key"))
    );
    assert!(
        !mounts(runtime)
            .iter()
            .any(|m| m["name"].as_str() == Some("signing-key")),
        "the runtime never mounts the key"
    );
    for c in containers {
        let secret = mounts(c)
            .iter()
            .any(|m| m["name"].as_str() == Some("signing-key-secret"));
        assert!(!secret, "only the init step reads the Secret");
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    for c in containers {
        let sc = &c["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{:?}", c["name"]);
        assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false), "{:?}", c["name"]);
        assert!(
            !c["resources"]["limits"]["memory"].is_badvalue(),
            "{:?} has limits",
            c["name"]
        );
    }
    // Liveness is the loops turning, readiness the evidence flowing: a break
    // fails readiness only, so the kubelet never restarts into it.
    assert_eq!(sidecar["livenessProbe"]["httpGet"]["path"].as_str(), Some("/livez"));
    assert_eq!(sidecar["readinessProbe"]["httpGet"]["path"].as_str(), Some("/readyz"));
    // The runtime and the sidecar are different users (the key is the sidecar's alone).
    let uid = |c: &Yaml| c["securityContext"]["runAsUser"].as_i64();
    assert!(pod["securityContext"]["runAsUser"].is_badvalue(), "no pod-wide user");
    assert_eq!(uid(sidecar), Some(10001));
    assert_eq!(uid(runtime), Some(10002));
    let cron = kind("CronJob");
    let job_pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let args: Vec<String> = strings(&job_pod["containers"][0]["args"]);
    assert!(args.starts_with(&["anchor".into(), "verify".into()]), "{args:?}");
    // The restricted Pod Security Standard: no hostPath volume, seccomp, non-root, no capabilities.
    assert!(
        !std::fs::read_to_string(&manifest).unwrap().contains("hostPath"),
        "hostPath is refused under the baseline and restricted Pod Security Standards"
    );
    for spec in [pod, job_pod] {
        assert_eq!(
            spec["securityContext"]["seccompProfile"]["type"].as_str(),
            Some("RuntimeDefault")
        );
        assert_eq!(spec["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
        let all: Vec<&Yaml> = spec["containers"]
            .as_vec()
            .into_iter()
            .chain(spec["initContainers"].as_vec())
            .flatten()
            .collect();
        for c in all {
            assert_eq!(
                strings(&c["securityContext"]["capabilities"]["drop"]),
                vec!["ALL"],
                "{:?}",
                c["name"]
            );
        }
    }
    // The embedded config is one `follow` accepts.
    let toml = kind("ConfigMap")["data"]["chainship.toml"].as_str().unwrap().to_owned();
    let dir = tempfile::TempDir::new().unwrap();
    let cfg = dir.path().join("chainship.toml");
    std::fs::write(&cfg, toml).unwrap();
    let out = common::run(&["config", "check", "--config", common::path_str(&cfg), "--for", "follow"]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
}

/// The monitor's manifest passes strict validation and is hardened: one
/// replica recreated (one state directory), its state on a claim of its
/// own, probes on /livez and /readyz, non-root, read-only root, no
/// privilege, no capability, seccomp, limits, and `monitor --all-origins`.
#[test]
fn the_monitor_manifest_passes_strict_validation_and_is_hardened() {
    let manifest = repo("deploy/kubernetes/monitor.yaml");
    let validate = std::env::var("CHAINSHIP_TEST_KUBERNETES_VALIDATE")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("CHAINSHIP_TEST_KUBERNETES_VALIDATE is not set: run this test through ./scripts/test");
    let out = std::process::Command::new(validate)
        .arg("--strict")
        .arg(&manifest)
        .output()
        .unwrap();
    ok(&out, "kubernetes-validate --strict");
    let docs = YamlLoader::load_from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let deployment = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("Deployment"))
        .expect("a Deployment");
    assert_eq!(deployment["spec"]["replicas"].as_i64(), Some(1));
    assert_eq!(deployment["spec"]["strategy"]["type"].as_str(), Some("Recreate"));
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"].as_str(),
        Some("RuntimeDefault")
    );
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    assert!(
        args.starts_with(&["monitor".into()]) && args.contains(&"--all-origins".into()),
        "{args:?}"
    );
    assert!(args.contains(&"/var/lib/chainship/monitor".into()), "{args:?}");
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(strings(&sc["capabilities"]["drop"]), vec!["ALL"]);
    assert!(!c["resources"]["limits"]["memory"].is_badvalue());
    assert_eq!(c["livenessProbe"]["httpGet"]["path"].as_str(), Some("/livez"));
    assert_eq!(c["readinessProbe"]["httpGet"]["path"].as_str(), Some("/readyz"));
    let state = c["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str() == Some("state"))
        .expect("the state volume");
    assert_eq!(state["mountPath"].as_str(), Some("/var/lib/chainship"));
    assert!(
        pod["volumes"]
            .as_vec()
            .unwrap()
            .iter()
            .any(|v| v["name"].as_str() == Some("state") && !v["persistentVolumeClaim"].is_badvalue()),
        "the state survives a restart"
    );
}

/// The systemd units pass `systemd-analyze verify` (with ExecStart pointed
/// at the binary under test, which must exist for it), and are hardened.
#[test]
fn the_systemd_units_pass_systemd_analyze_verify() {
    let dir = tempfile::TempDir::new().unwrap();
    let names = [
        "chainship-follow.service",
        "chainship-verify.service",
        "chainship-verify.timer",
        "chainship-monitor.service",
    ];
    for name in names {
        let text = std::fs::read_to_string(repo(&format!("deploy/systemd/{name}"))).unwrap();
        let local = text.replace("/usr/local/bin/chainship", env!("CARGO_BIN_EXE_chainship"));
        std::fs::write(dir.path().join(name), local).unwrap();
    }
    let out = tool("systemd-analyze")
        .arg("verify")
        .args(names)
        .current_dir(dir.path())
        .output()
        .unwrap();
    ok(&out, "systemd-analyze verify");
    assert!(
        String::from_utf8_lossy(&out.stderr).trim().is_empty(),
        "warnings: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let follow = std::fs::read_to_string(repo("deploy/systemd/chainship-follow.service")).unwrap();
    for directive in [
        "User=chainship",
        "SupplementaryGroups=",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "ReadOnlyPaths=/var/lib/agentrt",
        "StateDirectory=chainship",
        "LoadCredential=head.key:",
        "--config /etc/chainship/follow.toml",
        "Restart=on-failure",
    ] {
        assert!(follow.contains(directive), "chainship-follow.service lacks {directive}");
    }
    // The settings it reads are shipped, and keep the cursor in its StateDirectory.
    let out = common::run(&[
        "config",
        "check",
        "--config",
        common::path_str(&repo("deploy/systemd/follow.toml")),
    ]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(
        common::stdout(&out).contains("cursor = file:/var/lib/chainship/cursor")
            && common::stdout(&out).contains("on-break = wait"),
        "{}",
        common::stdout(&out)
    );
    let monitor = std::fs::read_to_string(repo("deploy/systemd/chainship-monitor.service")).unwrap();
    for directive in [
        "User=chainship",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "StateDirectory=chainship-monitor",
        "--config /etc/chainship/monitor.toml",
        "Restart=on-failure",
        "RestartPreventExitStatus=2",
    ] {
        assert!(
            monitor.contains(directive),
            "chainship-monitor.service lacks {directive}"
        );
    }
    let out = common::run(&[
        "config",
        "check",
        "--config",
        common::path_str(&repo("deploy/systemd/monitor.toml")),
        "--for",
        "monitor",
    ]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
    assert!(
        common::stdout(&out).contains("state = /var/lib/chainship-monitor"),
        "{}",
        common::stdout(&out)
    );
    let timer = std::fs::read_to_string(repo("deploy/systemd/chainship-verify.timer")).unwrap();
    assert!(timer.contains("Persistent=true") && timer.contains("OnCalendar="));
    let verify = std::fs::read_to_string(repo("deploy/systemd/chainship-verify.service")).unwrap();
    assert!(verify.contains("--metrics-textfile"));
    // The settings file it reads is one `anchor verify` accepts.
    let cfg = repo("deploy/verify.toml");
    let out = common::run(&[
        "config",
        "check",
        "--config",
        common::path_str(&cfg),
        "--for",
        "anchor verify",
    ]);
    assert_eq!(
        common::code(&out),
        0,
        "{}{}",
        common::stdout(&out),
        common::stderr(&out)
    );
}

/// `docker-compose config` accepts the Compose file (Debian's docker-compose
/// validates without a daemon), and every image is pinned by version.
#[test]
fn the_compose_file_passes_docker_compose_config_and_pins_its_images() {
    let out = tool("docker-compose")
        .arg("-f")
        .arg(repo("docker-compose.yml"))
        .args(["config", "-q"])
        .output()
        .unwrap();
    ok(&out, "docker-compose config");
    let doc = compose();
    let mut images = vec![doc["x-chainship"]["image"].as_str().unwrap().to_owned()];
    for (_, service) in doc["services"].as_hash().unwrap() {
        if let Some(image) = service["image"].as_str() {
            images.push(image.to_owned());
        }
    }
    for image in images {
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or("");
        assert!(!tag.is_empty() && tag != "latest", "{image} is not pinned by version");
    }
}

/// The nightly job's textfile: after an ok run, one with findings and one
/// that could not run, each passes `promtool check metrics` and says so.
#[test]
fn anchor_verify_writes_its_result_to_a_textfile_every_time() {
    let a = common::Anchored::new(400, "job/agentrt");
    let sink = format!("file:{}", common::path_str(&a.dir.path().join("e.jsonl")));
    let out = common::run(&[
        "follow",
        "--once",
        "--from-start",
        "--db",
        common::path_str(&a.db),
        "--origin",
        "job/agentrt",
        "--sink",
        &sink,
        "--cursor",
        common::path_str(&a.dir.path().join("c")),
        "--anchor",
        &a.anchor_url(),
        "--signing-key",
        common::path_str(&a.key),
    ]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    let file = a.dir.path().join("textfile").join("chainship_verify.prom");
    std::fs::create_dir(file.parent().unwrap()).unwrap();
    let verify = |db: &std::path::Path, anchor: &str| {
        common::run(&[
            "anchor",
            "verify",
            "--db",
            common::path_str(db),
            "--anchor",
            anchor,
            "--origin",
            "job/agentrt",
            "--trusted-key",
            &a.verifier,
            "--metrics-textfile",
            common::path_str(&file),
        ])
    };
    let metric = |text: &str, series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    };
    let labels = "check=\"anchor_verify\",origin=\"job/agentrt\"";
    let check_metrics = |text: &str| {
        let mut child = tool("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        ok(&out, "promtool check metrics");
    };

    assert_eq!(common::code(&verify(&a.db, &a.anchor_url())), 0);
    let text = std::fs::read_to_string(&file).unwrap();
    check_metrics(&text);
    assert_eq!(
        metric(&text, &format!("chainship_job_result{{{labels},result=\"ok\"}}")),
        1.0
    );
    assert_eq!(
        metric(&text, &format!("chainship_job_last_trusted_head_seq{{{labels}}}")),
        400.0
    );
    // `running` was written first, and replaced by the result.
    assert_eq!(
        metric(&text, &format!("chainship_job_result{{{labels},result=\"running\"}}")),
        0.0
    );
    assert!(metric(&text, &format!("chainship_job_heads_checked{{{labels}}}")) > 0.0);
    assert_eq!(
        metric(&text, &format!("chainship_job_events_checked{{{labels}}}")),
        400.0
    );
    assert!(
        metric(
            &text,
            &format!("chainship_job_last_trusted_head_age_seconds{{{labels}}}")
        ) < 600.0
    );

    let damaged = a.dir.path().join("damaged.db");
    std::fs::copy(&a.db, &damaged).unwrap();
    common::tamper(&damaged)
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 200", [])
        .unwrap();
    assert_eq!(common::code(&verify(&damaged, &a.anchor_url())), 1);
    let text = std::fs::read_to_string(&file).unwrap();
    check_metrics(&text);
    assert_eq!(
        metric(&text, &format!("chainship_job_result{{{labels},result=\"findings\"}}")),
        1.0
    );
    assert_eq!(
        metric(&text, &format!("chainship_job_findings{{{labels},kind=\"altered\"}}")),
        1.0
    );
    assert_eq!(
        metric(&text, &format!("chainship_job_result{{{labels},result=\"ok\"}}")),
        0.0
    );

    let unreachable = format!("file:{}", common::path_str(&a.dir.path().join("not-mounted")));
    assert_eq!(common::code(&verify(&a.db, &unreachable)), 2);
    let text = std::fs::read_to_string(&file).unwrap();
    check_metrics(&text);
    assert_eq!(
        metric(&text, &format!("chainship_job_result{{{labels},result=\"error\"}}")),
        1.0
    );
    // Written whole, by rename: no temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// The Grafana dashboard is one Grafana's own dashboard model (the Grafana
/// Foundation SDK, pinned by the test script) reads whole: every field it
/// writes, at every level, is one the model knows and gives back; every
/// panel has a Prometheus query. (Which metrics the queries may name is
/// `witness::the_dashboard_and_the_alert_rules_use_only_metrics_the_program_exports`.)
#[test]
fn the_dashboard_is_read_whole_by_grafanas_dashboard_model() {
    let python = std::env::var("CHAINSHIP_TEST_GRAFANA_PYTHON").unwrap_or_default();
    assert!(
        !python.is_empty(),
        "CHAINSHIP_TEST_GRAFANA_PYTHON is not set: this test needs the Grafana Foundation SDK; run it through ./scripts/test"
    );
    let check = r#"
import json, sys
from grafana_foundation_sdk.models import dashboard
doc = json.load(open(sys.argv[1]))
back = json.loads(json.dumps(dashboard.Dashboard.from_json(doc).to_json(),
                             default=lambda o: o.to_json() if hasattr(o, "to_json") else str(o)))
def lost(a, b, path):
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return [path + " (not an object)"]
        return [p for k, v in a.items() for p in ([path + "." + k] if k not in b else lost(v, b[k], path + "." + k))]
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return [path + " (a list of another length)"]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in lost(x, y, "%s[%d]" % (path, i))]
    return []
dropped = lost(doc, back, "dashboard")
if dropped:
    sys.exit("fields Grafana's dashboard model does not know: " + ", ".join(dropped))
if not doc["panels"] or any(not p.get("targets") or not all(t.get("expr") for t in p["targets"]) for p in doc["panels"]):
    sys.exit("a panel without a Prometheus query")
print(len(doc["panels"]))
"#;
    let run = |path: &std::path::Path| tool(&python).args(["-c", check]).arg(path).output().unwrap();
    let dashboard = repo("deploy/grafana/chainship.json");
    let out = run(&dashboard);
    ok(&out, "the Grafana dashboard model");
    assert!(String::from_utf8_lossy(&out.stdout).trim().parse::<usize>().unwrap() >= 10);
    // A field Grafana does not know is caught, naming it.
    let dir = tempfile::TempDir::new().unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&dashboard).unwrap()).unwrap();
    doc["panels"][0]["gridPosition"] = serde_json::json!({"x": 0});
    let planted = dir.path().join("dashboard.json");
    std::fs::write(&planted, doc.to_string()).unwrap();
    let out = run(&planted);
    assert!(!out.status.success(), "an unknown panel field passed");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("dashboard.panels[0].gridPosition"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
