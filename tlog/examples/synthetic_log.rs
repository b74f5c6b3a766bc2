//! Writes a synthetic transparency log of N entries in the file anchor
//! store's layout, for `scripts/bench` to time `chainship prove` at sizes
//! no benchmark database reaches (10M entries: a 3.5 GB database).
//!
//! `cargo run --release -p chainship-tlog --example synthetic_log -- N DIR ORIGIN`
//! writes `DIR/ORIGIN/tile/<L>/...` (hash tiles only: `prove` reads no entry
//! bundle) and `DIR/ORIGIN/checkpoints/<N>`, a checkpoint with a placeholder
//! signature line (so use `prove` without `--trusted-key` on it).

use std::path::Path;

use base64::Engine;
use chainship_tlog::tiles::{Tile, TileBuilder};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, n, dir, origin] = args.as_slice() else {
        eprintln!("usage: synthetic_log N DIR ORIGIN");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("N is a number");
    let log = Path::new(dir).join(origin);
    let mut builder = TileBuilder::default();
    let mut out: Vec<Tile> = Vec::new();
    let write = |tiles: &mut Vec<Tile>| {
        for t in tiles.drain(..).filter(|t| !t.path.starts_with("tile/entries/")) {
            let path = log.join(&t.path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t.data).unwrap();
        }
    };
    for i in 0..n {
        builder.push(format!("{i:064x}").as_bytes(), &mut out);
        if out.len() > 1024 {
            write(&mut out);
        }
    }
    out.extend(builder.partial_tiles());
    write(&mut out);
    let b64 = base64::engine::general_purpose::STANDARD;
    let note = format!(
        "{origin}\n{n}\n{}\n\n\u{2014} synthetic {}\n",
        b64.encode(builder.root()),
        b64.encode([0u8; 68])
    );
    let checkpoints = log.join("checkpoints");
    std::fs::create_dir_all(&checkpoints).unwrap();
    std::fs::write(checkpoints.join(format!("{n:020}")), &note).unwrap();
    std::fs::write(log.join("checkpoint"), &note).unwrap();
    println!("{n} entries, root {}", b64.encode(builder.root()));
}
