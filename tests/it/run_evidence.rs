//! The run check: each fault `generate --inject` writes is named by `runs`
//! with its kind, run, step and seq (and a fault-free log has none); a copy
//! gives the same findings as the database; a follower killed and
//! restarted among many open runs raises no false finding and its metrics
//! match `runs`; and a break, altered range or differing range names the
//! runs and side effects it touches.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::common::*;
use rusqlite::Connection;

const ORIGIN: &str = "runs/agentrt";

fn runs_json(args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["runs", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    let json = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (code(&out), json)
}

/// (kind, run, step, seq) of every finding.
fn findings(json: &serde_json::Value) -> Vec<(String, String, String, u64)> {
    json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["run_id"].as_str().unwrap().to_owned(),
                f["step_id"].as_str().unwrap().to_owned(),
                f["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The stored (run_id, step_id, type) of the event at `seq`.
fn event_at(db: &Path, seq: u64) -> (String, String, String) {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT run_id, step_id, type FROM events WHERE seq = ?1",
            [seq as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

#[test]
fn a_generated_log_without_faults_has_no_finding() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate(dir.path(), "clean.db", 20_000);
    let (c, json) = runs_json(&["--db", path_str(&db)]);
    assert_eq!(c, 0, "{}", json["findings"]);
    assert_eq!(json["findings_total"], 0);
    assert_eq!(json["findings_truncated"], false);
    assert_eq!(json["events"], 20_000);
    let runs = json["runs"].as_array().unwrap();
    assert!(runs.len() > 500, "many runs: {}", runs.len());
    let finished = runs.iter().filter(|r| r["status"] == "finished").count();
    assert!(finished + 8 >= runs.len(), "all but the runs still in flight finished");
    let tools: u64 = runs.iter().map(|r| r["tool_calls"].as_u64().unwrap()).sum();
    assert_eq!(json["tool_calls"], tools);
    // Appending continues the same runs: still nothing to report.
    append(&db, 3000);
    let (c, json) = runs_json(&["--db", path_str(&db), "--findings-only"]);
    assert_eq!(
        (c, json["findings_total"].as_u64()),
        (0, Some(0)),
        "{}",
        json["findings"]
    );
}

#[test]
fn each_injected_fault_is_named_with_its_run_step_and_seq() {
    let dir = tempfile::TempDir::new().unwrap();
    // (fault, the type of the event the finding points at)
    for (fault, at_type) in [
        ("unknown-outcome", "step.tool_started"),
        ("executed-twice", "step.tool_started"),
        ("started-without-decision", "step.tool_started"),
        ("event-after-finish", "run.resumed"),
        ("unknown-step", ""),
        ("unrequested-approval", "approval.decided"),
        ("left-running", ""),
    ] {
        let name = format!("{fault}.db");
        let db = generate_with(dir.path(), &name, 6000, &["--inject", &format!("{fault}@2000")]);
        let (c, json) = runs_json(&["--db", path_str(&db), "--findings-only", "--open-after", "2m"]);
        assert_eq!(c, 1, "{fault}: {json}");
        let found = findings(&json);
        assert_eq!(found.len(), 1, "{fault}: exactly one finding: {found:?}");
        let (kind, run_id, step, seq) = &found[0];
        assert_eq!(kind, fault);
        assert!(*seq >= 1990 && *seq < 3000, "{fault}: near the injection: {seq}");
        // The named seq is that run's (and step's) event in the database.
        let (stored_run, stored_step, stored_type) = event_at(&db, *seq);
        assert_eq!(&stored_run, run_id, "{fault}");
        if !step.is_empty() {
            assert_eq!(&stored_step, step, "{fault}");
        }
        if !at_type.is_empty() {
            assert_eq!(stored_type, at_type, "{fault}");
        }
        if fault == "left-running" {
            // The generator writes the silence it needs: found with the defaults too.
            let (c, json) = runs_json(&["--db", path_str(&db), "--findings-only"]);
            assert_eq!((c, findings(&json).len()), (1, 1), "{fault} with defaults: {json}");
        }
        let text = run(&["runs", "--db", path_str(&db), "--findings-only", "--open-after", "2m"]);
        assert!(
            stdout(&text).contains(&format!("{fault} at seq {seq}: run {run_id}")),
            "{}",
            stdout(&text)
        );
    }
}

#[test]
fn a_copy_gives_the_same_findings_and_one_runs_timeline_is_shown() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate_with(dir.path(), "f.db", 4000, &["--inject", "unknown-outcome@1500"]);
    let copy = dir.path().join("copy.jsonl");
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
        .args([
            "--sink",
            &format!("file:{}", path_str(&copy)),
            "--cursor",
            path_str(&dir.path().join("cur")),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (_, from_db) = runs_json(&["--db", path_str(&db)]);
    let (c, from_copy) = runs_json(&["--from", &format!("file:{}", path_str(&copy)), "--origin", ORIGIN]);
    assert_eq!(c, 1);
    assert_eq!(findings(&from_copy), findings(&from_db));
    assert_eq!(from_copy["runs"], from_db["runs"]);

    let (_, _, _, seq) = findings(&from_db)[0].clone();
    let run_id = findings(&from_db)[0].1.clone();
    let (c, one) = runs_json(&["--db", path_str(&db), "--run", &run_id]);
    assert_eq!(c, 1);
    let timeline = one["timeline"].as_array().unwrap();
    assert_eq!(timeline[0]["type"], "run.created");
    assert!(
        timeline
            .iter()
            .any(|e| e["seq"] == seq && e["type"] == "step.tool_started")
    );
    assert_eq!(one["run"]["events"].as_u64(), Some(timeline.len() as u64));
    let (c, none) = runs_json(&["--db", path_str(&db), "--run", "no-such-run"]);
    assert_eq!((c, none["status"].as_str()), (1, Some("nothing checked")));
}

/// The follower's run metrics, scraped: runs open, unknown outcomes, findings by kind.
type RunMetrics = (f64, f64, Vec<(String, f64)>, f64);

fn run_metrics(port: u16) -> Option<RunMetrics> {
    let (status, body) = http_get(port, "/metrics", Duration::from_secs(2))?;
    (status == 200).then_some(())?;
    let kinds = [
        "unknown-outcome",
        "executed-twice",
        "started-without-decision",
        "event-after-finish",
        "unknown-step",
        "unrequested-approval",
        "left-running",
    ];
    let by_kind = kinds
        .iter()
        .map(|k| {
            let v = metric(&body, &format!("chainship_run_findings_total{{kind=\"{k}\"}}")).unwrap_or(-1.0);
            (k.to_string(), v)
        })
        .collect();
    Some((
        metric(&body, "chainship_runs_open")?,
        metric(&body, "chainship_unknown_outcomes")?,
        by_kind,
        metric(&body, "chainship_runs_left_running")?,
    ))
}

#[test]
fn a_follower_killed_among_open_runs_raises_no_false_finding_and_its_metrics_match_runs() {
    let dir = tempfile::TempDir::new().unwrap();
    let injects = [
        "--inject",
        "unknown-outcome@3000",
        "--inject",
        "executed-twice@9000",
        "--inject",
        "started-without-decision@15000",
    ];
    let db = generate_with(
        dir.path(),
        "live.db",
        20_000,
        &[&["--runs", "40"][..], &injects[..]].concat(),
    );
    let (sink, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let life = std::cell::Cell::new(0);
    let start = || {
        life.set(life.get() + 1);
        let log = std::fs::File::create(logs.join(format!("{}.log", life.get()))).unwrap();
        bin()
            .args(["follow", "--from-start", "--db", path_str(&db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&sink)),
                "--cursor",
                path_str(&cursor),
            ])
            .args(["--batch-size", "200", "--poll-interval", "50ms", "--log-format", "json"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let mut rng = XorShift::from_clock();
    kill_9_loop(6, &mut rng, 20..400, start, || {
        std::fs::read_to_string(&cursor).unwrap_or_default()
    });

    // The last life runs to the head with metrics on.
    let port = free_port();
    let log = std::fs::File::create(logs.join("last.log")).unwrap();
    let mut last = KillOnDrop(
        bin()
            .args(["follow", "--from-start", "--db", path_str(&db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&sink)),
                "--cursor",
                path_str(&cursor),
            ])
            .args(["--poll-interval", "50ms", "--log-format", "json"])
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(60));
    let (_, runs) = runs_json(&["--db", path_str(&db), "--findings-only"]);
    let expected_open: u64 = ["open", "waiting", "left running"]
        .iter()
        .map(|s| runs["runs_by_status"][s].as_u64().unwrap_or(0))
        .sum();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let metrics = loop {
        if let Some(m) = run_metrics(port)
            && m.0 == expected_open as f64
        {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "metrics {:?} vs runs {runs}",
            run_metrics(port)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    signal(&last, 15);
    wait_with_limit(&mut last, Duration::from_secs(10));
    // Unknown outcomes: a gauge of those final and those of runs silent now;
    // left running: final ones counted, silent ones a gauge.
    assert_eq!(
        metrics.1,
        runs["findings_by_kind"]["unknown-outcome"].as_f64().unwrap_or(0.0)
    );
    for (kind, value) in &metrics.2 {
        let expected = runs["findings_by_kind"][kind].as_f64().unwrap_or(0.0);
        let value = if kind == "left-running" {
            value + metrics.3
        } else {
            *value
        };
        if kind != "unknown-outcome" {
            assert_eq!(value, expected, "chainship_run_findings_total{{kind={kind}}}");
        }
    }
    assert_eq!(runs["findings_total"], 3, "{runs}");

    // Every finding any life logged is one `runs` names: no restart invented one.
    let named: BTreeSet<(String, u64)> = findings(&runs).into_iter().map(|(k, _, _, s)| (k, s)).collect();
    let mut logged = BTreeSet::new();
    for entry in std::fs::read_dir(&logs).unwrap() {
        for line in std::fs::read_to_string(entry.unwrap().path()).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let (Some(kind), Some(seq)) = (v["kind"].as_str(), v["seq"].as_u64())
                && v["message"].as_str().is_some_and(|m| m.starts_with("run check:"))
            {
                logged.insert((kind.to_owned(), seq));
            }
        }
    }
    assert!(!logged.is_empty(), "the followers logged the findings");
    assert!(logged.is_subset(&named), "logged {logged:?}, runs names {named:?}");
}

/// Each life's account of how it rebuilt the open runs, from its log.
fn rebuilds(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["message"].as_str().is_some_and(|m| {
                m.starts_with("run check: the open runs rebuilt") || m.contains("saved state cannot be used")
            })
        })
        .collect()
}

#[test]
fn a_follower_killed_20_times_under_a_live_writer_restarts_from_its_saved_runs_and_finds_what_a_full_rebuild_finds() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate_with(
        dir.path(),
        "live.db",
        3000,
        &["--runs", "30", "--inject", "unknown-outcome@1500"],
    );
    // The runtime keeps writing (faults among what it writes) while the follower is killed.
    let mut writer = KillOnDrop(
        bin()
            .args(["generate", "--db", path_str(&db), "--append", "--events", "0"])
            .args(["--follow-rate", "400", "--large-every", "0"])
            .args([
                "--inject",
                "executed-twice@4000",
                "--inject",
                "started-without-decision@6000",
            ])
            .args([
                "--inject",
                "unrequested-approval@8000",
                "--inject",
                "event-after-finish@10000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (sink, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let follower = |log: &Path, extra: &[&str]| {
        let log = std::fs::File::create(log).unwrap();
        bin()
            .args(["follow", "--from-start", "--db", path_str(&db), "--origin", ORIGIN])
            .args([
                "--sink",
                &format!("file:{}", path_str(&sink)),
                "--cursor",
                path_str(&cursor),
            ])
            .env("RUST_LOG", "info")
            .args(["--batch-size", "300", "--poll-interval", "20ms", "--log-format", "json"])
            .args(["--runs-save-interval", "100ms"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    };
    let life = std::cell::Cell::new(0);
    let start = || {
        life.set(life.get() + 1);
        follower(&logs.join(format!("{:02}.log", life.get())), &[])
    };
    let mut rng = XorShift::from_clock();
    kill_9_loop(20, &mut rng, 300..1500, start, || {
        std::fs::read_to_string(&cursor).unwrap_or_default()
    });
    // The last fault is written at seq 10,000: on a loaded machine the writer may not be there yet.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let seq_of = |head: String| head.split(':').next().unwrap().parse::<u64>().unwrap();
    while seq_of(db_head(&db)) < 10_100 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never reached seq 10,100"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(&writer, 15);
    wait_with_limit(&mut writer, Duration::from_secs(10));

    // Every restart read only what came after a saved state, and no state was ever found damaged.
    let mut from_state = 0;
    for n in 2..=20 {
        let said = rebuilds(&logs.join(format!("{n:02}.log")));
        assert!(
            said.iter()
                .all(|v| !v["message"].as_str().unwrap().contains("cannot be used")),
            "life {n}: {said:?}"
        );
        from_state += said
            .iter()
            .filter(|v| v["saved_state"].as_u64().is_some_and(|s| s > 0))
            .count();
    }
    assert!(from_state >= 15, "only {from_state} of 19 restarts used a saved state");

    // The last life, from the saved state, runs to the head; then one with the state removed
    // rebuilds from the whole log. Both must find the same, counted the same.
    let caught_up = |name: &str, extra: &[&str]| {
        let port = free_port();
        let log = logs.join(name);
        let mut child = KillOnDrop(follower(
            &log,
            &[&["--metrics-addr", &format!("127.0.0.1:{port}")], extra].concat(),
        ));
        wait_for_cursor(&cursor, &db_head(&db), Duration::from_secs(60));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let metrics = loop {
            if !rebuilds(&log).is_empty()
                && let Some(m) = run_metrics(port)
            {
                break m;
            }
            assert!(std::time::Instant::now() < deadline, "no metrics from {name}");
            std::thread::sleep(Duration::from_millis(100));
        };
        signal(&child, 15);
        wait_with_limit(&mut child, Duration::from_secs(10));
        (metrics, rebuilds(&log))
    };
    let (restored, how) = caught_up("restored.log", &[]);
    assert!(how[0]["saved_state"].as_u64().unwrap() > 0, "{how:?}");
    std::fs::remove_file(dir.path().join("cursor.runs")).unwrap();
    let (rebuilt, how) = caught_up("rebuilt.log", &[]);
    assert_eq!(how[0]["saved_state"].as_u64(), Some(0), "{how:?}");
    assert_eq!(
        restored, rebuilt,
        "(open runs, unknown outcomes, findings by kind, left running)"
    );
    let total: f64 = rebuilt.2.iter().map(|(_, n)| n).sum();
    assert!(total >= 5.0, "the injected faults are found: {rebuilt:?}");
    // The kinds no silence decides are the ones `runs` names over the same log.
    let (_, runs) = runs_json(&["--db", path_str(&db), "--findings-only"]);
    for kind in [
        "executed-twice",
        "started-without-decision",
        "unrequested-approval",
        "event-after-finish",
    ] {
        let expected = runs["findings_by_kind"][kind].as_f64().unwrap_or(0.0);
        let found = rebuilt.2.iter().find(|(k, _)| k == kind).unwrap().1;
        assert_eq!(found, expected, "{kind}: {runs}");
    }
}

/// An anchored export of a generated log, for the break tests.
fn anchored(events: u64) -> Anchored {
    let s = Anchored::new(events, "runs/chainship");
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
        .args([
            "--sink",
            &format!("file:{}", path_str(&s.dir.path().join("events.jsonl"))),
        ])
        .args([
            "--cursor",
            path_str(&s.dir.path().join("cursor")),
            "--batch-size",
            "500",
        ])
        .args(["--anchor", &s.anchor_url(), "--signing-key", path_str(&s.key)])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    s
}

/// The seq, run, step and tool of the first tool start at or after `from`.
fn tool_start_after(db: &Path, from: u64) -> (u64, String, String, String) {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT seq, run_id, step_id, json_extract(payload_json, '$.tool') FROM events
             WHERE type = 'step.tool_started' AND seq >= ?1 ORDER BY seq LIMIT 1",
            [from as i64],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
}

#[test]
fn an_altered_range_names_its_runs_and_the_side_effects_to_reconcile() {
    let s = anchored(3000);
    let (seq, run_id, step, tool) = tool_start_after(&s.db, 2500);
    let altered = s.dir.path().join("altered.db");
    std::fs::copy(&s.db, &altered).unwrap();
    tamper(&altered)
        .execute(
            "UPDATE events SET payload_json = '{\"tool\":\"x\"}' WHERE seq = ?1",
            [seq as i64],
        )
        .unwrap();
    let side_effect = |json: &serde_json::Value| {
        json["affected"]["side_effects"]
            .as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .find(|e| e["run_id"] == run_id.as_str() && e["step_id"] == step.as_str())
            .cloned()
    };

    let out = run(&[
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(&altered),
        "--anchor",
        &s.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&out), 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["affected"]["from"], seq, "{}", json["affected"]);
    assert!(
        json["affected"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["run_id"] == run_id.as_str())
    );
    // The invalid range is that one event (the checkpoint's leaves and the
    // heads vouch for the rest): its run alone, and no side effect after it.
    assert_eq!(
        (json["affected"]["to"].as_u64(), json["affected"]["events"].as_u64()),
        (Some(seq), Some(1)),
        "{}",
        json["affected"]
    );
    assert_eq!(json["affected"]["runs"].as_array().unwrap().len(), 1);
    let (next, _, _, next_tool) = tool_start_after(&s.db, seq + 1);
    let listed = json["affected"]["side_effects"].as_array().unwrap();
    assert!(listed.iter().all(|e| e["seq"] != next), "{listed:?}");
    // The altered start is read as the database now holds it (tool "x").
    assert!(
        listed
            .iter()
            .any(|e| e["seq"] == seq && e["run_id"] == run_id.as_str() && e["tool"] == "x"),
        "{listed:?}"
    );
    let text = run(&[
        "anchor",
        "verify",
        "--db",
        path_str(&altered),
        "--anchor",
        &s.anchor_url(),
        "--origin",
        ORIGIN,
        "--trusted-key",
        &s.verifier,
    ]);
    assert!(stdout(&text).contains("needs reconciliation:"), "{}", stdout(&text));
    assert!(stdout(&text).contains(&format!("run {run_id}")), "{}", stdout(&text));

    // verify names the same range; a read-only tool is no side effect.
    let out = run(&[
        "verify",
        "--json",
        "--db",
        path_str(&altered),
        "--read-only-tool",
        &next_tool,
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["affected"]["from"], seq);
    assert!(
        json["affected"]["side_effects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["tool"] != next_tool.as_str())
    );

    // diff names the changed event's run and the tool the copy says it started.
    let out = run(&[
        "diff",
        "--json",
        "--db",
        path_str(&altered),
        "--from",
        &format!("file:{}", path_str(&s.dir.path().join("events.jsonl"))),
        "--anchor",
        &s.anchor_url(),
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&out), 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let effect = side_effect(&json).expect("the changed tool start is a side effect to reconcile");
    assert_eq!(
        (effect["seq"].as_u64(), effect["tool"].as_str()),
        (Some(seq), Some(tool.as_str()))
    );

    // verify-export of a copy altered at that seq names the same.
    let lines = s.lines();
    let copy = s.dir.path().join("altered.jsonl");
    let mut bad = lines.clone();
    bad[seq as usize - 1] = bad[seq as usize - 1].replacen("\"at\":\"", "\"at\":\"1", 1);
    std::fs::write(&copy, bad.join("\n") + "\n").unwrap();
    let out = run(&[
        "verify-export",
        "--json",
        "--from",
        &format!("file:{}", path_str(&copy)),
        "--anchor",
        &s.anchor_url(),
        "--trusted-key",
        &s.verifier,
    ]);
    assert_eq!(code(&out), 1);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["affected"]["from"], seq);
    assert!(side_effect(&json).is_some(), "{}", json["affected"]);

    // With the run check off, nothing is listed.
    let out = run(&["verify", "--json", "--db", path_str(&altered), "--profile", "none"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(json["affected"].is_null());
}

/// `follow --once` into a file sink, logging at info (the run check says how it rebuilt).
fn follow_once_logged(db: &Path, sink: &Path, cursor: &Path, extra: &[&str]) -> std::process::Output {
    bin()
        .env("RUST_LOG", "info")
        .args(["follow", "--once", "--db", path_str(db), "--origin", ORIGIN])
        .args([
            "--sink",
            &format!("file:{}", path_str(sink)),
            "--cursor",
            path_str(cursor),
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_follower_never_rebuilds_its_runs_from_rows_rewritten_under_its_cursor() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate(dir.path(), "r.db", 500);
    let (sink, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let follow = |extra: &[&str]| follow_once_logged(&db, &sink, &cursor, extra);
    let out = follow(&["--from-start"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // A policy decision rewritten before the cursor, its hash left as it was.
    let (seq,): (i64,) = Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT seq FROM events WHERE type = 'step.policy' AND seq > 100 ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?,)),
        )
        .unwrap();
    tamper(&db)
        .execute(
            "UPDATE events SET payload_json = '{\"outcome\":\"deny\"}' WHERE seq = ?1",
            [seq],
        )
        .unwrap();
    append(&db, 20);
    // A restart carries on from the state saved beside the cursor: the rewritten row is not read.
    let out = follow(&[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("from the state saved at seq 500"),
        "{}",
        stderr(&out)
    );
    // Without that state the open runs are rebuilt from the log, along the chain: refused.
    std::fs::remove_file(dir.path().join("cursor.runs")).unwrap();
    append(&db, 20);
    let out = follow(&[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("the chain breaks at seq {seq} before the resume point")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_follower_stopping_a_few_events_past_its_saved_state_keeps_it_and_a_restart_reads_them_again() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate(dir.path(), "r.db", 500);
    let (sink, cursor) = (dir.path().join("out.jsonl"), dir.path().join("cursor"));
    let follow = |extra: &[&str]| {
        let out = follow_once_logged(&db, &sink, &cursor, extra);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        stderr(&out)
    };
    follow(&["--from-start"]);
    let state = dir.path().join("cursor.runs");
    let saved = std::fs::read(&state).unwrap();
    // 20 more: not worth writing the state again on the way out.
    append(&db, 20);
    let said = follow(&[]);
    assert!(
        said.contains("from the state saved at seq 500 and the 0 event(s)"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(&state).unwrap(),
        saved,
        "the state was written again for 20 events"
    );
    // The next start reads those 20 again, along the chain, and then 5,000 more are worth a save.
    append(&db, 5000);
    let said = follow(&[]);
    assert!(
        said.contains("from the state saved at seq 500 and the 20 event(s)"),
        "{said}"
    );
    append(&db, 1);
    let said = follow(&[]);
    assert!(
        said.contains("from the state saved at seq 5520 and the 0 event(s)"),
        "{said}"
    );
}

#[test]
fn runs_never_calls_a_log_ok_when_it_could_not_read_all_of_it() {
    let dir = tempfile::TempDir::new().unwrap();
    let db = generate(dir.path(), "w.db", 600);
    let copy = dir.path().join("copy.jsonl");
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
        .args([
            "--sink",
            &format!("file:{}", path_str(&copy)),
            "--cursor",
            path_str(&dir.path().join("cur")),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (c, json) = runs_json(&["--from", &format!("file:{}", path_str(&copy)), "--origin", ORIGIN]);
    assert_eq!((c, json["status"].as_str()), (0, Some("ok")), "{json}");

    // A line that is no record, and a record left out.
    let lines: Vec<String> = std::fs::read_to_string(&copy)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    for (name, bad) in [
        (
            "junk",
            [&lines[..100], &["not a record".to_owned()], &lines[100..]].concat(),
        ),
        ("gap", [&lines[..100], &lines[101..]].concat()),
    ] {
        let path = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&path, bad.join("\n") + "\n").unwrap();
        let (c, json) = runs_json(&["--from", &format!("file:{}", path_str(&path)), "--origin", ORIGIN]);
        assert_eq!((c, json["status"].as_str()), (1, Some("not whole")), "{name}: {json}");
        assert_eq!(
            json["findings_total"], 0,
            "{name}: the rules found nothing, yet it is not ok"
        );
    }

    // A row no seq order reaches, in the database.
    tamper(&db)
        .execute(
            "INSERT INTO events VALUES (0, 'r', '', 'x', 'step.tool_started', '{}', 'x')",
            [],
        )
        .unwrap();
    let (c, json) = runs_json(&["--db", path_str(&db)]);
    assert_eq!((c, json["status"].as_str()), (1, Some("not whole")), "{json}");
}

/// Appends `n` chained events in one transaction: tool starts with no
/// step start (each a finding under agentrt's rules), or, with `foreign`,
/// types agentrt does not know whose times wrap backwards.
fn append_many(db: &std::path::Path, n: u64, foreign: bool) {
    let mut conn = tamper(db);
    let tx = conn.transaction().unwrap();
    let (mut seq, mut prev): (i64, String) = tx
        .query_row("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    for i in 0..n {
        seq += 1;
        let (run, step) = (format!("r{}", i % 97), format!("s{i}"));
        let (kind, at) = if foreign {
            (
                format!("custom.kind{}", i % 7),
                format!("2026-01-01T00:{:02}:00Z", 59 - (i % 60)),
            )
        } else {
            ("step.tool_started".to_owned(), "2026-01-01T00:00:00Z".to_owned())
        };
        let payload = r#"{"tool":"http","args":{}}"#;
        let hash = chainship_chain::event_hash(
            prev.as_bytes(),
            seq as u64,
            run.as_bytes(),
            step.as_bytes(),
            at.as_bytes(),
            kind.as_bytes(),
            payload.as_bytes(),
        );
        prev = String::from_utf8(hash.to_vec()).unwrap();
        tx.execute(
            "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            rusqlite::params![seq, run, step, at, kind, payload, prev],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn a_database_that_is_not_the_profiles_does_not_flood_the_log() {
    for foreign in [false, true] {
        let dir = tempfile::TempDir::new().unwrap();
        let db = generate(dir.path(), "f.db", 1);
        append_many(&db, 10_000, foreign);
        let out = bin()
            .env("RUST_LOG", "info")
            .args([
                "follow",
                "--once",
                "--from-start",
                "--db",
                path_str(&db),
                "--origin",
                "f/x",
            ])
            .args(["--sink", &format!("file:{}", path_str(&dir.path().join("out.jsonl")))])
            .args(["--cursor", path_str(&dir.path().join("cursor"))])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let log = stderr(&out);
        let run_lines: Vec<&str> = log.lines().filter(|l| l.contains("run check")).collect();
        // Each finding still counts; the log holds at most a screenful.
        assert!(
            run_lines.len() <= 40,
            "{} run check lines, e.g. {:?}",
            run_lines.len(),
            &run_lines[..5]
        );
        if foreign {
            assert!(
                log.contains("does not look like agentrt's")
                    && log.contains("the profile none turns the run check off"),
                "{log}"
            );
        } else {
            assert!(log.contains("more finding(s) not logged one by one"), "{log}");
            // runs lists the first 10,000 findings and says the list is cut.
            let (c, json) = runs_json(&["--db", path_str(&db), "--findings-only"]);
            let total = json["findings_total"].as_u64().unwrap();
            assert_eq!(c, 1);
            assert!(total > 10_000, "{total}");
            assert_eq!(json["findings"].as_array().unwrap().len(), 10_000);
            assert_eq!(json["findings_truncated"], true);
            let text = stdout(&run(&["runs", "--db", path_str(&db), "--findings-only"]));
            assert!(
                text.contains(&format!("... {} more finding(s)", total - 10_000)),
                "{text}"
            );
        }
    }
}
