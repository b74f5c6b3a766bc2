//! Batch objects: how they are named (`PREFIX/<origin>/[dt=YYYY-MM-DD/]<first
//! seq, 20 digits>-<last seq, 20 digits>.jsonl.{gz,zst}`), listed and read
//! back — what the writer's resume and the reader (`verify-export`) share.

use std::io::BufReader;

use chainship_chain::ErrorKind;
use chainship_chain::record::Record;
use chainship_s3::{S3Failure, get_object, list_keys};

use super::compression::Codec;
use crate::lines::{OnRecord, read_lines};

/// What an object's name says it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectRange {
    pub first: u64,
    pub last: u64,
    /// How the object is compressed, from its suffix.
    pub codec: Codec,
}

/// Parses `.../<first>-<last>.jsonl.gz` (or `.jsonl.zst`).
pub fn parse_object_name(key: &str) -> Option<ObjectRange> {
    let (name, codec) = Codec::split_name(key.rsplit('/').next()?)?;
    let (first, last) = name.split_once('-')?;
    if first.len() != 20 || last.len() != 20 {
        return None;
    }
    Some(ObjectRange {
        first: first.parse().ok()?,
        last: last.parse().ok()?,
        codec,
    })
}

/// What an origin's prefix holds: its batch objects, with the range each
/// name says it holds, and every other key under it ("strays": a planted
/// `evil.jsonl.gz`, a `.jsonl` with no codec). A SIEM loader reading the
/// prefix takes strays in, so a check must name them, never pass over them.
#[derive(Debug, Default)]
pub struct OriginListing {
    pub objects: Vec<(ObjectRange, String)>,
    pub strays: Vec<String>,
}

/// The `check` probe, at the prefix's root: outside every origin's folder,
/// so nothing a loader reads from an origin's folder is exempt from checks.
pub const PROBE_NAME: &str = ".chainship-check";

/// Lists everything under `origin_prefix`.
pub async fn list_origin(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    origin_prefix: &str,
) -> Result<OriginListing, S3Failure> {
    let mut listing = OriginListing::default();
    for key in list_keys(client, bucket, origin_prefix, None, |_| true, None).await? {
        // An origin's objects sit directly under its prefix or in its dt=
        // folders; anything deeper is not its own (a legacy-layout `team/a/b/...`).
        let rest = &key[origin_prefix.len().min(key.len())..];
        let own = !rest.contains('/') || (rest.starts_with("dt=") && rest.matches('/').count() == 1);
        match parse_object_name(&key).filter(|_| own) {
            Some(range) => listing.objects.push((range, key)),
            None => listing.strays.push(key),
        }
    }
    Ok(listing)
}

/// Every batch object under `origin_prefix` (strays left out: see [`list_origin`]).
pub async fn list_objects(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    origin_prefix: &str,
) -> Result<Vec<(ObjectRange, String)>, S3Failure> {
    Ok(list_origin(client, bucket, origin_prefix).await?.objects)
}

/// The message for a stray key under an origin's prefix.
pub fn stray_message(bucket: &str, key: &str) -> String {
    format!(
        "s3://{bucket}/{key}: under the origin's prefix but not a chainship batch object; a loader reading the prefix would take it in unchecked"
    )
}

/// Reads a fetched batch object line by line into `each`, and checks it is
/// what its name says. Returns what is wrong with the object as a whole (it
/// does not decode, or its records are not its name's range), if anything:
/// the one reading of an object that the sink's resume and `verify-export` share.
pub fn batch_object_lines(body: &[u8], range: &ObjectRange, name: &str, each: &mut OnRecord<'_>) -> Option<String> {
    let mut seqs: Option<(u64, u64)> = None;
    let read = object_lines(body, range.codec, name, &mut |line, place| {
        if let Some(seq) = Record::seq_of(line) {
            seqs = Some(seqs.map_or((seq, seq), |(first, _)| (first, seq)));
        }
        each(line, place)
    });
    match read {
        Err(f) => Some(format!("{name}: cannot be read as records ({})", f.message)),
        Ok(()) => range_message(name, range, seqs),
    }
}

/// Whether an object's records are the range its name says, as (first, last) seen.
fn range_message(name: &str, range: &ObjectRange, seqs: Option<(u64, u64)>) -> Option<String> {
    (seqs != Some((range.first, range.last))).then(|| {
        format!(
            "{name}: its name says seqs {} to {} but it holds {}",
            range.first,
            range.last,
            seqs.map_or("no records".to_owned(), |(a, b)| format!("seqs {a} to {b}"))
        )
    })
}

/// Fetches one batch object, compressed, whole (objects are bounded by
/// `--s3-batch-bytes`); [`object_lines`] then reads it.
pub async fn fetch_object(client: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<bytes::Bytes, S3Failure> {
    // Listed a moment ago: gone now means someone removed it.
    get_object(client, bucket, key).await?.ok_or_else(|| {
        S3Failure::new(
            ErrorKind::Transient,
            format!("reading {key}: it vanished after the listing"),
        )
    })
}

/// Calls `each` with every record line of a fetched object, in order,
/// decompressing as it reads.
pub fn object_lines(body: &[u8], codec: Codec, name: &str, each: &mut OnRecord<'_>) -> Result<(), S3Failure> {
    let permanent = |message: String| S3Failure::new(ErrorKind::Permanent, message);
    let decoder = codec
        .decoder(body)
        .map_err(|e| permanent(format!("{name}: {codec}: {e}")))?;
    read_lines(BufReader::new(decoder), name, each).map_err(|e| permanent(e.message))
}

/// `YYYY-MM-DD` from an RFC 3339 `at`, if it has that shape.
pub(super) fn date_of(at: &str) -> Option<&str> {
    let date = at.get(..10)?;
    let b = date.as_bytes();
    (b[4] == b'-'
        && b[7] == b'-'
        && date
            .bytes()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit()))
    .then_some(date)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_sort_by_seq_and_parse_back() {
        let key = format!("p/o/dt=2026-08-17/{:020}-{:020}.jsonl.gz", 1, 500);
        let range = |codec| {
            Some(ObjectRange {
                first: 1,
                last: 500,
                codec,
            })
        };
        assert_eq!(parse_object_name(&key), range(Codec::Gzip));
        assert_eq!(parse_object_name(&key.replace(".gz", ".zst")), range(Codec::Zstd));
        assert_eq!(parse_object_name(&key.replace(".gz", ".bz2")), None);
        assert!(format!("{:020}", 99) < format!("{:020}", 100));
        assert_eq!(parse_object_name("p/o/1-2.jsonl.gz"), None);
        assert_eq!(date_of("2026-08-17T08:00:00Z"), Some("2026-08-17"));
        assert_eq!(date_of("yesterday"), None);
    }
}
