//! The shipped deployments, run as shipped. No container engine runs here,
//! so each container or unit is run by `tests/deploy/sandbox`: a mount
//! namespace with a root of its own, the deployment's volumes bound at the
//! deployment's paths (read-only where it says so), as the deployment's
//! uid and gid, with the command and settings files read from the
//! deployment files themselves. Only the addresses of Kafka and S3 differ:
//! the sandbox's /etc/hosts points the deployment's host names at the test
//! services on loopback, and a fresh topic and bucket are given through the
//! environment. Each test: a live writer exported by the follower, the
//! nightly verify as its job runs it passing, then a planted break failing
//! readiness while liveness holds and the follower keeps running.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use yaml_rust2::{Yaml, YamlLoader};

use crate::common::*;

/// The shipped deployments all follow origin `prod-eu1/agentrt` into the one
/// test broker, so their Kafka transactional ids are one: run at once, each
/// would fence the other. One deployment at a time.
static ONE_DEPLOYMENT: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml(path: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&std::fs::read_to_string(repo(path)).unwrap()).unwrap()
}

/// One container or unit: its user, its mounts (`ro`/`rw`, host path,
/// path inside) and its environment.
struct Sandbox {
    user: String,
    binds: Vec<(&'static str, PathBuf, String)>,
    env: Vec<(String, String)>,
}

impl Sandbox {
    fn new(user: &str) -> Self {
        Sandbox {
            user: user.to_owned(),
            binds: Vec::new(),
            env: Vec::new(),
        }
    }

    fn ro(mut self, host: &Path, inside: &str) -> Self {
        self.binds.push(("ro", host.to_owned(), inside.to_owned()));
        self
    }

    fn rw(mut self, host: &Path, inside: &str) -> Self {
        self.binds.push(("rw", host.to_owned(), inside.to_owned()));
        self
    }

    fn env(mut self, key: &str, value: &str) -> Self {
        assert!(!value.contains(' '), "{key}: the sandbox passes values without spaces");
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The anchor store as the test's S3 server and `bucket`, with any credentials.
    fn anchor_s3(self, bucket: &str) -> Self {
        self.anchor_s3_store(bucket)
            .env("AWS_ACCESS_KEY_ID", "anchor")
            .env("AWS_SECRET_ACCESS_KEY", "anchor-secret")
    }

    /// The anchor store as the test's S3 server and `bucket`, credentials given elsewhere.
    fn anchor_s3_store(self, bucket: &str) -> Self {
        self.env("CHAINSHIP_ANCHOR", &format!("s3://{bucket}/heads"))
            .env("CHAINSHIP_ANCHOR_S3_ENDPOINT", "http://minio:9000")
            .env("CHAINSHIP_ANCHOR_S3_PATH_STYLE", "true")
            .env("AWS_EC2_METADATA_DISABLED", "true")
    }

    fn command(&self, scratch: &Path, argv: &[String]) -> Command {
        let mut cmd = Command::new(repo("tests/deploy/sandbox"));
        cmd.arg(&self.user).arg("127.0.0.1 kafka minio kafka.internal");
        for (mode, host, inside) in &self.binds {
            cmd.arg(mode).arg(host).arg(inside);
        }
        cmd.arg("--").args(argv);
        let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        cmd.env("SANDBOX_CHAINSHIP", env!("CARGO_BIN_EXE_chainship"))
            .env("SANDBOX_ROOT_DIR", scratch)
            .env("SANDBOX_ENV", env.join(" "));
        cmd
    }
}

/// A stand-in runtime appending 100 events a second to `db` inside `sandbox`.
fn live_writer_in(sandbox: Sandbox, scratch: &Path, db: &str) -> KillOnDrop {
    let argv = [
        "chainship",
        "generate",
        "--db",
        db,
        "--append",
        "--events",
        "0",
        "--follow-rate",
        "100",
    ];
    KillOnDrop(
        sandbox
            .command(scratch, &argv.map(String::from))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A directory owned by `uid:gid` with `mode`, as an image or a volume makes it.
fn owned_dir(path: &Path, uid: u32, gid: u32, mode: u32) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_owned()
}

fn ok(out: &Output, what: &str) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The services the deployments name (kafka:9092, minio:9000) are the test
/// services only on their default ports.
fn require_default_ports() {
    assert!(
        kafka_addr().ends_with(":9092") && s3_endpoint().ends_with(":9000"),
        "the deployment tests reach kafka:9092 and minio:9000 through /etc/hosts: run the services on their default ports"
    );
}

/// Waits until `port` answers `path` with `status`, the follower still running.
fn wait_for_status(follower: &mut KillOnDrop, log: &Path, port: u16, path: &str, status: u16, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(exit) = follower.try_wait().unwrap() {
            panic!(
                "the follower exited ({exit}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if http_get(port, path, Duration::from_secs(5)).is_some_and(|(s, _)| s == status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never answered {status}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The follower's metric `series`, once it reaches `at_least`.
fn wait_for_metric(port: u16, log: &Path, series: &str, at_least: f64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let value = http_get(port, "/metrics", Duration::from_secs(5)).and_then(|(_, b)| metric(&b, series));
        if value.is_some_and(|v| v >= at_least) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{series} stayed at {value:?} < {at_least}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Appends an event whose hash does not chain, as someone editing the
/// database would: the follower must stop shipping at it.
fn plant_break(db: &Path) {
    let conn = tamper(db);
    let head: i64 = conn.query_row("SELECT max(seq) FROM events", [], |r| r.get(0)).unwrap();
    conn.execute(
        "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, 'r', '', 't', 'k', '{}', ?2)",
        rusqlite::params![head + 1, "0".repeat(64)],
    )
    .unwrap();
}

/// After a planted break: readiness fails, liveness holds, and the process
/// is not restarted (it keeps running, waiting for an operator).
fn break_fails_readiness_only(follower: &mut KillOnDrop, log: &Path, port: u16, ready: &str, live: &str) {
    wait_for_status(follower, log, port, ready, 503, Duration::from_secs(30));
    for _ in 0..10 {
        let (status, body) = http_get(port, live, Duration::from_secs(5)).expect("liveness answers");
        assert_eq!(status, 200, "{live} at a break: {body}");
        assert!(
            follower.try_wait().unwrap().is_none(),
            "the follower keeps running at a break"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `sh -c` with a command a deployment file gives as one string.
fn shell(command: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), command.into()]
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compose_stack_runs_as_shipped_read_only_database_other_users_probes() {
    crate::readonly_db::require_root("running the Compose services as shipped");
    let _one = ONE_DEPLOYMENT.lock().await;
    let _services = services().await;
    require_default_ports();
    let compose = yaml("docker-compose.yml").remove(0);
    let services = &compose["services"];
    let dockerfile = std::fs::read_to_string(repo("Dockerfile")).unwrap();
    // The image makes the volumes' directories with these owners (a named
    // volume takes them when first mounted): made the same way here.
    for line in [
        "install -d -o 10002 -g 10001 -m 2750 /data",
        "install -d -o 10001 -g 10001 -m 0700 /keys /var/lib/chainship/state",
        "--uid 10001",
    ] {
        assert!(dockerfile.contains(line), "the Dockerfile lacks {line:?}");
    }
    let dir = TempDir::new().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let audit_db = owned_dir(&dir.path().join("audit-db"), 10002, 10001, 0o2750);
    let keys = owned_dir(&dir.path().join("keys"), 10001, 10001, 0o700);
    let state = owned_dir(&dir.path().join("follower-state"), 10001, 10001, 0o700);
    let one = |service: &str| {
        let cmd = &services[service]["command"];
        cmd.as_vec().map_or_else(
            || cmd.as_str().unwrap().to_owned(),
            |v| v[0].as_str().unwrap().to_owned(),
        )
    };
    let image_user = "10001:10001".to_owned();
    let user_of = |service: &str| {
        services[service]["user"]
            .as_str()
            .map_or(image_user.clone(), str::to_owned)
    };

    // keygen, once, as the image's user, into the keys volume.
    let out = Sandbox::new(&user_of("keygen"))
        .rw(&keys, "/keys")
        .command(&scratch, &shell(&one("keygen")))
        .output()
        .unwrap();
    ok(&out, "keygen");
    let vkey = std::fs::read_to_string(keys.join("head.pub")).unwrap();
    assert!(
        vkey.starts_with("compose/agentrt+"),
        "the key is named for the origin: {vkey}"
    );

    // The writer, as its own user, the database volume read-write.
    let writer_user = user_of("writer");
    assert_eq!(writer_user, "10002:10001", "the runtime is not the follower's user");
    let mut writer = KillOnDrop(
        Sandbox::new(&writer_user)
            .rw(&audit_db, "/data")
            .command(&scratch, &shell(&one("writer")))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let db = audit_db.join("audit.db");
    let deadline = Instant::now() + Duration::from_secs(20);
    // The writer makes the table before its first event: no row yet is 0.
    let written = |db: &Path| {
        rusqlite::Connection::open(db)
            .and_then(|c| c.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(0)
    };
    while !db.exists() || written(&db) < 150 {
        assert!(writer.try_wait().unwrap().is_none(), "the writer stopped");
        assert!(Instant::now() < deadline, "the writer wrote nothing");
        std::thread::sleep(Duration::from_millis(200));
    }

    // The follower: its command and volumes as the file says.
    let follower = &services["follower"];
    let argv: Vec<String> = follower["command"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let volumes: Vec<String> = follower["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let mut sandbox = Sandbox::new(&user_of("follower"));
    for volume in &volumes {
        let parts: Vec<&str> = volume.split(':').collect();
        let host = match parts[0] {
            "audit-db" => audit_db.clone(),
            "follower-state" => state.clone(),
            "keys" => keys.clone(),
            file => repo(file.trim_start_matches("./")),
        };
        sandbox = if parts.get(2) == Some(&"ro") {
            sandbox.ro(&host, parts[1])
        } else {
            sandbox.rw(&host, parts[1])
        };
    }
    assert!(volumes.contains(&"audit-db:/data:ro".to_owned()), "{volumes:?}");
    let topic = kafka_topic("compose", 1).await;
    let bucket = locked_bucket("compose").await;
    for (k, v) in follower["environment"].as_hash().unwrap() {
        sandbox = sandbox.env(k.as_str().unwrap(), v.as_str().unwrap());
    }
    let port = free_port();
    let log = dir.path().join("follower.log");
    let mut follower_proc = KillOnDrop(
        sandbox
            .env("CHAINSHIP_SINK", &format!("kafka://kafka:9092/{topic}"))
            .env("CHAINSHIP_ANCHOR", &format!("s3://{bucket}/heads"))
            .env("CHAINSHIP_METRICS_ADDR", &format!("127.0.0.1:{port}"))
            .env("CHAINSHIP_ANCHOR_INTERVAL", "1s")
            .command(&scratch, &[vec!["chainship".to_owned()], argv].concat())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    // The healthcheck's URL, as the file gives it.
    let health = services["follower"]["healthcheck"]["test"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .find(|v| v.starts_with("http://"))
        .unwrap()
        .to_owned();
    let ready = health.trim_start_matches("http://127.0.0.1:9464");
    wait_for_status(&mut follower_proc, &log, port, ready, 200, Duration::from_secs(30));
    // It keeps up with the live writer for a while, then the writer stops.
    std::thread::sleep(Duration::from_secs(10));
    assert!(
        follower_proc.try_wait().unwrap().is_none(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    let head = stop_writer(&mut writer, &db);
    let seq: f64 = head.split(':').next().unwrap().parse().unwrap();
    wait_for_metric(port, &log, "chainship_cursor_seq", seq, Duration::from_secs(30));
    wait_for_metric(port, &log, "chainship_anchor_last_seq", seq, Duration::from_secs(30));
    let records = kafka_read_partition(&topic, 0, "compose/agentrt");
    assert_eq!(
        records.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count() as f64,
        seq,
        "every event once in the topic"
    );

    // The nightly verify, as its service runs it ($$ is Compose's escape of $).
    let verify = one("verify")
        .replace("$$", "$")
        .replace("s3://anchors/heads", &format!("s3://{bucket}/heads"));
    let mut nightly = Sandbox::new(&user_of("verify"))
        .ro(&audit_db, "/data")
        .ro(&keys, "/keys");
    for (k, v) in services["verify"]["environment"].as_hash().unwrap() {
        nightly = nightly.env(k.as_str().unwrap(), v.as_str().unwrap());
    }
    let out = nightly.command(&scratch, &shell(&verify)).output().unwrap();
    ok(&out, "the nightly verify");

    // A break: readiness (the healthcheck) fails, liveness holds, it keeps running.
    plant_break(&db);
    break_fails_readiness_only(&mut follower_proc, &log, port, ready, "/livez");
}

/// A container of the Kubernetes manifest: its user (`runAsUser:runAsGroup`
/// plus the pod's fsGroup, as the kubelet adds it) and its mounts (volume
/// name, path, read-only).
struct Container<'a> {
    spec: &'a Yaml,
    pod: &'a Yaml,
}

impl Container<'_> {
    /// `uid:gid[:fsGroup]`: the container's user, else the pod's.
    fn user(&self) -> String {
        let (sc, pod) = (&self.spec["securityContext"], &self.pod["securityContext"]);
        let uid = sc["runAsUser"]
            .as_i64()
            .or(pod["runAsUser"].as_i64())
            .expect("every container has a user");
        let gid = sc["runAsGroup"].as_i64().or(pod["runAsGroup"].as_i64()).unwrap_or(uid);
        match pod["fsGroup"].as_i64() {
            Some(fs_group) => format!("{uid}:{gid}:{fs_group}"),
            None => format!("{uid}:{gid}"),
        }
    }

    fn mounts(&self) -> Vec<(String, String, bool)> {
        self.spec["volumeMounts"]
            .as_vec()
            .map(|v| {
                v.iter()
                    .map(|m| {
                        (
                            m["name"].as_str().unwrap().to_owned(),
                            m["mountPath"].as_str().unwrap().to_owned(),
                            m["readOnly"].as_bool() == Some(true),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A sandbox with this container's user and mounts, `volumes` giving the
    /// host directory (or file) of each volume name.
    fn sandbox(&self, volumes: &dyn Fn(&str) -> PathBuf) -> Sandbox {
        let mut sandbox = Sandbox::new(&self.user());
        for (name, path, read_only) in self.mounts() {
            let host = volumes(&name);
            sandbox = if read_only {
                sandbox.ro(&host, &path)
            } else {
                sandbox.rw(&host, &path)
            };
        }
        sandbox
    }

    fn strings(&self, key: &str) -> Vec<String> {
        self.spec[key]
            .as_vec()
            .map(|v| v.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    }

    fn probe_path(&self, probe: &str) -> String {
        self.spec[probe]["httpGet"]["path"].as_str().unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_kubernetes_pod_and_cronjob_run_as_shipped_users_mounts_probes() {
    crate::readonly_db::require_root("running the Kubernetes containers as shipped");
    let _one = ONE_DEPLOYMENT.lock().await;
    let _services = services().await;
    require_default_ports();
    let docs = yaml("deploy/kubernetes/chainship.yaml");
    let kind = |k: &str| docs.iter().find(|d| d["kind"].as_str() == Some(k)).unwrap();
    let config_map = &kind("ConfigMap")["data"];
    let pod = &kind("Deployment")["spec"]["template"]["spec"];
    let fs_group = pod["securityContext"]["fsGroup"].as_i64().expect("the pod's fsGroup");
    let find = |list: &str, name: &str| {
        let spec = pod[list]
            .as_vec()
            .unwrap()
            .iter()
            .find(|c| c["name"].as_str() == Some(name))
            .unwrap();
        Container { spec, pod }
    };
    let (init, runtime, sidecar) = (
        find("initContainers", "signing-key"),
        find("containers", "agentrt"),
        find("containers", "chainship"),
    );
    let job_pod = &kind("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let job = Container {
        spec: &job_pod["containers"][0],
        pod: job_pod,
    };

    let dir = TempDir::new().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let gid = fs_group as u32;
    // Volumes as the kubelet makes them with an fsGroup: the group's, setgid.
    let audit_db = owned_dir(&dir.path().join("audit-db"), 0, gid, 0o2775);
    let state = owned_dir(&dir.path().join("chainship-state"), 0, gid, 0o2775);
    let key_mem = owned_dir(&dir.path().join("signing-key"), 0, gid, 0o2777);
    let secret = owned_dir(&dir.path().join("secret"), 0, gid, 0o2755);
    let config = dir.path().join("config");
    std::fs::create_dir(&config).unwrap();
    // The Secret, made out of band from `chainship keygen` (mode: the volume's defaultMode).
    let (key, vkey) = keygen(dir.path(), "prod-eu1/agentrt", "head.key");
    std::fs::copy(&key, secret.join("head.key")).unwrap();
    std::os::unix::fs::chown(secret.join("head.key"), Some(0), Some(gid)).unwrap();
    std::fs::set_permissions(secret.join("head.key"), std::fs::Permissions::from_mode(0o440)).unwrap();
    for (name, text) in config_map.as_hash().unwrap() {
        std::fs::write(config.join(name.as_str().unwrap()), text.as_str().unwrap()).unwrap();
    }
    let volumes = |name: &str| -> PathBuf {
        match name {
            "audit-db" => audit_db.clone(),
            "cursor" => state.clone(),
            "signing-key" => key_mem.clone(),
            "signing-key-secret" => secret.clone(),
            "config" => config.join("chainship.toml"),
            "trusted-keys" => config.join("trusted-keys"),
            other => panic!("the manifest mounts a volume the test does not know: {other}"),
        }
    };

    // The init step installs the key for the sidecar's user alone.
    let out = init
        .sandbox(&volumes)
        .command(&scratch, &init.strings("command"))
        .output()
        .unwrap();
    ok(&out, "the signing-key init container");

    // The runtime (a stand-in writer) as its own user, with its mounts.
    let runtime_user = runtime.user();
    assert_ne!(
        runtime_user,
        sidecar.user(),
        "the runtime and the sidecar are different users"
    );
    let db_inside = "/data/audit.db";
    let out = runtime
        .sandbox(&volumes)
        .command(
            &scratch,
            &["chainship", "generate", "--db", db_inside, "--events", "200"].map(String::from),
        )
        .output()
        .unwrap();
    ok(&out, "the runtime's first events");
    let mut writer = live_writer_in(runtime.sandbox(&volumes), &scratch, db_inside);

    // The sidecar, with the ConfigMap's settings; only where Kafka and S3 are differs.
    let topic = kafka_topic("k8s", 1).await;
    let bucket = locked_bucket("k8s").await;
    let port = free_port();
    let log = dir.path().join("sidecar.log");
    let mut follower = KillOnDrop(
        sidecar
            .sandbox(&volumes)
            .env("CHAINSHIP_SINK", &format!("kafka://kafka:9092/{topic}"))
            .anchor_s3(&bucket)
            .env("CHAINSHIP_METRICS_ADDR", &format!("127.0.0.1:{port}"))
            .env("CHAINSHIP_ANCHOR_INTERVAL", "1s")
            .command(
                &scratch,
                &[vec!["chainship".to_owned()], sidecar.strings("args")].concat(),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let (ready, live) = (
        sidecar.probe_path("readinessProbe"),
        sidecar.probe_path("livenessProbe"),
    );
    wait_for_status(&mut follower, &log, port, &ready, 200, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(8));
    let db = audit_db.join("audit.db");
    let head = stop_writer(&mut writer, &db);
    let seq: f64 = head.split(':').next().unwrap().parse().unwrap();
    wait_for_metric(port, &log, "chainship_cursor_seq", seq, Duration::from_secs(30));
    wait_for_metric(port, &log, "chainship_anchor_last_seq", seq, Duration::from_secs(30));

    // The CronJob, with its args; the placeholder key is refused by name,
    // the real one (as the manifest's comment says to put there) passes.
    let args: Vec<String> = job
        .strings("args")
        .into_iter()
        .map(|a| a.replace("audit-anchors", &bucket))
        .collect();
    let nightly = |keys: &str| {
        std::fs::write(config.join("trusted-keys"), keys).unwrap();
        // Its args name the bucket (rewritten above); the rest as the sidecar has it.
        job.sandbox(&volumes)
            .anchor_s3(&bucket)
            .command(&scratch, &[vec!["chainship".to_owned()], args.clone()].concat())
            .output()
            .unwrap()
    };
    let shipped = config_map["trusted-keys"].as_str().unwrap();
    let out = nightly(shipped);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("placeholder") && stderr(&out).contains("chainship keygen"),
        "{}",
        stderr(&out)
    );
    let out = nightly(&format!("{vkey}\n"));
    ok(&out, "the nightly CronJob");

    plant_break(&db);
    break_fails_readiness_only(&mut follower, &log, port, &ready, &live);
}

/// A systemd unit's `[Service]` settings, `KEY=VALUE` a line (repeated keys joined by a space).
fn unit(path: &str) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::<String, String>::new();
    for line in std::fs::read_to_string(repo(path)).unwrap().lines() {
        if let Some((k, v)) = line.split_once('=')
            && !line.starts_with('#')
        {
            out.entry(k.trim().to_owned())
                .and_modify(|e| {
                    e.push(' ');
                    e.push_str(v.trim());
                })
                .or_insert_with(|| v.trim().to_owned());
        }
    }
    out
}

fn setfacl(args: &[&str], path: &Path) {
    let out = Command::new("setfacl")
        .args(args)
        .arg(path)
        .output()
        .expect("setfacl (Debian's acl)");
    ok(&out, "setfacl");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_systemd_units_run_as_shipped_read_only_paths_state_directory_credentials() {
    crate::readonly_db::require_root("running the systemd units as shipped");
    let _one = ONE_DEPLOYMENT.lock().await;
    let _services = services().await;
    require_default_ports();
    let follow = unit("deploy/systemd/chainship-follow.service");
    let verify = unit("deploy/systemd/chainship-verify.service");
    // The users: chainship (10001 here; systemd-sysusers picks one), in the runtime's group.
    let (uid, agentrt_gid) = (10001u32, 4242u32);
    assert_eq!(follow["User"], "chainship");
    assert_eq!(follow["SupplementaryGroups"], "agentrt");
    let dir = TempDir::new().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();

    // The runtime's directory, its group's to read; the settings under /etc/chainship.
    let agentrt = owned_dir(&dir.path().join("agentrt"), 10002, agentrt_gid, 0o2750);
    let etc = dir.path().join("etc-chainship");
    std::fs::create_dir(&etc).unwrap();
    std::fs::copy(repo("deploy/systemd/follow.toml"), etc.join("follow.toml")).unwrap();
    std::fs::copy(repo("deploy/verify.toml"), etc.join("verify.toml")).unwrap();
    // StateDirectory=chainship: /var/lib/chainship, the unit user's.
    assert_eq!(follow["StateDirectory"], "chainship");
    let state = owned_dir(&dir.path().join("state"), uid, uid, 0o700);
    // LoadCredential=head.key:...: the key in a directory others cannot
    // enter, handed to the unit's user by ACL, the file itself 0440.
    let (name, source) = follow["LoadCredential"].split_once(':').unwrap();
    assert_eq!((name, source), ("head.key", "/etc/chainship/keys/head.key"));
    let credentials = owned_dir(&dir.path().join("credentials"), 0, 0, 0o500);
    let (key, vkey) = keygen(dir.path(), "prod-eu1/agentrt", "head.key");
    let credential = credentials.join("head.key");
    std::fs::copy(&key, &credential).unwrap();
    std::fs::set_permissions(&credential, std::fs::Permissions::from_mode(0o440)).unwrap();
    setfacl(&["-m", &format!("u:{uid}:r")], &credential);
    setfacl(&["-m", &format!("u:{uid}:rx")], &credentials);
    let cred_dir = "/run/credentials/chainship-follow.service";
    let signing_key = follow["Environment"]
        .strip_prefix("CHAINSHIP_SIGNING_KEY=")
        .expect("the key comes from the credential")
        .replace("%d", cred_dir);
    // The S3 anchor store's credentials, as the shipped drop-in hands them
    // to both units (LoadCredential=anchor-s3:..., the file's path by environment).
    let drop_in = unit("deploy/systemd/anchor-s3-credentials.conf");
    let (name, source) = drop_in["LoadCredential"].split_once(':').unwrap();
    assert_eq!((name, source), ("anchor-s3", "/etc/chainship/keys/anchor-s3"));
    let (variable, file) = drop_in["Environment"].split_once('=').unwrap();
    assert_eq!(variable, "CHAINSHIP_ANCHOR_S3_CREDENTIALS_FILE");
    let s3_credential = credentials.join("anchor-s3");
    std::fs::write(
        &s3_credential,
        "[default]\naws_access_key_id = anchor\naws_secret_access_key = anchor-secret\n",
    )
    .unwrap();
    std::fs::set_permissions(&s3_credential, std::fs::Permissions::from_mode(0o440)).unwrap();
    setfacl(&["-m", &format!("u:{uid}:r")], &s3_credential);
    let s3_credentials_at = |dir: &str| file.replace("%d", dir);

    // The runtime writes as its own user.
    let runtime = Sandbox::new(&format!("10002:{agentrt_gid}")).rw(&agentrt, "/var/lib/agentrt");
    let db_inside = "/var/lib/agentrt/audit.db";
    let out = runtime
        .command(
            &scratch,
            &["chainship", "generate", "--db", db_inside, "--events", "300"].map(String::from),
        )
        .output()
        .unwrap();
    ok(&out, "the runtime's first events");
    let db = agentrt.join("audit.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut writer = live_writer_in(
        Sandbox::new(&format!("10002:{agentrt_gid}")).rw(&agentrt, "/var/lib/agentrt"),
        &scratch,
        db_inside,
    );

    // The follower: ExecStart, its user and groups, its paths.
    let unit_sandbox = |service: &std::collections::HashMap<String, String>, groups: &str| {
        let mut sandbox = Sandbox::new(&format!("{uid}:{uid}:{groups}"));
        for path in service["ReadOnlyPaths"].split_whitespace() {
            let host = match path {
                "/var/lib/agentrt" => agentrt.clone(),
                "/etc/chainship" => etc.clone(),
                other => panic!("a read-only path the test does not know: {other}"),
            };
            sandbox = sandbox.ro(&host, path);
        }
        sandbox
    };
    let topic = kafka_topic("systemd", 1).await;
    let bucket = locked_bucket("systemd").await;
    let port = free_port();
    let log = dir.path().join("follow.log");
    let exec: Vec<String> = follow["ExecStart"].split_whitespace().map(String::from).collect();
    assert_eq!(exec[0], "/usr/local/bin/chainship");
    let mut follower = KillOnDrop(
        unit_sandbox(&follow, &agentrt_gid.to_string())
            .rw(&state, "/var/lib/chainship")
            .ro(&credentials, cred_dir)
            .env("CREDENTIALS_DIRECTORY", cred_dir)
            .env("CHAINSHIP_SIGNING_KEY", &signing_key)
            .env("CHAINSHIP_SINK", &format!("kafka://kafka.internal:9092/{topic}"))
            .anchor_s3_store(&bucket)
            .env(variable, &s3_credentials_at(cred_dir))
            .env("CHAINSHIP_METRICS_ADDR", &format!("127.0.0.1:{port}"))
            .env("CHAINSHIP_ANCHOR_INTERVAL", "1s")
            .command(&scratch, &exec)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_status(&mut follower, &log, port, "/readyz", 200, Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(8));
    let head = stop_writer(&mut writer, &db);
    let seq: f64 = head.split(':').next().unwrap().parse().unwrap();
    wait_for_metric(port, &log, "chainship_cursor_seq", seq, Duration::from_secs(30));
    wait_for_metric(port, &log, "chainship_anchor_last_seq", seq, Duration::from_secs(30));
    assert!(state.join("cursor").exists(), "the cursor is in the StateDirectory");

    // The nightly unit, as the timer starts it (its textfile directory writable).
    let textfile = owned_dir(&dir.path().join("textfile"), 0, 4343, 0o2775);
    std::fs::write(etc.join("trusted-keys"), format!("{vkey}\n")).unwrap();
    let exec: Vec<String> = verify["ExecStart"]
        .split_whitespace()
        .map(|a| a.replace("audit-anchors", &bucket))
        .collect();
    let verify_creds = "/run/credentials/chainship-verify.service";
    let out = unit_sandbox(&verify, &format!("{agentrt_gid},4343"))
        .rw(&textfile, "/var/lib/node_exporter/textfile_collector")
        .ro(&credentials, verify_creds)
        .env("CREDENTIALS_DIRECTORY", verify_creds)
        .anchor_s3_store(&bucket)
        .env(variable, &s3_credentials_at(verify_creds))
        .command(&scratch, &exec)
        .output()
        .unwrap();
    ok(&out, "the nightly unit");
    let prom = std::fs::read_to_string(textfile.join("chainship_verify.prom")).unwrap();
    assert!(prom.contains("result=\"ok\"} 1"), "{prom}");

    // The monitor unit, as shipped: its settings file, its user, its StateDirectory.
    let monitor = unit("deploy/systemd/chainship-monitor.service");
    assert_eq!(monitor["StateDirectory"], "chainship-monitor");
    std::fs::copy(repo("deploy/systemd/monitor.toml"), etc.join("monitor.toml")).unwrap();
    let monitor_state = owned_dir(&dir.path().join("monitor-state"), uid, uid, 0o700);
    let exec: Vec<String> = monitor["ExecStart"].split_whitespace().map(String::from).collect();
    let (monitor_port, monitor_log) = (free_port(), dir.path().join("monitor.log"));
    let monitor_creds = "/run/credentials/chainship-monitor.service";
    let run_monitor = || {
        KillOnDrop(
            unit_sandbox(&monitor, &uid.to_string())
                .rw(&monitor_state, "/var/lib/chainship-monitor")
                .ro(&credentials, monitor_creds)
                .env("CHAINSHIP_FROM", &format!("kafka://kafka.internal:9092/{topic}"))
                .anchor_s3_store(&bucket)
                .env(variable, &s3_credentials_at(monitor_creds))
                .env("CHAINSHIP_METRICS_ADDR", &format!("127.0.0.1:{monitor_port}"))
                .command(&scratch, &exec)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&monitor_log).unwrap())
                .spawn()
                .unwrap(),
        )
    };
    let mut mon = run_monitor();
    wait_for_status(
        &mut mon,
        &monitor_log,
        monitor_port,
        "/readyz",
        200,
        Duration::from_secs(30),
    );
    let verified = "chainship_monitor_verified_seq{origin=\"prod-eu1/agentrt\"}";
    wait_for_metric(monitor_port, &monitor_log, verified, seq, Duration::from_secs(30));
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));
    assert!(
        monitor_state.join("monitor.json").exists(),
        "the state is in its StateDirectory"
    );
    // Restarted, it goes on from its state.
    let mut mon = run_monitor();
    wait_for_metric(monitor_port, &monitor_log, verified, seq, Duration::from_secs(30));
    let text = std::fs::read_to_string(&monitor_log).unwrap();
    assert!(text.contains("\"resumed\":true"), "{text}");
    signal(&mon, SIGTERM);
    assert_eq!(wait_with_limit(&mut mon, Duration::from_secs(20)).code(), Some(0));

    plant_break(&db);
    break_fails_readiness_only(&mut follower, &log, port, "/readyz", "/livez");
}

#[test]
fn a_key_an_acl_lets_others_read_is_refused_by_who_reads_it() {
    let dir = TempDir::new().unwrap();
    let (key, _) = keygen(dir.path(), "acl/k", "head.key");
    let check = |extra: &[(&str, &str)]| {
        let mut cmd = bin();
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.args([
            "check",
            "--sink",
            "stdout:",
            "--origin",
            "acl/agentrt",
            "--signing-key",
            path_str(&key),
        ])
        .output()
        .unwrap()
    };
    ok(&check(&[]), "a 0600 key");
    // Another user granted read by an ACL: refused, named.
    setfacl(&["-m", "u:12345:r"], &key);
    let out = check(&[]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("user 12345 (ACL) can read it"),
        "{}",
        stdout(&out)
    );
    // The same file in a credentials directory others cannot enter: systemd's hand-over.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = check(&[("CREDENTIALS_DIRECTORY", path_str(dir.path()))]);
    ok(&out, "a credential in $CREDENTIALS_DIRECTORY");
    // The mode alone, with no ACL: the group.
    setfacl(&["-b"], &key);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = check(&[]);
    assert!(
        stdout(&out).contains("group or others (mode 640) can read it"),
        "{}",
        stdout(&out)
    );

    // A credentials directory a group may enter is no credentials directory.
    let creds = dir.path().join("creds");
    std::fs::create_dir(&creds).unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (inside, _) = keygen(&creds, "acl/k", "in.key");
    std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o440)).unwrap();
    let check_inside = || {
        bin()
            .env("CREDENTIALS_DIRECTORY", &creds)
            .args([
                "check",
                "--sink",
                "stdout:",
                "--origin",
                "acl/agentrt",
                "--signing-key",
                path_str(&inside),
            ])
            .output()
            .unwrap()
    };
    ok(&check_inside(), "a 0440 credential in a private directory");
    setfacl(&["-m", "g:4242:rx"], &creds);
    let out = check_inside();
    assert_eq!(code(&out), 1, "a group may enter: {}", stdout(&out));
    setfacl(&["-b"], &creds);
    // A hard link from outside makes the credential reachable elsewhere.
    let outside = dir.path().join("outside.key");
    std::fs::hard_link(&inside, &outside).unwrap();
    let out = check_inside();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("other 1 hard link(s)"), "{}", stdout(&out));
    std::fs::remove_file(&outside).unwrap();
    // A key another user owns: that user can read it.
    std::os::unix::fs::chown(&inside, Some(12345), None).unwrap();
    let out = check_inside();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).contains("user 12345 (its owner)"), "{}", stdout(&out));
}
