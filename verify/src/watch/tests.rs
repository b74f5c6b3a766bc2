use super::*;
use crate::export::tests::{chain, record};

const NOW: SystemTime = SystemTime::UNIX_EPOCH;

fn at(secs: u64) -> SystemTime {
    NOW + Duration::from_secs(secs)
}

fn head(lines: &[String], seq: u64) -> Head {
    let r = Record::parse(lines[seq as usize - 1].as_bytes()).unwrap();
    Head::from_stored(seq, r.hash.as_bytes()).unwrap()
}

fn kinds(f: &[Finding]) -> Vec<(Kind, Option<u64>)> {
    f.iter().map(|f| (f.kind, f.seq)).collect()
}

/// Feeds every line, returning the findings.
fn feed(w: &mut CopyWatch, lines: &[String]) -> Vec<(Kind, Option<u64>)> {
    let mut out = Vec::new();
    for l in lines {
        out.extend(w.feed(l.as_bytes(), "copy", NOW));
    }
    kinds(&out)
}

#[test]
fn an_intact_copy_is_verified_as_heads_come_late_or_early() {
    let c = chain(20);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    assert_eq!(feed(&mut w, &c[..10]), vec![]);
    // A head after its record, and one before it.
    assert_eq!(kinds(&w.trusted_head(head(&c, 8))), vec![]);
    assert_eq!(w.verified().map(|h| h.seq), Some(8));
    assert_eq!(kinds(&w.trusted_head(head(&c, 15))), vec![]);
    assert_eq!(w.verified().map(|h| h.seq), Some(8));
    assert_eq!(feed(&mut w, &c[10..]), vec![]);
    assert_eq!(w.verified().map(|h| h.seq), Some(15));
    let v = w.verdict(Vec::new());
    assert!(v.passed());
    assert_eq!(v.unvouched, Some((16, 20)));
    assert_eq!(v.covered.heads_matched, 2);
}

#[test]
fn a_planted_record_is_named_at_once_and_the_copy_goes_on() {
    let c = chain(12);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    feed(&mut w, &c[..6]);
    // A repeat of seq 4 with another payload, linked to seq 3.
    let prev3 = head(&c, 3).hash_str().to_owned();
    let (forged, _) = record(4, &prev3, "{\"n\":\"forged\"}");
    assert_eq!(feed(&mut w, &[forged]), vec![(Kind::Duplicate, Some(4))]);
    // An identical repeat is no finding.
    assert_eq!(feed(&mut w, &c[4..5]), vec![]);
    assert_eq!(w.verdict(vec![]).covered.identical_duplicates, 1);
    // A record that does not link, in the next seq's place.
    let (bad, _) = record(7, &"0".repeat(64), "{}");
    assert_eq!(feed(&mut w, &[bad]), vec![(Kind::Altered, Some(7))]);
    // The real seq 7 then repeats a seq with other contents, and seq 8 does not link to the plant.
    assert_eq!(
        feed(&mut w, &c[6..8]),
        vec![(Kind::Duplicate, Some(7)), (Kind::Altered, Some(8))]
    );
    // From there the chain is whole again; the kept head at 7 contradicts the plant.
    assert_eq!(feed(&mut w, &c[8..]), vec![]);
    let found = w.trusted_head(head(&c, 7));
    assert_eq!(kinds(&found), vec![(Kind::Fork, Some(7))]);
    let v = w.verdict(found);
    assert_eq!(v.ranges.as_ref().map(|r| (r[0].from, r[0].to)), Some((1, 7)));
    // A later head the copy holds is matched, but trust in the copy ended
    // at the first plant (seq 4): nothing is verified above it.
    assert_eq!(kinds(&w.trusted_head(head(&c, 12))), vec![]);
    assert_eq!(w.state().verified.as_deref(), Some(head(&c, 12).to_string().as_str()));
    assert_eq!(w.verified(), None);
    assert_eq!(w.verdict(vec![]).last_trusted, None);
}

#[test]
fn an_edited_record_is_altered_and_a_rewritten_tail_contradicts_the_head() {
    let c = chain(10);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    feed(&mut w, &c[..4]);
    w.trusted_head(head(&c, 4));
    // Seqs 5.. rewritten with their links recomputed: each record is whole.
    let mut prev = head(&c, 4).hash_str().to_owned();
    let rewritten: Vec<String> = (5..=10)
        .map(|seq| {
            let (line, hash) = record(seq, &prev, "{\"n\":\"rewritten\"}");
            prev = hash;
            line
        })
        .collect();
    assert_eq!(feed(&mut w, &rewritten), vec![]);
    let found = w.trusted_head(head(&c, 8));
    assert_eq!(kinds(&found), vec![(Kind::Fork, Some(8))]);
    assert_eq!(w.verdict(found).ranges.map(|r| (r[0].from, r[0].to)), Some((5, 8)));
    assert_eq!(w.verified().map(|h| h.seq), Some(4));

    // A record whose payload was changed but kept its hash field.
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    let edited = c[2].replace("{\\\"n\\\":3}", "{\\\"n\\\":33}");
    assert_ne!(edited, c[2]);
    let mut lines = c[..2].to_vec();
    lines.push(edited);
    assert_eq!(feed(&mut w, &lines), vec![(Kind::Altered, Some(3))]);
    // The next record links to its hash field: it held its place.
    assert_eq!(feed(&mut w, &c[3..5]), vec![]);
}

#[test]
fn a_record_ahead_waits_and_a_gap_is_named_once_a_head_vouches_past_it() {
    let c = chain(12);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    feed(&mut w, &c[..3]);
    // Seq 5 before seq 4: held, then both take their place; seq 5 was out of place.
    assert_eq!(feed(&mut w, &c[4..5]), vec![]);
    assert_eq!(feed(&mut w, &c[3..4]), vec![(Kind::Reordered, Some(5))]);
    assert_eq!(w.position().map(|h| h.seq), Some(5));
    // Seqs 6 and 7 never come.
    assert_eq!(feed(&mut w, &c[7..10]), vec![]);
    assert_eq!(w.position().map(|h| h.seq), Some(5));
    // Past the grace, the first waiting record is named once, and still waits.
    let mut out = Vec::new();
    w.settle(at(11), &mut out);
    w.settle(at(12), &mut out);
    assert_eq!(kinds(&out), vec![(Kind::Reordered, Some(8))]);
    // A kept head past it: the gap is certain, and the copy goes on.
    assert_eq!(kinds(&w.trusted_head(head(&c, 9))), vec![]);
    let mut found = Vec::new();
    let mut accepted = Vec::new();
    w.settle_with(at(12), &mut found, &mut |r| accepted.push(r.seq));
    assert_eq!(kinds(&found), vec![(Kind::Gap, Some(6))]);
    assert_eq!(accepted, vec![8, 9, 10]);
    assert!(found[0].message.contains("seqs 6 to 7"), "{}", found[0].message);
    assert_eq!(w.position().map(|h| h.seq), Some(10));
    // Head 9 matched the copy, but trust ends at the first finding (seq 5 out of place).
    assert_eq!(w.state().verified, Some(head(&c, 9).to_string()));
    assert_eq!(w.verified(), None);
}

#[test]
fn a_lone_plant_far_ahead_is_named_after_the_grace_and_compared_when_reached() {
    let c = chain(10);
    let mut w = CopyWatch::new("o", Duration::from_secs(5));
    feed(&mut w, &c[..3]);
    let (plant, _) = record(8, &"1".repeat(64), "{\"n\":\"plant\"}");
    assert_eq!(feed(&mut w, &[plant]), vec![]);
    let mut out = Vec::new();
    w.settle(at(6), &mut out);
    assert_eq!(kinds(&out), vec![(Kind::Reordered, Some(8))]);
    // The real records come: seq 8's is the one in order; the plant waited at its seq.
    let found = feed(&mut w, &c[3..]);
    assert!(
        found.contains(&(Kind::Duplicate, Some(8))) || found.contains(&(Kind::Altered, Some(8))),
        "{found:?}"
    );
}

#[test]
fn the_state_round_trips_and_refuses_garbage() {
    let c = chain(10);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    feed(&mut w, &c[..6]);
    w.trusted_head(head(&c, 4));
    w.trusted_head(head(&c, 9));
    let state = w.state();
    let json = serde_json::to_string(&state).unwrap();
    let back: WatchState = serde_json::from_str(&json).unwrap();
    let mut r = CopyWatch::resume(back, Duration::from_secs(10)).unwrap();
    assert_eq!(r.state(), state);
    // A repeat of a seq seen before the restart is still compared.
    let (forged, _) = record(5, head(&c, 4).hash_str(), "{}");
    assert_eq!(
        kinds(&r.feed(forged.as_bytes(), "copy", NOW)),
        vec![(Kind::Duplicate, Some(5))]
    );
    assert_eq!(feed(&mut r, &c[6..]), vec![]);
    // Head 9 is matched, but trust ends below the duplicate: head 4 stays the verified one.
    assert_eq!(r.verified().map(|h| h.seq), Some(4));

    let mut bad = state.clone();
    bad.position = Some("6:zz".into());
    assert!(CopyWatch::resume(bad, Duration::from_secs(1)).is_err());
}

#[test]
fn another_origins_record_and_garbage_are_findings() {
    let mut w = CopyWatch::new("p", Duration::from_secs(10));
    let c = chain(2);
    assert_eq!(feed(&mut w, &c[..1]), vec![(Kind::Foreign, Some(1))]);
    assert_eq!(feed(&mut w, &["{not json".to_owned()]), vec![(Kind::Altered, None)]);
}

#[test]
fn records_held_ahead_are_bounded_in_bytes() {
    let c = chain(3);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    feed(&mut w, &c[..1]);
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(9 << 20));
    let (first, _) = record(10, &"2".repeat(64), &big);
    let (second, _) = record(11, &"3".repeat(64), &big);
    assert_eq!(feed(&mut w, &[first]), vec![]);
    assert_eq!(feed(&mut w, &[second]), vec![(Kind::Reordered, Some(11))]);
    // Half the room taken: the first waiting record is settled as a gap now.
    let mut out = Vec::new();
    w.settle(NOW, &mut out);
    assert_eq!(kinds(&out)[0], (Kind::Gap, Some(2)));
    let state = w.state();
    assert!(state.ahead.is_empty());
}

#[test]
fn a_swap_and_a_record_moved_to_the_end_are_out_of_place() {
    let c = chain(10);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    let mut swapped = c.clone();
    swapped.swap(4, 5);
    assert_eq!(feed(&mut w, &swapped), vec![(Kind::Reordered, Some(6))]);
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    let mut moved = c.clone();
    let third = moved.remove(2);
    moved.push(third);
    assert_eq!(feed(&mut w, &moved), vec![(Kind::Reordered, Some(4))]);
    w.trusted_head(head(&c, 10));
    assert_eq!(w.verified(), None, "trust ends at the first record out of place");
    // A record of a range named missing that comes later is out of place, not a repeat.
    let mut w = CopyWatch::new("o", Duration::from_secs(10));
    let mut late = c[..3].to_vec();
    late.extend_from_slice(&c[5..]);
    feed(&mut w, &late);
    w.trusted_head(head(&c, 8));
    let mut out = Vec::new();
    w.settle(NOW, &mut out);
    assert_eq!(kinds(&out), vec![(Kind::Gap, Some(4))]);
    assert_eq!(feed(&mut w, &c[3..4]), vec![(Kind::Reordered, Some(4))]);
}
