//! `--record-format ocsf|ecs`: records in a SIEM's schema, checked against
//! the published schemas by independent validators (tests/validators: the
//! OCSF schema as JSON Schema with `jsonschema`; Elastic's ECS field
//! definitions from `@elastic/ecs`), and still evidence: a copy in each
//! format passes `verify-export`, `restore`, `runs` and `check-proof`, a
//! changed mapped field fails naming its seq, and the Kafka and S3 sinks
//! resume on what they hold in any format.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::Value;

const ORIGIN: &str = "siem/agentrt";
const FORMATS: [&str; 3] = ["chainship", "ocsf", "ecs"];

/// An anchored database with every kind of agentrt event the generator
/// writes (denials, approvals, failures) and one event whose bytes are not
/// UTF-8 (carried as base64).
fn scaffold(events: u64) -> Anchored {
    let s = Anchored::new(0, ORIGIN);
    std::fs::remove_file(&s.db).unwrap();
    let db = generate_with(
        s.dir.path(),
        "gen.db",
        events,
        &["--inject", "unknown-outcome@300", "--inject", "executed-twice@700"],
    );
    std::fs::rename(db, &s.db).unwrap();
    append_non_utf8_event(&s.db);
    // Values the mapping must still write valid records for: a time that is
    // none, an approval status the runtime does not write, a step with no id.
    append_event(
        &s.db,
        "run-x",
        "s9",
        "yesterday",
        "approval.decided",
        br#"{"approval_id":"a9","status":"expired"}"#,
    );
    append_event(
        &s.db,
        "run-x",
        "",
        "9999-12-31T23:59:60Z",
        "step.policy",
        br#"{"outcome":"require_approval"}"#,
    );
    s
}

/// `follow --once` of the scaffold's database into `sink` in `format`, heads signed into its store.
fn ship(s: &Anchored, sink: &str, cursor: &str, format: &str, extra: &[&str]) -> std::process::Output {
    let cursor = s.dir.path().join(cursor);
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args(["follow", "--once", "--db", path_str(&s.db), "--origin", ORIGIN])
        .args(["--sink", sink, "--cursor", path_str(&cursor), "--record-format", format])
        .args(["--batch-size", "200", "--s3-batch-events", "200"])
        .args(["--anchor", &s.anchor_url(), "--signing-key", path_str(&s.key)])
        .args(extra);
    if !cursor.exists() {
        cmd.arg("--from-start");
    }
    cmd.output().unwrap()
}

fn file_url(path: &Path) -> String {
    format!("file:{}", path_str(path))
}

/// `chainship COMMAND --json --from COPY --origin O --anchor STORE --trusted-key K ...`.
fn against_copy(s: &Anchored, command: &str, from: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut cmd = bin();
    s3_env(&mut cmd)
        .args([command, "--json", "--from", from, "--origin", ORIGIN])
        .args(["--anchor", &s.anchor_url(), "--trusted-key", &s.verifier])
        .args(extra);
    if from.starts_with("s3://") {
        cmd.args(["--s3-endpoint", &s3_endpoint(), "--s3-path-style"]);
    }
    let out = cmd.output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (code(&out), json, stderr(&out))
}

fn events_in(db: &Path) -> u64 {
    db_head(db).split(':').next().unwrap().parse().unwrap()
}

fn finding_seqs(json: &Value, kind: &str) -> Vec<u64> {
    json["findings"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .filter(|f| f["kind"] == kind)
        .filter_map(|f| f["seq"].as_u64())
        .collect()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The line of `seq` in a copy of any format.
fn line_of(lines: &[String], seq: u64) -> usize {
    lines
        .iter()
        .position(|l| chainship_chain::record::Record::seq_of(l.as_bytes()) == Some(seq))
        .unwrap_or_else(|| panic!("seq {seq} is in the copy"))
}

#[test]
fn records_of_each_profile_validate_against_the_published_schemas() {
    let s = scaffold(3000);
    let total = events_in(&s.db);
    for (format, validate) in [
        ("ocsf", ocsf_validate as fn(&Path) -> std::process::Output),
        ("ecs", ecs_validate),
    ] {
        let copy = s.dir.path().join(format!("{format}.jsonl"));
        let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let checked = validate(&copy);
        assert_eq!(code(&checked), 0, "{format}: {}{}", stdout(&checked), stderr(&checked));
        assert!(
            stdout(&checked).contains(&format!("{format}: {total} valid, 0 invalid")),
            "{format}: {}",
            stdout(&checked)
        );
        // The stdout sink writes the same records.
        let out = bin()
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(&s.db),
                "--origin",
                ORIGIN,
            ])
            .args(["--sink", "stdout:", "--record-format", format])
            .args([
                "--cursor",
                path_str(&s.dir.path().join(format!("{format}.stdout.cursor"))),
            ])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(
            stdout(&out),
            std::fs::read_to_string(&copy).unwrap(),
            "{format}: stdout"
        );

        // The validator is no rubber stamp: one record made invalid for the
        // schema (a type, and a value the schema does not allow) fails it.
        let mut broken = lines(&copy);
        let mut v: Value = serde_json::from_str(&broken[10]).unwrap();
        match format {
            "ocsf" => v["severity_id"] = 7.into(),
            _ => v["event"]["type"] = serde_json::json!(["indicator"]),
        }
        broken[10] = v.to_string();
        let path = s.dir.path().join(format!("{format}-broken.jsonl"));
        write_lines(&path, &broken);
        let checked = validate(&path);
        assert_eq!(code(&checked), 1, "{format}: {}", stdout(&checked));
        assert!(stdout(&checked).contains("line 11: "), "{}", stdout(&checked));
    }
}

#[test]
fn a_copy_in_each_profile_passes_verify_export_and_restore() {
    let s = scaffold(1500);
    let total = events_in(&s.db);
    for format in FORMATS {
        let copy = s.dir.path().join(format!("{format}.jsonl"));
        let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let (c, json, err) = against_copy(&s, "verify-export", &file_url(&copy), &[]);
        assert_eq!(c, 0, "{format}: {json} {err}");
        assert_eq!(json["records"], total, "{format}: {json}");

        let restored = s.dir.path().join(format!("{format}-restored.db"));
        let (c, json, err) = against_copy(
            &s,
            "restore",
            &file_url(&copy),
            &["--out", path_str(&restored), "--include-unanchored"],
        );
        assert_eq!((c, json["events"].as_u64()), (0, Some(total)), "{format}: {json} {err}");
        assert_eq!(db_head(&restored), db_head(&s.db), "{format}");
        let verify = run(&["verify", "--db", path_str(&restored), "--head", &db_head(&s.db)]);
        assert_eq!(code(&verify), 0, "{format}: {}", stdout(&verify));
    }
}

/// One mapped field of `line` changed, for each profile: the fields a SIEM
/// searches (the tool, the run, the outcome, the time).
fn alter_mapped(format: &str, line: &str, field: &str) -> String {
    let mut v: Value = serde_json::from_str(line).unwrap();
    let slot = field.split('.').fold(&mut v, |v, k| &mut v[k]);
    *slot = match slot {
        Value::Number(_) => Value::from(1),
        _ => Value::from("changed"),
    };
    let changed = v.to_string();
    assert_ne!(changed, line, "{format} {field}");
    changed
}

#[test]
fn a_changed_mapped_field_fails_verify_export_restore_and_check_proof_naming_the_seq() {
    let s = scaffold(1200);
    for (format, fields) in [
        ("ocsf", ["api.operation", "actor.session.uid", "time", "metadata.uid"]),
        ("ecs", ["event.action", "labels.run_id", "@timestamp", "event.hash"]),
    ] {
        let copy = s.dir.path().join(format!("{format}.jsonl"));
        let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let good = lines(&copy);
        for (i, field) in fields.into_iter().enumerate() {
            let seq = 400 + i as u64 * 100;
            let mut copy_lines = good.clone();
            let at = line_of(&copy_lines, seq);
            copy_lines[at] = alter_mapped(format, &copy_lines[at], field);
            let path = s.dir.path().join(format!("{format}-{i}.jsonl"));
            write_lines(&path, &copy_lines);

            let (c, json, err) = against_copy(&s, "verify-export", &file_url(&path), &[]);
            assert_eq!(c, 1, "{format} {field}: {json} {err}");
            assert_eq!(finding_seqs(&json, "altered"), vec![seq], "{format} {field}: {json}");
            let message = json["findings"][0]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("seq {seq}: the {format} record's {field}")),
                "{message}"
            );
            // Only the changed record is named: the record it carries keeps its place.
            assert_eq!(json["findings"].as_array().unwrap().len(), 1, "{json}");

            let out = s.dir.path().join(format!("{format}-{i}.db"));
            let (c, json, err) = against_copy(&s, "restore", &file_url(&path), &["--out", path_str(&out)]);
            assert_eq!(
                (c, json["status"].as_str()),
                (1, Some("refused")),
                "{format} {field}: {err}"
            );
            assert_eq!(finding_seqs(&json, "altered"), vec![seq], "{format} {field}: {json}");
            assert!(!out.exists(), "{format} {field}: nothing restored");
        }

        // An altered second copy of a delivered record is named, and is no identical duplicate.
        let mut copy_lines = good.clone();
        let last = copy_lines.last().unwrap().clone();
        copy_lines.push(alter_mapped(format, &last, fields[0]));
        let path = s.dir.path().join(format!("{format}-dup.jsonl"));
        write_lines(&path, &copy_lines);
        let (c, json, err) = against_copy(&s, "verify-export", &file_url(&path), &[]);
        let last_seq = chainship_chain::record::Record::seq_of(last.as_bytes()).unwrap();
        assert_eq!(c, 1, "{format}: {json} {err}");
        assert_eq!(finding_seqs(&json, "altered"), vec![last_seq], "{format}: {json}");
        assert_eq!(json["identical_duplicates"], 0, "{format}: {json}");

        // check-proof: the record as the SIEM holds it is proven, and not once a mapped field changed.
        let seq = 777u64;
        let proof = s.dir.path().join(format!("{format}-{seq}.tlog-proof"));
        let out = bin()
            .args([
                "prove",
                "--anchor",
                &s.anchor_url(),
                "--origin",
                ORIGIN,
                "--seq",
                &seq.to_string(),
            ])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        std::fs::write(&proof, stdout(&out)).unwrap();
        let record = &good[line_of(&good, seq)];
        let check = |record: &str| {
            run(&[
                "check-proof",
                "--proof",
                path_str(&proof),
                "--record",
                record,
                "--trusted-key",
                &s.verifier,
            ])
        };
        let ok = check(record);
        assert_eq!(code(&ok), 0, "{format}: {}{}", stdout(&ok), stderr(&ok));
        let bad = check(&alter_mapped(format, record, fields[1]));
        assert_eq!(code(&bad), 1, "{format}: {}{}", stdout(&bad), stderr(&bad));
        assert!(
            stdout(&bad).contains(&format!(
                "not proven: seq {seq}: altered: seq {seq}: the {format} record's"
            )),
            "{}",
            stdout(&bad)
        );
        // Nor with a key written twice (a SIEM keeping the first would see another run).
        let mut v: Value = serde_json::from_str(record).unwrap();
        let key = fields[1].split('.').next().unwrap();
        let inner = v[key].to_string();
        v.as_object_mut().unwrap().remove(key);
        let twice = v
            .to_string()
            .replacen('{', &format!("{{\"{key}\":{{}},\"{key}\":{inner},"), 1);
        let bad = check(&twice);
        assert_eq!(code(&bad), 1, "{format}: {}{}", stdout(&bad), stderr(&bad));
        assert!(stdout(&bad).contains("appears twice"), "{}", stdout(&bad));
    }
}

#[test]
fn one_copy_may_change_format_between_runs_and_runs_reads_it() {
    let s = scaffold(2000);
    let copy = s.dir.path().join("mixed.jsonl");
    // The follower stops at 1000 events, and goes on in another format, then another.
    let full = s.dir.path().join("full.db");
    std::fs::copy(&s.db, &full).unwrap();
    let conn = tamper(&s.db);
    conn.execute("DELETE FROM events WHERE seq > 1000", []).unwrap();
    drop(conn);
    let out = ship(&s, &file_url(&copy), "cursor", "chainship", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    std::fs::copy(&full, &s.db).unwrap();
    for format in ["ocsf", "ecs"] {
        let out = ship(&s, &file_url(&copy), "cursor", format, &[]);
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        append(&s.db, 300);
    }
    let out = ship(&s, &file_url(&copy), "cursor", "chainship", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let held = lines(&copy);
    let starts = |prefix: &str| held.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(held.len() as u64, events_in(&s.db), "every event once");
    assert!(starts("{\"activity_id\"") > 0 && starts("{\"@timestamp\"") > 0 && starts("{\"origin\"") > 1000);

    let (c, json, err) = against_copy(&s, "verify-export", &file_url(&copy), &[]);
    assert_eq!(c, 0, "{json} {err}");
    // `runs` reads the copy as it reads the database.
    let runs = |args: &[&str]| -> Value {
        let out = bin().args(["runs", "--json"]).args(args).output().unwrap();
        assert!(code(&out) <= 1, "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_db = runs(&["--db", path_str(&s.db)]);
    let from_copy = runs(&["--from", &file_url(&copy), "--origin", ORIGIN]);
    assert_eq!(from_copy["runs"], from_db["runs"]);
    assert_eq!(from_copy["findings"], from_db["findings"]);
    assert!(
        !from_db["findings"].as_array().unwrap().is_empty(),
        "the injected faults are found"
    );
}

#[test]
fn a_torn_profile_record_is_cut_and_a_changed_one_stops_the_follower() {
    let s = scaffold(1000);
    for format in ["ocsf", "ecs"] {
        let copy = s.dir.path().join(format!("{format}.jsonl"));
        let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        // A crash mid-write leaves the last record torn, and the cursor behind it.
        let mut held = lines(&copy);
        let last = held.pop().unwrap();
        let torn = format!("{}\n{}", held.join("\n"), &last[..last.len() / 2]);
        std::fs::write(&copy, torn).unwrap();
        let cursor = s.dir.path().join(format!("{format}.cursor"));
        std::fs::remove_file(&cursor).unwrap();
        let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        assert_eq!(lines(&copy).len() as u64, events_in(&s.db), "{format}");
        let (c, json, err) = against_copy(&s, "verify-export", &file_url(&copy), &[]);
        assert_eq!(c, 0, "{format}: {json} {err}");

        // A record of the sink with a mapped field changed (by someone with
        // write access) is no proof of delivery: the follower stops, exit 1,
        // and writes nothing, with or without its cursor.
        let mut held = lines(&copy);
        let last = held.pop().unwrap();
        let field = if format == "ocsf" {
            "api.operation"
        } else {
            "event.action"
        };
        held.push(alter_mapped(format, &last, field));
        write_lines(&copy, &held);
        let planted = std::fs::read(&copy).unwrap();
        append(&s.db, 5);
        for lose_cursor in [false, true] {
            if lose_cursor {
                std::fs::remove_file(&cursor).unwrap();
            }
            let out = ship(&s, &file_url(&copy), &format!("{format}.cursor"), format, &[]);
            assert_eq!(code(&out), 1, "{format}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(&format!("the {format} record's {field}")),
                "{}",
                stderr(&out)
            );
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                planted,
                "{format}: the sink is untouched"
            );
        }
    }
}

fn kafka_copy(s: &Anchored, topic: &str) -> PathBuf {
    let path = s.dir.path().join(format!("{topic}.jsonl"));
    std::fs::write(&path, kafka_read_partition(topic, 0, ORIGIN)).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_and_s3_sinks_carry_each_profile_and_resume_on_it() {
    let _services = services().await;
    let s = scaffold(1200);
    let topic = kafka_topic("siem-ecs", 1).await;
    let bucket = bucket("siem-ocsf").await;
    let kafka = format!("kafka://{}/{topic}", kafka_addr());
    let s3 = format!("s3://{bucket}/exports");
    let s3_flags = ["--s3-endpoint", &s3_endpoint(), "--s3-path-style"];
    for (sink, format, cursor) in [(&kafka, "ecs", "kafka.cursor"), (&s3, "ocsf", "s3.cursor")] {
        let s = &s;
        let out = tokio::task::block_in_place(|| ship(s, sink, cursor, format, &s3_flags));
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        // Another run, with the cursor lost: the sink's own records (in the
        // profile) say where to go on, and nothing is delivered twice.
        append(&s.db, 150);
        std::fs::remove_file(s.dir.path().join(cursor)).unwrap();
        let out = tokio::task::block_in_place(|| ship(s, sink, cursor, format, &s3_flags));
        assert_eq!(code(&out), 0, "{format}: {}", stderr(&out));
        let (c, json, err) = tokio::task::block_in_place(|| against_copy(s, "verify-export", sink, &[]));
        assert_eq!(c, 0, "{format}: {json} {err}");
        assert_eq!(json["records"], events_in(&s.db), "{format}: every event once: {json}");
    }
    // What the broker holds is valid ECS.
    let copy = tokio::task::block_in_place(|| kafka_copy(&s, &topic));
    let checked = ecs_validate(&copy);
    assert_eq!(code(&checked), 0, "{}", stdout(&checked));
    assert!(stdout(&checked).contains(&format!("ecs: {} valid", events_in(&s.db) - 150)));
}
