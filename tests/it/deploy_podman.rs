//! The shipped deployments in real containers: `tests/deploy/podman-run`
//! builds the Dockerfile's final stage with the binary under test on a local
//! Debian base and runs it with podman as docker-compose.yml and the
//! Kubernetes manifest say (users, volumes, read-only mounts), the follower
//! reading while the writer writes, then the nightly verify. Its header
//! lists what podman cannot do from the manifest and what stands in.
//! Needs root and podman (scripts/podman-base installs it): without them the
//! script exits non-zero and the test fails.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use tempfile::TempDir;

/// Both build the image and share the layer cache and the base image: one at a time.
static ONE_RUN: Mutex<()> = Mutex::new(());

fn podman_run(mode: &str) {
    crate::readonly_db::require_root("running the image with podman");
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/deploy/podman-run");
    let out = Command::new(script)
        .arg(mode)
        .arg(env!("CARGO_BIN_EXE_chainship"))
        .arg(dir.path())
        .output()
        .expect("running tests/deploy/podman-run");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let ok = format!("podman-run: {mode} ok");
    assert!(
        out.status.code() == Some(0) && stdout.lines().last() == Some(ok.as_str()),
        "podman-run {mode} exited {:?}:\n{stdout}\n{stderr}",
        out.status.code()
    );
}

#[test]
fn the_compose_services_run_in_the_image_the_follower_reads_the_writers_database() {
    podman_run("compose");
}

#[test]
fn the_kubernetes_pod_runs_under_kube_play_the_sidecar_reads_the_runtimes_database() {
    podman_run("kube");
}
