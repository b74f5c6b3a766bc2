//! How an origin becomes one segment of a storage path or an id.
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
}
