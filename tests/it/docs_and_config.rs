//! Help and docs that must match the program (issue 21, item 7): `config
//! check --for` with a full command path, `log-format` and the key's own
//! line, the chain spec in `docs/`, `--on-break wait` then SIGTERM, a
//! differing duplicate in an export, the demo's temporary directory, and the
//! README's troubleshooting messages. Each test reproduces one of them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use tempfile::TempDir;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path_str(&path).to_owned()
}

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// `config check --json` for `--for COMMAND`: (exit code, settings by key, stdout, stderr).
fn config_check(cfg: &str, command: &str) -> (i32, Vec<(String, serde_json::Value)>, String, String) {
    let out = run(&["config", "check", "--config", cfg, "--for", command, "--json"]);
    let text = stdout(&out);
    let settings = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|j| j["settings"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s["key"].as_str().unwrap_or_default().to_owned(), s))
        .collect();
    (code(&out), settings, text, stderr(&out))
}

fn keys(settings: &[(String, serde_json::Value)]) -> Vec<&str> {
    settings.iter().map(|(k, _)| k.as_str()).collect()
}

/// Item 1: `--for 'anchor verify'` (the command's own help example) shows
/// `anchor verify`'s settings, not plain `verify`'s.
#[test]
fn config_check_for_takes_the_full_command_path() {
    let dir = TempDir::new().unwrap();
    let cfg = write(
        dir.path(),
        "c.toml",
        "db = \"audit.db\"\norigin = \"prod/agentrt\"\nanchor = \"file:/mnt/anchors\"\nmax-age = \"2h\"\nhead = \"1:329225706e099dcf734d05b51f7cc508a36511efdf614f97d2918cf3b2a04249\"\n",
    );

    let (status, settings, text, err) = config_check(&cfg, "anchor verify");
    assert_eq!(status, 0, "{text}{err}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["command"], "anchor verify");
    let keys = keys(&settings);
    assert!(keys.contains(&"max-age") && keys.contains(&"anchor"), "{keys:?}");
    assert!(
        !keys.contains(&"head"),
        "plain verify's --head shown for anchor verify: {keys:?}"
    );

    // Plain verify: its own --head, no anchor settings.
    let (status, settings, text, _) = config_check(&cfg, "verify");
    assert_eq!(status, 0, "{text}");
    let keys = self::keys(&settings);
    assert!(keys.contains(&"head") && !keys.contains(&"max-age"), "{keys:?}");

    // `anchor list` has no --db and no --max-age.
    let (_, settings, text, _) = config_check(&cfg, "anchor list");
    let keys = self::keys(&settings);
    assert!(
        keys.contains(&"anchor") && !keys.contains(&"max-age") && !keys.contains(&"db"),
        "{text}"
    );

    // An unknown name, or a group that is not a command: exit 2 naming the valid ones.
    for wrong in ["anchr verify", "anchor", "verify anchor"] {
        let (status, _, _, err) = config_check(&cfg, wrong);
        assert_eq!(status, 2, "{wrong}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        for valid in [
            "follow",
            "check",
            "verify,",
            "anchor verify",
            "anchor list",
            "verify-export",
        ] {
            assert!(err.contains(valid), "{wrong}: {valid} not listed: {err}");
        }
    }
}

/// Item 2: `log-format` (global) is shown, and a bad key inside `[kafka]`
/// is reported at its own line, not the table header's.
#[test]
fn config_check_shows_log_format_and_a_table_key_on_its_own_line() {
    let dir = TempDir::new().unwrap();
    let cfg = write(
        dir.path(),
        "a.toml",
        "origin = \"prod/agentrt\"\nlog-format = \"json\"\n",
    );
    let (_, settings, text, _) = config_check(&cfg, "follow");
    let (_, log_format) = settings
        .iter()
        .find(|(k, _)| k == "log-format")
        .unwrap_or_else(|| panic!("log-format not shown: {text}"));
    assert_eq!(log_format["values"][0], "json");
    assert_eq!(log_format["source"], format!("{cfg}:2"));
    // Shown for every command, with its default when the file says nothing.
    let plain = write(dir.path(), "b.toml", "origin = \"prod/agentrt\"\n");
    let (_, settings, text, _) = config_check(&plain, "anchor verify");
    let (_, log_format) = settings.iter().find(|(k, _)| k == "log-format").expect(&text);
    assert_eq!(
        (&log_format["values"][0], &log_format["source"]),
        (&"text".into(), &"default".into())
    );

    // The refused key is on line 5; the [kafka] header on line 2.
    let kafka = write(
        dir.path(),
        "k.toml",
        "origin = \"prod/agentrt\"\n[kafka]\n\"compression.type\" = \"zstd\"\n\n\"acks\" = \"1\"\n",
    );
    let out = run(&["config", "check", "--config", &kafka]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(err.starts_with(&format!("chainship: {kafka}:5: kafka.acks: ")), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A value that is not a plain one, deeper in the table: its own line too.
    let nested = write(
        dir.path(),
        "n.toml",
        "[kafka]\n\"linger.ms\" = 5\n\"sasl.mechanisms\" = [\"PLAIN\"]\n",
    );
    let out = run(&["config", "check", "--config", &nested]);
    assert_eq!(
        stderr(&out).trim(),
        format!("chainship: {nested}:3: kafka.sasl.mechanisms: must be a plain value")
    );
    // Each [kafka] setting's source is its own line.
    let good = write(
        dir.path(),
        "g.toml",
        "origin = \"prod/agentrt\"\n[kafka]\n\n\"linger.ms\" = 5\n",
    );
    let (_, settings, text, _) = config_check(&good, "follow");
    let (_, opt) = settings.iter().find(|(k, _)| k == "kafka-opt").expect(&text);
    assert_eq!(opt["source"], format!("{good}:4"));
}

/// Item 3: the spec the README points to is in the repository, with
/// chainship's additions, and every README reference points to it.
#[test]
fn the_chain_spec_is_in_docs_and_the_readme_points_there() {
    let spec = repo_file("docs/chain-format.md");
    assert!(spec.starts_with("# The event chain\n"), "the spec, verbatim, first");
    for section in [
        "## The hash",
        "## What a break is",
        "## What chainship adds",
        "`b64`",
        "origin segment",
    ] {
        assert!(spec.contains(section), "docs/chain-format.md lacks {section:?}");
    }
    let readme = repo_file("README.md");
    assert!(
        !readme.contains("shared/chain-format.md"),
        "README still points to shared/"
    );
    let mentions = readme.matches("chain-format.md").count();
    assert!(mentions > 0, "README does not point to the spec");
    assert_eq!(
        readme.matches("docs/chain-format.md").count(),
        mentions,
        "every README reference is docs/chain-format.md"
    );

    // The origin segment examples are what chainship computes.
    let (_, origins) = spec.split_once("### The origin segment").unwrap();
    let mut examples = 0;
    for pair in origins.split(", ").flat_map(|p| p.split(": ")) {
        let ticks: Vec<&str> = pair.split('`').collect();
        if let [_, from, arrow, to, ..] = ticks.as_slice()
            && arrow.trim() == "→"
        {
            assert_eq!(chainship_chain::origin_segment(from), *to, "{pair}");
            examples += 1;
        }
    }
    assert!(examples >= 2, "no origin segment example found");
}

/// The backticked value after `label ` in a sentence (`step_id empty` is "").
fn field(text: &str, label: &str) -> String {
    if text.contains(&format!("{label} empty")) {
        return String::new();
    }
    let (_, rest) = text
        .split_once(&format!("{label} `"))
        .unwrap_or_else(|| panic!("no {label} in {text:?}"));
    rest.split('`').next().unwrap().to_owned()
}

/// Splits concatenated netstrings (`5:hello,`) into their values.
fn netstrings(mut bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let colon = bytes.iter().position(|b| *b == b':').expect("a netstring length");
        let len: usize = std::str::from_utf8(&bytes[..colon]).unwrap().parse().unwrap();
        out.push(&bytes[colon + 1..colon + 1 + len]);
        assert_eq!(bytes[colon + 1 + len], b',', "a netstring ends with a comma");
        bytes = &bytes[colon + 2 + len..];
    }
    out
}

fn hex(h: [u8; 64]) -> String {
    String::from_utf8(h.to_vec()).unwrap()
}

/// Every worked example's hash in docs/chain-format.md, recomputed by the
/// library from what the document itself says: seq 1 from its netstring
/// bytes, seq 2 from its description, seq 3 from its exported record.
#[test]
fn every_worked_example_hash_in_the_spec_recomputes() {
    let spec = repo_file("docs/chain-format.md");
    let stated: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("hash = `")?.strip_suffix('`'))
        .collect();
    assert_eq!(stated.len(), 3, "the spec's worked examples: {stated:?}");

    // Seq 1: the bytes hashed, as shown.
    let shown = spec
        .lines()
        .find(|l| l.starts_with("0:,1:1,"))
        .expect("seq 1's hashed bytes");
    let parts = netstrings(shown.as_bytes());
    let [prev, seq, run_id, step_id, at, kind, payload] = parts.as_slice() else {
        panic!("seven netstrings: {shown}")
    };
    assert_eq!((*prev, *seq), (&b""[..], &b"1"[..]));
    let h1 = chainship_chain::event_hash(prev, 1, run_id, step_id, at, kind, payload);
    assert_eq!(hex(h1), stated[0]);
    // The description of seq 1 says the same as its bytes.
    let described = spec.lines().find(|l| l.starts_with("Event seq 1:")).unwrap();
    for (label, value) in [("run_id", run_id), ("step_id", step_id), ("at", at), ("type", kind)] {
        assert_eq!(field(described, label).as_bytes(), *value, "{label}");
    }
    assert_eq!(field(described, "payload_json").as_bytes(), *payload);

    // Seq 2 from its description, chained to seq 1.
    let described = spec.lines().find(|l| l.starts_with("Event seq 2:")).unwrap();
    let f = |label| field(described, label);
    let h2 = chainship_chain::event_hash(
        &h1,
        2,
        f("run_id").as_bytes(),
        f("step_id").as_bytes(),
        f("at").as_bytes(),
        f("type").as_bytes(),
        f("payload_json").as_bytes(),
    );
    assert_eq!(hex(h2), stated[1]);

    // Seq 3: the exported record with a base64 field, read as any consumer would.
    let (_, block) = spec.split_once("```json\n").expect("the record example");
    let line = block.lines().next().unwrap();
    let record = chainship_chain::record::Record::parse(line.as_bytes()).unwrap();
    assert_eq!(record.b64, ["payload_json"]);
    assert_eq!(record.prev_hash, hex(h2), "it follows seq 2");
    assert_eq!(hex(record.expected_hash()), record.hash);
    assert_eq!(record.hash, stated[2]);
    let payload = record.field_bytes("payload_json").unwrap();
    assert!(
        std::str::from_utf8(&payload).is_err(),
        "the example's payload is not UTF-8"
    );
    assert!(
        spec.contains(&format!("the {} bytes", payload.len())),
        "the stated length is the payload's"
    );
}

/// The spec's Merkle tree example, recomputed by the tree crate from the
/// entries the document names: the leaf, the root and the checkpoint text.
#[test]
fn the_spec_tree_example_recomputes() {
    let spec = repo_file("docs/chain-format.md");
    let (_, example) = spec.split_once("The tree of the two events").expect("the tree example");
    let entries: Vec<&str> = example
        .lines()
        .next()
        .unwrap()
        .split('`')
        .filter(|p| p.len() == 64)
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    let stated = |label: &str| {
        example
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{label} = `"))?.strip_suffix('`'))
            .unwrap_or_else(|| panic!("no {label} line"))
    };
    let leaf = chainship_tlog::leaf_hash(entries[0].as_bytes());
    assert_eq!(hex::encode(leaf), stated("leaf 0"));
    let root = chainship_tlog::tiles::root_of_entries(entries.iter().map(|e| e.as_bytes()));
    assert_eq!(hex::encode(root), stated("root"));
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(root);
    assert!(
        example.contains(&format!("```text\nprod-eu1/agentrt\n2\n{b64}\n```")),
        "{example}"
    );
}

/// Item 4: `--on-break wait`, then SIGTERM: exit 1 (the chain is still
/// broken), and the README says so.
#[test]
fn on_break_wait_then_sigterm_exits_1_as_the_readme_says() {
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "brk.db", 300);
    tamper(&db)
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 120", [])
        .unwrap();
    let out = dir.path().join("out.jsonl");
    let mut follower = KillOnDrop(
        bin()
            .args([
                "follow",
                "--db",
                path_str(&db),
                "--origin",
                "brk/agentrt",
                "--from-start",
            ])
            .args(["--sink", &format!("file:{}", path_str(&out))])
            .args(["--cursor", path_str(&dir.path().join("cursor")), "--on-break", "wait"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Wait until it says it is waiting for an operator.
    let mut lines = BufReader::new(follower.stderr.take().unwrap()).lines();
    let waiting = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("the chain broke: serving metrics and waiting for an operator"));
    assert!(waiting, "the follower never said it was waiting");
    assert!(follower.try_wait().unwrap().is_none(), "--on-break wait keeps running");
    signal(&follower, SIGTERM);
    let status = wait_with_limit(&mut follower, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "a broken chain stays a failure after SIGTERM");
    assert_eq!(
        reverify_jsonl(&out, "brk/agentrt").0,
        119,
        "nothing past the last good event"
    );

    // The book's follow page says the same.
    let readme = repo_file("docs/src/reference/follow.md");
    let bullet = readme
        .split("\n- ")
        .find(|b| b.starts_with("On a chain break"))
        .expect("the follow page's chain break bullet");
    let bullet = bullet.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        bullet.contains("`--on-break wait` keeps serving metrics until an operator stops it, then exits 1"),
        "{bullet}"
    );
}

/// A verify-export of `copy`, as (exit code, stdout, JSON).
fn verify_export(copy: &Path, anchors: &Path, verifier: &str, origin: &str) -> (i32, String, serde_json::Value) {
    let args = |json: bool| {
        let mut a = vec![
            "verify-export".to_owned(),
            "--from".into(),
            format!("file:{}", path_str(copy)),
            "--origin".into(),
            origin.into(),
            "--anchor".into(),
            format!("file:{}", path_str(anchors)),
            "--trusted-key".into(),
            verifier.into(),
        ];
        if json {
            a.push("--json".into());
        }
        a
    };
    let text = bin().args(args(false)).output().unwrap();
    let json = bin().args(args(true)).output().unwrap();
    assert_eq!(code(&text), code(&json));
    (
        code(&text),
        stdout(&text),
        serde_json::from_slice(&json.stdout).unwrap(),
    )
}

/// Item 5: a copy holding one seq twice with different contents (the second
/// copy altered, its hash field kept): altered and a differing duplicate,
/// never "identical".
#[test]
fn verify_export_never_calls_a_differing_duplicate_identical() {
    const ORIGIN: &str = "dup/agentrt";
    let dir = TempDir::new().unwrap();
    let db = generate(dir.path(), "audit.db", 200);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let (key, verifier) = keygen(dir.path(), "dup/chainship", "head.key");
    let export = dir.path().join("events.jsonl");
    let out = bin()
        .args([
            "follow",
            "--once",
            "--from-start",
            "--db",
            path_str(&db),
            "--origin",
            ORIGIN,
        ])
        .args(["--sink", &format!("file:{}", path_str(&export))])
        .args(["--cursor", path_str(&dir.path().join("cursor")), "--batch-size", "50"])
        .args(["--anchor", &format!("file:{}", path_str(&anchors))])
        .args(["--signing-key", path_str(&key)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let text = std::fs::read_to_string(&export).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Seq 80 again right after itself, with another payload_json and the same hash field.
    let mut record: serde_json::Value = serde_json::from_str(lines[79]).unwrap();
    assert_eq!(record["seq"], 80);
    record["payload_json"] = "{\"decision\":\"deny\"}".into();
    let mut copy_lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    copy_lines.insert(80, record.to_string());
    let copy = dir.path().join("copy.jsonl");
    std::fs::write(&copy, copy_lines.join("\n") + "\n").unwrap();

    let (status, text, json) = verify_export(&copy, &anchors, &verifier, ORIGIN);
    assert_eq!(status, 1, "{text}");
    assert!(!text.to_lowercase().contains("identical"), "called identical:\n{text}");
    assert_eq!(json["identical_duplicates"], 0, "{json}");
    assert!(
        !json["warnings"].to_string().to_lowercase().contains("identical"),
        "{json}"
    );
    let kinds: Vec<(String, u64)> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64().unwrap_or(0)))
        .collect();
    assert!(kinds.contains(&("duplicate".into(), 80)), "{kinds:?}");
    assert!(kinds.contains(&("altered".into(), 80)), "{kinds:?}");

    // A true copy of a record still is only a warning.
    let mut same = lines.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    same.insert(80, lines[79].to_owned());
    std::fs::write(&copy, same.join("\n") + "\n").unwrap();
    let (status, text, json) = verify_export(&copy, &anchors, &verifier, ORIGIN);
    assert_eq!(status, 0, "{text}");
    assert_eq!(json["identical_duplicates"], 1);
    assert!(text.contains("warning: duplicate: 1 identical record"), "{text}");
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
}

/// Item 6: `demo` without `--dir` removes its temporary directory, when it
/// succeeds and when it fails midway (a writer and a follower running).
#[test]
fn demo_without_dir_leaves_nothing_behind() {
    let tmp = TempDir::new().unwrap();
    let out = bin()
        .args(["demo", "--writer-for", "1s"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains(path_str(tmp.path())),
        "it worked under TMPDIR: {}",
        stdout(&out)
    );
    assert_eq!(entries(tmp.path()), Vec::<PathBuf>::new(), "left behind");

    // Failing midway: a config file makes the demo's own `verify` step fail
    // while the follower it started is still running.
    let cfg_dir = TempDir::new().unwrap();
    let cfg = write(cfg_dir.path(), "c.toml", &format!("head = \"1:{}\"\n", "0".repeat(64)));
    let out = bin()
        .args(["demo", "--writer-for", "1s"])
        .env("TMPDIR", tmp.path())
        .env("CHAINSHIP_CONFIG", &cfg)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("demo: verify failed unexpectedly"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        entries(tmp.path()),
        Vec::<PathBuf>::new(),
        "left behind after a failure"
    );

    // Ctrl-C (SIGINT to the demo alone) after step 1, and a reader of its
    // output that goes away after one line: it stops and still cleans up.
    for (how, expected) in [("SIGINT", 130), ("closed stdout", 141)] {
        let mut demo = KillOnDrop(
            bin()
                .args(["demo", "--writer-for", "2s"])
                .env("TMPDIR", tmp.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
        if how == "SIGINT" {
            let step_1 = lines.by_ref().map_while(Result::ok).any(|l| l.starts_with("1. key"));
            assert!(step_1, "the demo never finished step 1");
            signal(&demo, 2);
            lines.by_ref().for_each(drop); // read on: the reader stays
        } else {
            assert!(lines.next().is_some());
        }
        drop(lines);
        let status = wait_with_limit(&mut demo, Duration::from_secs(60));
        assert_eq!(status.code(), Some(expected), "{how}");
        assert_eq!(entries(tmp.path()), Vec::<PathBuf>::new(), "left behind after {how}");
    }
}

/// The literal parts of a README quote, around its placeholders (`PATH`,
/// `N`, any upper-case word, and `...`).
fn literal_parts(quote: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut word = String::new();
    let flush = |word: &mut String, parts: &mut Vec<String>| {
        let placeholder = !word.is_empty() && word.chars().all(|c| c.is_ascii_uppercase());
        if placeholder {
            parts.push(String::new());
        } else {
            parts.last_mut().unwrap().push_str(word);
        }
        word.clear();
    };
    for c in quote.replace("...", "\u{1}").chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut parts);
        if c == '\u{1}' {
            parts.push(String::new());
        } else {
            parts.last_mut().unwrap().push(c);
        }
    }
    flush(&mut word, &mut parts);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Whether `text` holds every literal part of `quote`, in order.
fn says(text: &str, quote: &str) -> bool {
    let mut rest = text;
    literal_parts(quote).iter().all(|part| match rest.find(part.as_str()) {
        Some(at) => {
            rest = &rest[at + part.len()..];
            true
        }
        None => false,
    })
}

/// Item 7: every message quoted in the book's Troubleshooting page is
/// one the program prints: reproduced where that needs no service, and for
/// the Kafka one found as written in the source.
#[test]
fn troubleshooting_messages_are_what_the_program_prints() {
    let page = repo_file("docs/src/guides/troubleshooting.md");
    let (_, section) = page.split_once("# Troubleshooting\n").unwrap();
    let quotes: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("- `"))
        .flat_map(|l| {
            let head = &l[..l.find("`: ").expect("- `MESSAGE`: what to do") + 1];
            head.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(quotes.len() >= 6, "{quotes:?}");

    let dir = TempDir::new().unwrap();
    let p = |name: &str| dir.path().join(name);
    let follow = |db: &Path, sink: &str, cursor: &str, extra: &[&str]| {
        let out = bin()
            .args(["follow", "--once", "--db", path_str(db), "--origin", "ts/agentrt"])
            .args(["--sink", &format!("file:{}", path_str(&p(sink)))])
            .args(["--cursor", path_str(&p(cursor))])
            .args(extra)
            .output()
            .unwrap();
        (code(&out), stderr(&out))
    };
    let mut printed = Vec::new();
    let db = generate(dir.path(), "a.db", 100);

    // A first run without a start.
    printed.push(follow(&db, "a.jsonl", "a.cursor", &[]));
    assert_eq!(follow(&db, "a.jsonl", "a.cursor", &["--from-start"]).0, 0);
    // The event at the cursor rewritten; then the database cut below the cursor.
    let rewritten = p("rewritten.db");
    std::fs::copy(&db, &rewritten).unwrap();
    tamper(&rewritten)
        .execute(
            "UPDATE events SET hash = replace(hash, substr(hash, 1, 1), 'f') WHERE seq = 100",
            [],
        )
        .unwrap();
    printed.push(follow(&rewritten, "a.jsonl", "a.cursor", &[]));
    let cut = p("cut.db");
    std::fs::copy(&db, &cut).unwrap();
    tamper(&cut).execute("DELETE FROM events WHERE seq > 60", []).unwrap();
    printed.push(follow(&cut, "a.jsonl", "a.cursor", &[]));
    // The sink holding another database's records; then more than the database.
    let other = generate_with(dir.path(), "other.db", 150, &["--seed", "7"]);
    printed.push(follow(&other, "a.jsonl", "other.cursor", &["--from-start"]));
    printed.push(follow(&cut, "a.jsonl", "cut.cursor", &["--from-start"]));
    // The anchor directory not mounted: export goes on, anchoring says why not.
    let key = keygen(dir.path(), "ts/chainship", "head.key").0;
    let anchors = format!("file:{}", path_str(&p("not-mounted")));
    printed.push(follow(
        &db,
        "b.jsonl",
        "b.cursor",
        &[
            "--from-start",
            "--anchor",
            &anchors,
            "--signing-key",
            path_str(&key),
            "--shutdown-grace",
            "1s",
        ],
    ));
    // Another database followed into a store that keeps this one's tree, same origin and key.
    std::fs::create_dir(p("anchors")).unwrap();
    let store = format!("file:{}", path_str(&p("anchors")));
    let anchored = |db: &Path, cursor: &str, batch: &str| {
        let flags = [
            "--from-start",
            "--anchor",
            &store,
            "--signing-key",
            path_str(&key),
            "--batch-size",
            batch,
        ];
        follow(db, &format!("{cursor}.jsonl"), cursor, &flags)
    };
    assert_eq!(anchored(&db, "t1", "40").0, 0);
    printed.push(anchored(&other, "t2", "70"));
    // The sink emptied under its cursor.
    std::fs::write(p("a.jsonl"), b"").unwrap();
    printed.push(follow(&db, "a.jsonl", "a.cursor", &[]));
    // The Kafka messages need a broker, the hung store a frozen one, the other
    // origin's cursor a saved run state: their messages as the source writes them.
    let sources: String = [
        "sinks/src/kafka/writer.rs",
        "sinks/src/kafka/scan.rs",
        "follower/src/anchoring.rs",
        "follower/src/resume.rs",
    ]
    .iter()
    .map(|f| repo_file(f))
    .collect();

    for quote in &quotes {
        let seen = printed.iter().any(|(_, err)| says(err, quote)) || sources.lines().any(|l| says(l, quote));
        assert!(
            seen,
            "README Troubleshooting quotes {quote:?}, which chainship never prints; it printed:\n{printed:#?}"
        );
    }
}

/// The book under `docs/` builds with no warning, and `mdbook test` passes
/// (every code block is labelled: none is taken for Rust by mistake). Its
/// command examples are run by `examples.rs`, with the README's.
#[test]
fn the_book_builds_without_warnings_and_its_tests_pass() {
    let mdbook = std::env::var("CHAINSHIP_TEST_MDBOOK").unwrap_or_default();
    assert!(
        !mdbook.is_empty(),
        "CHAINSHIP_TEST_MDBOOK is not set: this test needs mdBook; run it through ./scripts/test"
    );
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = tempfile::TempDir::new().unwrap();
    for args in [vec!["build", "docs", "--dest-dir"], vec!["test", "docs", "--dest-dir"]] {
        let out = std::process::Command::new(&mdbook)
            .args(&args)
            .arg(out_dir.path())
            .current_dir(root)
            .output()
            .unwrap();
        let log = format!("{}{}", stdout(&out), stderr(&out));
        assert!(out.status.success(), "mdbook {args:?}:\n{log}");
        assert!(
            !log.contains("[WARN]") && !log.contains("[ERROR]"),
            "mdbook {args:?}:\n{log}"
        );
    }
    assert!(out_dir.path().join("reference/follow.html").exists());
    // The README stays short: what it is, what it guarantees, and links.
    let readme = repo_file("README.md");
    assert!(
        readme.lines().count() < 200,
        "the README has {} lines",
        readme.lines().count()
    );
    for page in [
        "docs/src/SUMMARY.md",
        "docs/src/reference/commands.md",
        "docs/src/guides/production.md",
    ] {
        assert!(
            readme.contains(page.trim_start_matches("docs/src/").split('/').next().unwrap()),
            "{page}"
        );
    }
}
