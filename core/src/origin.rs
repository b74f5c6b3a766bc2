//! What an origin may be ([`parse_origin`]), and how it becomes one
//! segment of a storage path or an id ([`origin_segment`]).
//!
//! An origin like `team/a` may contain `/`, `:` and `@`. Used raw in an S3
//! key or a Kafka transactional id, `team/a` would be a prefix of
//! `team/a/b`'s keys, and replacing characters (`x/y` → `x_y`) would make
//! two origins one. Percent-encoding every byte outside `A-Z a-z 0-9 . _ -`
//! is injective (an origin never holds `%`), yields a single segment with
//! no `/`, and leaves plain origins (`prod-eu1`) unchanged.

/// The origin as one path segment: `team/a` → `team%2Fa`.
pub fn origin_segment(origin: &str) -> String {
    let mut out = String::with_capacity(origin.len());
    for b in origin.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The origin a segment made by [`origin_segment`] stands for, checked as
/// [`parse_origin`] checks one; `None` for a name no origin gives.
pub fn origin_from_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    let origin = parse_origin(std::str::from_utf8(&out).ok()?).ok()?;
    // Only the one spelling `origin_segment` gives (`%2f` or `%41` is not it).
    (origin_segment(&origin) == segment).then_some(origin)
}

/// Whether `part` is a name the anchor layout keeps directly under an
/// origin's directory (`chainship_anchor::store::layout`): an origin whose
/// later part is one would put its directory where another origin (the one
/// it nests in) keeps that file, in a file store, whose origin paths are
/// not encoded.
fn is_layout_name(part: &str) -> bool {
    matches!(part, "checkpoint" | "checkpoints" | "cosigned" | "tile") || part.ends_with(".head")
}

/// Checks an origin: the log's identity (`prod-eu1/agentrt`) goes into
/// every record, Kafka key, S3 key and signed head, so it is kept to
/// characters that are safe in all of them.
pub fn parse_origin(text: &str) -> Result<String, crate::Error> {
    let ok = !text.is_empty()
        && text.len() <= 200
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b))
        && !text.starts_with('/')
        && !text.ends_with('/')
        && !text.split('/').any(|part| part.is_empty() || part.starts_with('.'));
    if let Some(part) = text.split('/').skip(1).find(|p| is_layout_name(p)) {
        return Err(crate::permanent!(
            "{text:?} is not a usable origin: its part {part:?} is a name the file anchor store keeps under each origin (checkpoint, checkpoints, cosigned, tile, *.head), so this origin's directory would collide with another origin's files"
        ));
    }
    if ok {
        Ok(text.to_owned())
    } else {
        Err(crate::permanent!(
            "{text:?} is not a usable origin: use 1-200 of A-Z a-z 0-9 . _ - : @ and / between parts, none starting with a dot (a file anchor store takes dot names for its temporary files), e.g. prod-eu1/agentrt"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_never_collide_or_nest() {
        assert_eq!(origin_segment("prod-eu1.x_y"), "prod-eu1.x_y");
        assert_eq!(origin_segment("team/a"), "team%2Fa");
        assert_eq!(origin_segment("a:b@c"), "a%3Ab%40c");
        // The collisions the old encodings had.
        assert_ne!(origin_segment("x/y"), origin_segment("x_y"));
        let a = format!("{}/", origin_segment("team/a"));
        assert!(!origin_segment("team/a/b").starts_with(&a));
        assert!(!origin_segment("team/a/b").contains('/'));
    }

    #[test]
    fn a_segment_gives_back_its_origin_and_nothing_else_does() {
        for origin in ["prod-eu1.x_y", "team/a", "a:b@c", "team/a/b"] {
            assert_eq!(origin_from_segment(&origin_segment(origin)).as_deref(), Some(origin));
        }
        for junk in ["team%2fa", "%41", "a%2", "a%zz", "%2F", "a b", ""] {
            assert_eq!(origin_from_segment(junk), None, "{junk}");
        }
    }

    #[test]
    fn accepts_plain_names_and_refuses_path_tricks() {
        assert!(parse_origin("prod-eu1/agentrt").is_ok());
        assert!(parse_origin("prod.eu1/agent.rt").is_ok());
        // A dot part is a file store's temporary name: its listing never shows it.
        for hidden in ["team/.h", ".team/b", "team/....", "."] {
            assert!(parse_origin(hidden).is_err(), "{hidden}");
        }
        // A layout name is only refused where it would nest in another origin.
        assert!(parse_origin("tile/a").is_ok());
        assert!(parse_origin("team/tiles").is_ok());
        assert!(parse_origin("team/checkpoint-eu").is_ok());
        for bad in [
            "",
            "/abs",
            "a//b",
            "a/../b",
            "a b",
            "a\nb",
            "x/",
            "team/a/checkpoint",
            "team/a/tile",
            "team/a/checkpoints",
            "team/a/cosigned/x",
            "team/a/00000000000000000001.head",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad:?}");
        }
    }
}
