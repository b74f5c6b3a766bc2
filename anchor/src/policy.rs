//! Trust policies in the Sigsum policy format (sigsum-go `doc/policy.md`),
//! as auditors already keep them: which logs sign heads and checkpoints,
//! which witnesses cosign, and the quorum their cosignatures must meet.
//!
//! ```text
//! log <hex public key> [<url>]
//! witness <name> <hex public key> [<url>]
//! group <name> <k>|any|all <member>...
//! quorum <name>|none
//! ```
//!
//! Names are local to the file and must be defined before use; a member
//! belongs to one group at most; `k` is between 1 and the member count;
//! exactly one `quorum` line. Keys are raw Ed25519 public keys in hex.
//! In a signed note or cosignature line the key name is the signer's own
//! (a policy does not know it), so a policy key matches a line whose key
//! id it computes from the line's name (C2SP signed-note key ids).

use chainship_chain::{Error, permanent};
use std::collections::BTreeMap;

use ed25519_dalek::VerifyingKey;

/// A parsed policy.
#[derive(Clone, Debug)]
pub struct TrustPolicy {
    /// Keys trusted to sign heads and checkpoints.
    pub logs: Vec<VerifyingKey>,
    /// Witnesses, by their local name.
    pub witnesses: Vec<(String, VerifyingKey)>,
    nodes: BTreeMap<String, Node>,
    /// The node the cosignatures must satisfy; `None`: `quorum none`.
    quorum: Option<String>,
}

#[derive(Clone, Debug)]
enum Node {
    Witness,
    Group { k: usize, members: Vec<String> },
}

impl TrustPolicy {
    /// Parses a policy file's text; errors name the line.
    pub fn parse(text: &str) -> Result<TrustPolicy, Error> {
        let mut policy = TrustPolicy {
            logs: Vec::new(),
            witnesses: Vec::new(),
            nodes: BTreeMap::new(),
            quorum: None,
        };
        let mut quorum_line = false;
        let mut member_of: BTreeMap<String, String> = BTreeMap::new();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("");
            // ASCII whitespace only, as Sigsum splits (a no-break space is part of a word).
            let words: Vec<&str> = line
                .split(|c: char| c.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .collect();
            let at = |why: String| permanent!("line {}: {why}", i + 1);
            match words.as_slice() {
                [] => {}
                ["log", key] | ["log", key, _] => {
                    let key = parse_key(key).map_err(|e| at(e.to_string()))?;
                    if policy.logs.contains(&key) {
                        return Err(at("a log key listed twice".into()));
                    }
                    if policy.witnesses.iter().any(|(_, k)| *k == key) {
                        return Err(at(
                            "a key both log and witness: a log cannot cosign its own checkpoints".into(),
                        ));
                    }
                    policy.logs.push(key);
                }
                ["witness", name, key] | ["witness", name, key, _] => {
                    let key = parse_key(key).map_err(|e| at(e.to_string()))?;
                    if *name == "none" || policy.nodes.contains_key(*name) {
                        return Err(at(format!("the name {name:?} is taken")));
                    }
                    if policy.witnesses.iter().any(|(_, k)| *k == key) {
                        return Err(at("a witness key listed twice".into()));
                    }
                    if policy.logs.contains(&key) {
                        return Err(at(
                            "a key both log and witness: a log cannot cosign its own checkpoints".into(),
                        ));
                    }
                    policy.witnesses.push(((*name).to_owned(), key));
                    policy.nodes.insert((*name).to_owned(), Node::Witness);
                }
                ["group", name, threshold, members @ ..] if !members.is_empty() => {
                    if *name == "none" || policy.nodes.contains_key(*name) {
                        return Err(at(format!("the name {name:?} is taken")));
                    }
                    let k = match *threshold {
                        "any" => 1,
                        "all" => members.len(),
                        n => n
                            .parse::<usize>()
                            .map_err(|_| at(format!("{n:?} is not a threshold (a number, any or all)")))?,
                    };
                    if !(1..=members.len()).contains(&k) {
                        return Err(at(format!("threshold {k} for {} member(s)", members.len())));
                    }
                    let mut seen = Vec::new();
                    for m in members {
                        if !policy.nodes.contains_key(*m) {
                            return Err(at(format!("{m:?} is not defined above")));
                        }
                        if let Some(group) = member_of.get(*m) {
                            return Err(at(format!("{m:?} is already a member of {group:?}")));
                        }
                        if seen.contains(m) {
                            return Err(at(format!("{m:?} is listed twice")));
                        }
                        seen.push(*m);
                    }
                    for m in members {
                        member_of.insert((*m).to_owned(), (*name).to_owned());
                    }
                    let members = members.iter().map(|m| (*m).to_owned()).collect();
                    policy.nodes.insert((*name).to_owned(), Node::Group { k, members });
                }
                ["group", ..] => return Err(at("a group needs a name, a threshold and at least one member".into())),
                ["log", ..] => return Err(at("a log line is: log <hex key> [<url>]".into())),
                ["witness", ..] => return Err(at("a witness line is: witness <name> <hex key> [<url>]".into())),
                ["quorum", name] => {
                    if quorum_line {
                        return Err(at("a second quorum line".into()));
                    }
                    quorum_line = true;
                    if *name != "none" {
                        if !policy.nodes.contains_key(*name) {
                            return Err(at(format!("{name:?} is not defined above")));
                        }
                        policy.quorum = Some((*name).to_owned());
                    }
                }
                [word, ..] => {
                    return Err(at(format!(
                        "{word:?} is not a policy line (log, witness, group, quorum)"
                    )));
                }
            }
        }
        if !quorum_line {
            return Err(permanent!(
                "no quorum line (write `quorum none` to require no cosignature)"
            ));
        }
        if policy.logs.is_empty() {
            return Err(permanent!("no log line: the policy trusts no key to sign heads"));
        }
        Ok(policy)
    }

    /// Whether the witnesses named in `cosigned` (local names) meet the quorum.
    pub fn quorum_met(&self, cosigned: &[String]) -> bool {
        let cosigned: std::collections::HashSet<&str> = cosigned.iter().map(String::as_str).collect();
        match &self.quorum {
            None => true,
            Some(name) => self.satisfied(name, &cosigned),
        }
    }

    fn satisfied(&self, name: &str, cosigned: &std::collections::HashSet<&str>) -> bool {
        match self.nodes.get(name) {
            Some(Node::Witness) => cosigned.contains(name),
            Some(Node::Group { k, members }) => members.iter().filter(|m| self.satisfied(m, cosigned)).count() >= *k,
            None => false,
        }
    }

    /// Whether the quorum needs any cosignature at all.
    pub fn needs_witnesses(&self) -> bool {
        self.quorum.is_some()
    }

    /// The quorum in words, for findings ("group X-and-Y: all of X-witnesses, Y-witnesses").
    pub fn describe_quorum(&self) -> String {
        match &self.quorum {
            None => "none".into(),
            Some(name) => match self.nodes.get(name) {
                Some(Node::Group { k, members }) => {
                    format!("group {name}: {k} of {}", members.join(", "))
                }
                _ => format!("witness {name}"),
            },
        }
    }
}

fn parse_key(hex_key: &str) -> Result<VerifyingKey, Error> {
    let bytes = hex::decode(hex_key).map_err(|_| permanent!("{hex_key:?} is not a hex public key"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| permanent!("{hex_key:?} is not 32 bytes"))?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| permanent!("{hex_key:?} is not an Ed25519 public key"))?;
    // No signature under a point of small order ever verifies: a setup mistake.
    if key.is_weak() {
        return Err(permanent!(
            "{hex_key:?} is a point of small order, under which no signature can verify"
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> String {
        hex::encode(
            ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
                .verifying_key()
                .as_bytes(),
        )
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn nested_groups_decide_as_the_sigsum_rules_say() {
        let text = format!(
            "# two levels\nlog {} https://log.example\nwitness X1 {}\nwitness X2 {}\nwitness X3 {}\ngroup X 2 X1 X2 X3\nwitness Y1 {}\nwitness Y2 {}\ngroup Y any Y1 Y2\ngroup XY all X Y\nquorum XY\n",
            key(1),
            key(2),
            key(3),
            key(4),
            key(5),
            key(6)
        );
        let p = TrustPolicy::parse(&text).unwrap();
        assert_eq!((p.logs.len(), p.witnesses.len()), (1, 5));
        assert!(p.quorum_met(&names(&["X1", "X3", "Y2"])));
        assert!(!p.quorum_met(&names(&["X1", "Y2"])), "one X is not two");
        assert!(!p.quorum_met(&names(&["X1", "X2", "X3"])), "no Y");
        assert!(!p.quorum_met(&[]));
        assert_eq!(p.describe_quorum(), "group XY: 2 of X, Y");
    }

    #[test]
    fn malformed_policies_are_refused_with_the_line() {
        let (l, w1, w2) = (key(1), key(2), key(3));
        for (text, says) in [
            (format!("log {l}\n"), "no quorum line"),
            ("quorum none\n".to_owned(), "no log line"),
            (format!("log {l}\nquorum W\n"), "line 2: \"W\" is not defined above"),
            (
                format!("log {l}\nwitness W {w1}\ngroup G 2 W\nquorum G\n"),
                "line 3: threshold 2 for 1",
            ),
            (
                format!("log {l}\nwitness W {w1}\nwitness V {w2}\ngroup G any W\ngroup H any W V\nquorum H\n"),
                "already a member",
            ),
            (
                format!("log {l}\nwitness W {w1}\nwitness W {w2}\nquorum W\n"),
                "line 3: the name \"W\" is taken",
            ),
            (
                format!("log {l}\nwitness W {w1}\nwitness V {w1}\nquorum W\n"),
                "witness key listed twice",
            ),
            (format!("log {l}\nquorum none\nquorum none\n"), "second quorum"),
            (format!("log {l}\nwitness none {w1}\nquorum none\n"), "taken"),
            ("log zz\nquorum none\n".to_owned(), "not a hex public key"),
            (format!("log {l}\nwitnes W {w1}\nquorum none\n"), "not a policy line"),
            (format!("log {l}\nwitness W {l}\nquorum W\n"), "both log and witness"),
            (format!("log {l}\ngroup g 1\nquorum none\n"), "at least one member"),
            (format!("log\u{a0}{l}\nquorum none\n"), "not a policy line"),
        ] {
            let e = TrustPolicy::parse(&text).unwrap_err();
            assert!(e.message.contains(says), "{text:?}: {e}");
        }
        let none = TrustPolicy::parse(&format!("\u{feff}log {l}\nquorum none\n")).unwrap();
        assert!(none.quorum_met(&[]) && !none.needs_witnesses());
    }

    /// Mullvad's `sigsum` crate, an independent parser of the same format,
    /// reads the same generated policies: both accept or both refuse, and
    /// for every subset of witnesses that cosigned, both reach the same
    /// quorum decision (theirs by the witnesses' key hashes, ours by name).
    #[test]
    fn decisions_agree_with_an_independent_implementation() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut compared = 0;
        for case in 0..300u64 {
            // 2 to 6 witnesses, then groups over names defined so far.
            let witnesses = 2 + next(5) as u8;
            let mut text = format!("log {}\n", key(200));
            let mut names: Vec<String> = Vec::new();
            let mut keys = Vec::new();
            for w in 0..witnesses {
                text += &format!("witness w{w} {}\n", key(w + 1));
                names.push(format!("w{w}"));
                keys.push(ed25519_dalek::SigningKey::from_bytes(&[w + 1; 32]).verifying_key());
            }
            let mut free: Vec<String> = names.clone();
            for g in 0..next(3) {
                if free.len() < 2 {
                    break;
                }
                let take = 2 + next(free.len() as u64 - 1) as usize;
                let members: Vec<String> = free.drain(..take.min(free.len())).collect();
                let k = match next(4) {
                    0 => "any".to_owned(),
                    1 => "all".to_owned(),
                    // Sometimes out of range: both must refuse.
                    _ => (1 + next(members.len() as u64 + 1)).to_string(),
                };
                text += &format!("group g{g} {k} {}\n", members.join(" "));
                free.push(format!("g{g}"));
            }
            let quorum = if case % 17 == 0 {
                "none".to_owned()
            } else {
                free[next(free.len() as u64) as usize].clone()
            };
            text += &format!("quorum {quorum}\n");
            let ours = TrustPolicy::parse(&text);
            let theirs = sigsum::Policy::parse(&text);
            // What the reference refuses, we refuse. We refuse one thing more,
            // as sigsum-go does and sigsum 0.3.0 does not: a threshold above
            // the member count (a group no cosignatures could ever meet).
            match (&ours, &theirs) {
                (Ok(_), Err(e)) => panic!("{text}\nwe accept what sigsum refuses: {e}"),
                (Err(e), Ok(_)) => assert!(
                    e.message.contains("threshold"),
                    "{text}\nwe refuse what sigsum accepts: {e}"
                ),
                _ => {}
            }
            let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
                continue;
            };
            for subset in 0u32..(1 << witnesses) {
                let chosen: Vec<usize> = (0..witnesses as usize).filter(|i| subset & (1 << i) != 0).collect();
                let by_name: Vec<String> = chosen.iter().map(|i| names[*i].clone()).collect();
                let by_hash: Vec<sigsum::Hash> =
                    chosen.iter().map(|i| sigsum::Hash::new(keys[*i].as_bytes())).collect();
                assert_eq!(
                    ours.quorum_met(&by_name),
                    theirs.check_quorum(&by_hash),
                    "{text}\ncosigned by {by_name:?}"
                );
                compared += 1;
            }
        }
        assert!(compared > 1000, "only {compared} decisions compared");
    }
}
