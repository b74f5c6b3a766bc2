//! Writes a file anchor store holding a signed head for every seq of a
//! database, as years of a follower publishing a head per small batch would
//! leave it, for `scripts/bench` (`anchor verify` with a million kept heads).
//! Heads only: a store with a checkpoint per head would also hold its tiles.
//!
//! Usage: synthetic_heads DB STORE_DIR ORIGIN SIGNING_KEY [FROM_SEQ [EVERY]]
//!
//! With EVERY, a head only at every EVERY-th seq (and at the last).
//!
//! Heads are written plainly (no fsync: a benchmark fixture, not a store a
//! follower keeps), a millisecond of publication time apart, ending now
//! (so heads added by a later run are published after the earlier ones).

use std::path::Path;
use std::time::{Duration, SystemTime};

use chainship_anchor::SignerKey;
use chainship_anchor::signed_head::SignedHead;
use chainship_anchor::store::head_name;
use chainship_chain::{EventDb, Head, OpenOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, store, origin, key, rest @ ..] = &args[..] else {
        eprintln!("usage: synthetic_heads DB STORE_DIR ORIGIN SIGNING_KEY [FROM_SEQ [EVERY]]");
        std::process::exit(2);
    };
    let from: u64 = rest.first().map_or(1, |s| s.parse().expect("FROM_SEQ is a number"));
    let every: u64 = rest.get(1).map_or(1, |s| s.parse().expect("EVERY is a number"));
    let key = SignerKey::load(Path::new(key)).expect("the signing key");
    let db = EventDb::open(Path::new(db), &OpenOptions::default()).expect("the database");
    let (last, _) = db.head().expect("reading the head").expect("a database with events");
    let dir = Path::new(store).join(origin);
    std::fs::create_dir_all(&dir).expect("the store directory");
    let now = SystemTime::now();
    let keys = [key.shared()];
    let mut written = 0u64;
    db.scan(from.saturating_sub(1), last, &mut |event| {
        if event.seq % every != 0 && event.seq != last {
            return true;
        }
        let head = Head::from_stored(event.seq, event.hash).expect("a stored hash");
        let published = now - Duration::from_millis(last - event.seq);
        let note = SignedHead::new(origin, head, published).sign(&keys).expect("signing");
        std::fs::write(dir.join(head_name(event.seq)), note).expect("writing a head");
        written += 1;
        true
    })
    .expect("reading the database");
    eprintln!("{written} heads written to {}", dir.display());
}
