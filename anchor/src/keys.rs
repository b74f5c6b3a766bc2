//! Trusted verifier keys: what `--trusted-key` names, a key or a file of
//! keys, each perhaps retired at a seq or scoped to one origin.

use chainship_chain::{Error, permanent};
use std::path::Path;

use crate::files::read_small;
use crate::note::VerifierKey;

/// The largest file of keys read (a fleet's trusted keys, a line an origin).
pub const KEY_LIST_LIMIT: u64 = 64 << 20;

/// Reads trusted verifier keys: each argument is a key, or a file of keys
/// (one a line, `#` comments allowed). A key may be followed by
/// ` until=SEQ`: retired at a rotation, it is trusted for heads up to SEQ
/// only (see the README, "Rotating the signing key").
pub fn load_trusted(args: &[String]) -> Result<Vec<VerifierKey>, Error> {
    let mut keys = Vec::new();
    for arg in args {
        if arg.contains('+') && !Path::new(arg).exists() {
            keys.push(parse_trusted(arg)?);
            continue;
        }
        let text = read_small(Path::new(arg), KEY_LIST_LIMIT).map_err(|e| permanent!("{arg}: {e}"))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            keys.push(parse_trusted(line).map_err(|e| permanent!("{arg} line {}: {e}", n + 1))?);
        }
    }
    if keys.is_empty() {
        return Err(permanent!("at least one trusted key is needed"));
    }
    Ok(keys)
}

/// `KEY`, then optionally `until=SEQ` and `origin=ORIGIN`.
fn parse_trusted(text: &str) -> Result<VerifierKey, Error> {
    let mut words = text.split_whitespace();
    let mut key = VerifierKey::parse(words.next().unwrap_or_default())?;
    for word in words {
        if let Some(seq) = word.strip_prefix("until=") {
            if key.retired_after.is_some() {
                return Err(permanent!("{word:?}: a key is retired once (one until=SEQ)"));
            }
            let seq = seq
                .parse::<u64>()
                .map_err(|_| permanent!("{word:?}: until=SEQ takes the last seq the key vouches for"))?;
            key.retired_after = Some(seq);
        } else if let Some(origin) = word.strip_prefix("origin=") {
            if key.only_origin.is_some() || origin.is_empty() {
                return Err(permanent!("{word:?}: one origin=ORIGIN a key"));
            }
            key.only_origin = Some(origin.to_owned());
        } else {
            return Err(permanent!(
                "{word:?}: after a key only until=SEQ (the last seq it vouches for) and origin=ORIGIN (the one log it vouches for) may follow"
            ));
        }
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::SignerKey;

    #[test]
    fn trusted_keys_from_arguments_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = SignerKey::generate("a").unwrap().verifier().to_text();
        let b = SignerKey::generate("b").unwrap().verifier().to_text();
        let file = dir.path().join("keys");
        std::fs::write(&file, format!("# old and new\n{a}\n\n{b}\n")).unwrap();
        assert_eq!(load_trusted(&[file.to_str().unwrap().into()]).unwrap().len(), 2);
        assert_eq!(load_trusted(std::slice::from_ref(&a)).unwrap()[0].name, "a");
        assert!(load_trusted(&[]).is_err());
        let retired = load_trusted(&[format!("{a} until=200")]).unwrap();
        assert_eq!(retired[0].retired_after, Some(200));
        assert!(retired[0].trusted_for("o", 200) && !retired[0].trusted_for("o", 201));
        let scoped = load_trusted(&[format!("{a} origin=prod/agentrt until=9")]).unwrap();
        assert!(scoped[0].trusted_for("prod/agentrt", 9));
        assert!(!scoped[0].trusted_for("evil/agentrt", 9) && !scoped[0].trusted_for("prod/agentrt", 10));
        assert!(load_trusted(&[format!("{a} origin=")]).is_err());
        std::fs::write(&file, format!("{a} until=7\n{b}\n")).unwrap();
        let both = load_trusted(&[file.to_str().unwrap().into()]).unwrap();
        assert_eq!((both[0].retired_after, both[1].retired_after), (Some(7), None));
        assert!(
            load_trusted(&[format!("{a} until=soon")])
                .unwrap_err()
                .message
                .contains("until=SEQ")
        );
    }
}
