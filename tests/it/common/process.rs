//! Processes: signals, waiting within a limit, killing on drop, probing a
//! port, and the kill -9 loop.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Sends a signal to a child process.
pub fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) with a pid we own; no memory is touched.
    let rc = unsafe { libc_kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({}, {sig}) failed", child.id());
}

unsafe extern "C" {
    #[link_name = "kill"]
    pub(super) fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub const SIGKILL: i32 = 9;

pub const SIGTERM: i32 = 15;

pub const SIGSTOP: i32 = 19;

pub const SIGCONT: i32 = 18;

/// Waits for a child, at most `limit`; panics (after killing it) past that.
pub fn wait_with_limit(child: &mut std::process::Child, limit: std::time::Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("process {} did not exit within {limit:?}", child.id());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A child process that is killed if the test ends before it does (a
/// failing assertion must not leave writers or followers running).
pub struct KillOnDrop(pub std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A free TCP port on loopback (for `--metrics-addr`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from a port on loopback (a follower's `--metrics-addr`),
/// connecting and reading within `limit` each: (status, body), or None
/// while nothing answers there.
pub fn http_get(port: u16, path: &str, limit: Duration) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), limit).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Some((status, body.unwrap_or_default()))
}

/// The value of one series in a /metrics body, named with its labels as
/// exported (`chainship_sink_errors_total{kind="transient"}`).
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

/// A small xorshift generator: spread-out moments without a crate.
pub struct XorShift(u64);

impl XorShift {
    /// The same moments on every run.
    pub fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    /// Other moments on every run.
    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        XorShift::new(nanos)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The kill -9 loop: `rounds` times, starts a follower (`start`), lets it
/// run for a moment drawn from `delay_ms` by `rng`, checks it is still
/// running, SIGKILLs it and reaps it, then records `after()` (the cursor,
/// the sink's length). Returns the records, one a round.
pub fn kill_9_loop<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    start: impl FnMut() -> std::process::Child,
    after: impl FnMut() -> T,
) -> Vec<T> {
    kill_rounds(rounds, rng, delay_ms, start, after, false)
}

/// The kill -9 loop for followers whose start-up time depends on the
/// machine's load (Kafka: fencing, reading the tail back): every other
/// round kills at any moment (start-up included), and the rounds between
/// first wait until `after()` changes (a batch delivered in that life,
/// within 60 s, or the test fails), then kill within `delay_ms`, so kills
/// also land mid-export however slow the start.
pub fn kill_9_loop_mid_export<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    start: impl FnMut() -> std::process::Child,
    after: impl FnMut() -> T,
) -> Vec<T> {
    kill_rounds(rounds, rng, delay_ms, start, after, true)
}

fn kill_rounds<T: PartialEq>(
    rounds: usize,
    rng: &mut XorShift,
    delay_ms: std::ops::Range<u64>,
    mut start: impl FnMut() -> std::process::Child,
    mut after: impl FnMut() -> T,
    progress_first: bool,
) -> Vec<T> {
    let mut records = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let delay = delay_ms.start + rng.below(delay_ms.end - delay_ms.start);
        let wait_for_progress = progress_first && round % 2 == 1;
        let before = wait_for_progress.then(&mut after);
        let mut child = KillOnDrop(start());
        if let Some(before) = before {
            let deadline = Instant::now() + Duration::from_secs(60);
            while after() == before {
                assert!(
                    Instant::now() < deadline,
                    "kill {round}: no batch delivered within 60 s of start"
                );
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("kill {round}: the follower stopped on its own ({status}), before delivering");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::thread::sleep(Duration::from_millis(delay));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("kill {round}: the follower stopped on its own after {delay} ms ({status}), before the kill");
        }
        signal(&child, SIGKILL);
        child.wait().unwrap();
        records.push(after());
    }
    records
}

/// Every file under `dir`, at any depth (hidden ones too), as full paths.
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for e in std::fs::read_dir(&at).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                pending.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Copies the directory tree `from` to `to` (an anchor store, to tamper with a copy).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
