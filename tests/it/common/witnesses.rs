//! Real witnesses: `aics-witness` (an independent C2SP tlog-witness server,
//! installed by the test script) on loopback; each test starts, stops and
//! rolls back its own instances.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::*;

pub fn aics_witness() -> Command {
    let path = std::env::var("CHAINSHIP_TEST_AICS_WITNESS").unwrap_or_default();
    assert!(
        !path.is_empty(),
        "CHAINSHIP_TEST_AICS_WITNESS is not set: these tests need aics-witness; run them through ./scripts/test"
    );
    Command::new(path)
}

/// One aics-witness instance: its directory, port and key.
pub struct Witness {
    pub dir: TempDir,
    pub port: u16,
    pub vkey: String,
    child: Option<KillOnDrop>,
}

impl Witness {
    /// A witness that knows the log `(origin, log_vkey)` (or no log at all).
    pub fn new(name: &str, log: Option<(&str, &str)>) -> Witness {
        let dir = TempDir::new().unwrap();
        let port = free_port();
        let config = dir.path().join("witness.json");
        let out = aics_witness()
            .args(["init", "-c", path_str(&config), "--name", name])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .output()
            .unwrap();
        assert!(out.status.success(), "aics-witness init: {}", stderr(&out));
        let vkey = stdout(&out).lines().next().unwrap().trim().to_owned();
        if let Some((origin, log)) = log {
            let out = aics_witness()
                .args(["add-log", "-c", path_str(&config), "--origin", origin, "--vkey", log])
                .output()
                .unwrap();
            assert!(out.status.success(), "aics-witness add-log: {}", stderr(&out));
        }
        let mut w = Witness {
            dir,
            port,
            vkey,
            child: None,
        };
        w.start();
        w
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("witness.json")
    }

    pub fn start(&mut self) {
        let child = aics_witness()
            .args(["serve", "-c", path_str(&self.config())])
            .args([
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--log-level",
                "WARNING",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(KillOnDrop(child));
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "aics-witness did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, SIGKILL);
            let _ = child.wait();
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn spec(&self) -> String {
        format!("{}={}", self.url(), self.vkey)
    }
}
