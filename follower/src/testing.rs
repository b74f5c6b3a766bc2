//! In-process test doubles (as Litestream's `mock/`): a [`MemorySink`] that
//! holds JSON Lines in memory and answers `held` the way every real sink
//! must (records past the trusted head fed to a `HeldCheck`), and a small
//! chain database to resume against. For unit tests that need no service.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chainship_chain::{EventBatch, EventDb, Head, HeldCheck, OpenOptions, PrevHash, event_hash};
use chainship_sinks::{Batch, Sink, SinkError};

/// A sink holding its records in memory, shared with the test that made it.
#[derive(Clone, Default)]
pub struct MemorySink {
    pub lines: Arc<Mutex<Vec<Vec<u8>>>>,
    pub origin: String,
}

impl MemorySink {
    pub fn new(origin: &str) -> Self {
        MemorySink {
            lines: Arc::default(),
            origin: origin.to_owned(),
        }
    }

    /// Plants a line, as someone with write access to the sink could.
    pub fn plant(&self, line: &[u8]) {
        self.lines.lock().unwrap().push(line.to_vec());
    }
}

#[async_trait]
impl Sink for MemorySink {
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        let mut check = HeldCheck::new(&self.origin, after);
        for (i, line) in self.lines.lock().unwrap().iter().enumerate() {
            let skip = chainship_chain::record::Record::seq_of(line).is_some_and(|s| s <= check.after_seq());
            if !skip {
                check
                    .feed(line, &|| format!("memory line {}", i + 1))
                    .map_err(SinkError::integrity)?;
            }
        }
        Ok(check.head())
    }

    async fn holds(&mut self, head: Head) -> Result<bool, SinkError> {
        let lines = self.lines.lock().unwrap();
        Ok(lines.iter().any(|l| {
            chainship_chain::record::Record::parse(l)
                .is_ok_and(|r| r.seq == head.seq && r.hash.as_bytes() == &head.hash[..])
        }))
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let mut lines = self.lines.lock().unwrap();
        lines.extend(
            batch
                .jsonl
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
        Ok(())
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        Ok("in memory".into())
    }

    fn describe(&self) -> String {
        "memory:".into()
    }
}

/// Writes an agentrt-shaped database with `events` chained events; `salt`
/// changes every payload (another database's chain).
pub fn chain_db(path: &Path, events: u64, salt: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE events (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, step_id TEXT NOT NULL,
         at TEXT NOT NULL, type TEXT NOT NULL, payload_json TEXT NOT NULL, hash TEXT NOT NULL);",
    )
    .unwrap();
    let mut prev: Vec<u8> = Vec::new();
    for seq in 1..=events {
        let payload = format!("{{\"n\":{seq},\"salt\":\"{salt}\"}}");
        let at = "2026-11-30T00:00:00Z";
        let hash = event_hash(&prev, seq, b"r1", b"s", at.as_bytes(), b"step", payload.as_bytes());
        conn.execute(
            "INSERT INTO events VALUES (?1, 'r1', 's', ?2, 'step', ?3, ?4)",
            (seq as i64, at, &payload, std::str::from_utf8(&hash).unwrap()),
        )
        .unwrap();
        prev = hash.to_vec();
    }
}

/// The records of events `first..=last` of `db`, as a sink would hold them.
pub fn records(db: &Path, origin: &str, first: u64, last: u64) -> Batch {
    let db = EventDb::open(db, &OpenOptions::default()).unwrap();
    let mut events = EventBatch::new();
    db.read_page(first - 1, (last - first + 1) as usize, usize::MAX, &mut events)
        .unwrap();
    let stored = db.hash_at(first - 1).unwrap().unwrap_or_default();
    let mut prev = PrevHash::parse(&stored).unwrap();
    let mut batch = Batch::new(origin);
    for event in events.iter() {
        let hash = event.expected_hash(prev.as_bytes());
        batch.push(&event, hash, prev).unwrap();
        prev = PrevHash::of(hash);
    }
    batch
}

/// `SEQ:HASH` of `db` at `seq`.
pub fn head_at(db: &Path, seq: u64) -> Head {
    let db = EventDb::open(db, &OpenOptions::default()).unwrap();
    Head::from_stored(seq, &db.hash_at(seq).unwrap().unwrap()).unwrap()
}
