//! `s3://BUCKET/PREFIX`, and where an origin's keys live under it:
//! `PREFIX/<origin segment>/` ([`chainship_core::origin_segment`]: `team/a`
//! → `team%2Fa`, so one origin's prefix never holds another's keys).

use chainship_core::{Error, permanent};
use std::fmt;

use chainship_core::origin_segment;

/// A bucket and a prefix (no leading or trailing `/`; may be empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    pub prefix: String,
}

impl S3Location {
    /// Parses what follows `s3://`, checking the bucket name.
    pub fn parse(rest: &str) -> Result<Self, Error> {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid {
            return Err(permanent!("not a valid bucket name (3-63 of a-z 0-9 . -)"));
        }
        Ok(S3Location {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        })
    }

    /// `PREFIX/name` (or `name` with no prefix).
    pub fn key(&self, name: &str) -> String {
        join(&self.prefix, name)
    }

    /// Where `origin`'s keys live: `PREFIX/<origin segment>/`.
    pub fn origin_prefix(&self, origin: &str) -> String {
        origin_prefix(&self.prefix, origin)
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

/// `PREFIX/<origin segment>/`.
pub fn origin_prefix(prefix: &str, origin: &str) -> String {
    format!("{}/", join(prefix, &origin_segment(origin)))
}

fn join(prefix: &str, name: &str) -> String {
    match prefix.trim_matches('/') {
        "" => name.to_owned(),
        prefix => format!("{prefix}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let l = S3Location::parse("audit-bucket/exports/prod/").unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("audit-bucket", "exports/prod"));
        assert_eq!(l.to_string(), "s3://audit-bucket/exports/prod");
        assert!(S3Location::parse("Bad_Bucket/x").is_err());
        assert!(S3Location::parse("ab").is_err());
    }

    #[test]
    fn origins_get_one_segment_each() {
        for prefix in ["exports", "exports/", "/exports/"] {
            assert_eq!(origin_prefix(prefix, "prod/agentrt"), "exports/prod%2Fagentrt/");
        }
        assert!(!origin_prefix("p", "team/a/b").starts_with(&origin_prefix("p", "team/a")));
        assert_eq!(origin_prefix("", "o"), "o/");
        assert_eq!(S3Location::parse("bkt").unwrap().key(".probe"), ".probe");
    }
}
