//! The origin: the log's identity (`prod-eu1/agentrt`). It goes into every
//! record, Kafka key, S3 key and signed head, so it is kept to characters
//! that are safe in all of them.

/// Checks an `--origin` value; the error names the setting.
pub fn parse_origin(text: &str) -> Result<String, String> {
    let ok = !text.is_empty()
        && text.len() <= 200
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b))
        && !text.starts_with('/')
        && !text.ends_with('/')
        && !text
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a usable origin: use 1-200 of A-Z a-z 0-9 . _ - : @ and / between parts, e.g. prod-eu1/agentrt"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names_and_refuses_path_tricks() {
        assert!(parse_origin("prod-eu1/agentrt").is_ok());
        for bad in ["", "/abs", "a//b", "a/../b", "a b", "a\nb", "x/"] {
            assert!(parse_origin(bad).is_err(), "{bad:?}");
        }
    }
}
