//! One origin's records taken out of a shared copy, kept on local disk
//! until that origin is checked: the shared copy (a topic, a directory of
//! files) is read once for every origin, and each origin's check then reads
//! only its own records, in the order the copy held them.
//!
//! Everything goes to one temporary file, in chunks: each origin fills a
//! small buffer ([`CHUNK`] bytes), written out whole when full, and keeps
//! the offsets of its chunks. Memory is a buffer per origin plus 16 bytes
//! per chunk written, never the others' records; one file, so no limit on
//! open files, whatever the fleet's size.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use chainship_chain::{Error, permanent};
use chainship_sinks::{OnRecord, ReadReport, Stray};

/// An origin's buffer: written out when it would pass this size.
pub const CHUNK: usize = 16 * 1024;

/// Records of one origin, where its copy holds them: its own place (a
/// file, its home partition) or a stray place (another partition).
#[derive(Default)]
struct Lane {
    buffer: Vec<u8>,
    chunks: Vec<(u64, u32)>,
    records: u64,
}

#[derive(Default)]
struct Origin {
    own: Lane,
    strays: Lane,
}

/// Every origin's records of one read of a shared copy (see the module doc).
pub struct Spill {
    file: File,
    end: u64,
    origins: BTreeMap<String, Origin>,
}

impl Spill {
    /// A spill in a new unlinked temporary file in `dir` (the system's temp
    /// dir when `None`): it is gone when the process ends, however.
    pub fn new(dir: Option<&Path>) -> Result<Spill, Error> {
        let file = match dir {
            Some(d) => tempfile::tempfile_in(d),
            None => tempfile::tempfile(),
        }
        .map_err(|e| Error::from_io("cannot create the fleet pass's temporary file", &e))?;
        Ok(Spill {
            file,
            end: 0,
            origins: BTreeMap::new(),
        })
    }

    /// Keeps `line` (read at `place`, in `partition`) as a record of
    /// `origin`; `stray` when it is where the origin's records do not belong.
    pub fn push(
        &mut self,
        origin: &str,
        stray: bool,
        line: &[u8],
        partition: Option<i32>,
        place: &str,
    ) -> Result<(), Error> {
        if !self.origins.contains_key(origin) {
            self.origins.insert(origin.to_owned(), Origin::default());
        }
        let entry = self.origins.get_mut(origin).expect("inserted above");
        let lane = if stray { &mut entry.strays } else { &mut entry.own };
        lane.records += 1;
        let frame_len = 12 + line.len() + place.len();
        if !lane.buffer.is_empty() && lane.buffer.len() + frame_len > CHUNK {
            flush(&mut self.file, &mut self.end, lane)?;
        }
        lane.buffer.extend_from_slice(&(line.len() as u32).to_le_bytes());
        lane.buffer.extend_from_slice(line);
        lane.buffer.extend_from_slice(&(place.len() as u32).to_le_bytes());
        lane.buffer.extend_from_slice(place.as_bytes());
        lane.buffer.extend_from_slice(&partition.unwrap_or(-1).to_le_bytes());
        Ok(())
    }

    /// The origins with at least one record, each with its count (own, stray).
    pub fn origins(&self) -> impl Iterator<Item = (&str, u64, u64)> {
        self.origins
            .iter()
            .map(|(o, e)| (o.as_str(), e.own.records, e.strays.records))
    }

    /// Whether any of `origin`'s records was where they do not belong.
    pub fn has_strays(&self, origin: &str) -> bool {
        self.origins.get(origin).is_some_and(|o| o.strays.records > 0)
    }

    /// Calls `each(line, place)` for `origin`'s records: its own, then the
    /// strays, each in the order the copy held them, as the sink's reader
    /// would. The strays are reported by partition, as the reader does.
    pub fn read(&self, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, Error> {
        let mut report = ReadReport::default();
        let Some(entry) = self.origins.get(origin) else {
            return Ok(report);
        };
        let mut strays: BTreeMap<i32, (u64, String)> = BTreeMap::new();
        for (lane, stray) in [(&entry.own, false), (&entry.strays, true)] {
            let mut chunk = Vec::new();
            let parts = lane.chunks.iter().map(|c| Some(*c)).chain([None]);
            for part in parts {
                let bytes: &[u8] = match part {
                    Some((at, len)) => {
                        chunk.resize(len as usize, 0);
                        self.file
                            .read_exact_at(&mut chunk, at)
                            .map_err(|e| Error::from_io("cannot read the fleet pass's temporary file", &e))?;
                        &chunk
                    }
                    None => &lane.buffer,
                };
                for_frames(bytes, &mut |line, place, partition| {
                    if stray {
                        strays.entry(partition).or_insert((0, place.to_owned())).0 += 1;
                    }
                    each(line, &|| place.to_owned());
                })?;
            }
        }
        // Every record off its home: the home moved (partitions added to the
        // topic move every origin's hash), or the follower was pinned elsewhere.
        let moved = match entry.own.records {
            0 => {
                " (none is on its home partition: were partitions added to the topic, or its follower pinned to another?)"
            }
            _ => "",
        };
        for (partition, (records, first)) in strays {
            report.strays.push(Stray {
                place: format!(
                    "partition {partition} (first at {first}), not origin {origin:?}'s home partition{moved}"
                ),
                records,
            });
        }
        Ok(report)
    }

    /// Forgets `origin`'s records once it is checked (the file keeps its
    /// bytes until the pass ends; the memory is given back).
    pub fn forget(&mut self, origin: &str) {
        self.origins.remove(origin);
    }
}

fn flush(file: &mut File, end: &mut u64, lane: &mut Lane) -> Result<(), Error> {
    file.seek(SeekFrom::Start(*end))
        .and_then(|_| file.write_all(&lane.buffer))
        .map_err(|e| Error::from_io("cannot write the fleet pass's temporary file (is its disk full?)", &e))?;
    lane.chunks.push((*end, lane.buffer.len() as u32));
    *end += lane.buffer.len() as u64;
    lane.buffer.clear();
    Ok(())
}

fn for_frames(mut bytes: &[u8], each: &mut dyn FnMut(&[u8], &str, i32)) -> Result<(), Error> {
    fn take<'b>(bytes: &mut &'b [u8], n: usize) -> Result<&'b [u8], Error> {
        if bytes.len() < n {
            return Err(permanent!("the fleet pass's temporary file was changed while it ran"));
        }
        let (head, rest) = bytes.split_at(n);
        *bytes = rest;
        Ok(head)
    }
    let len = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
    while !bytes.is_empty() {
        let n = len(take(&mut bytes, 4)?);
        let line = take(&mut bytes, n)?;
        let n = len(take(&mut bytes, 4)?);
        let place = std::str::from_utf8(take(&mut bytes, n)?).unwrap_or("?");
        let partition = i32::from_le_bytes(take(&mut bytes, 4)?.try_into().expect("4 bytes"));
        each(line, place, partition);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(spill: &Spill, origin: &str) -> (Vec<(String, String)>, ReadReport) {
        let mut got = Vec::new();
        let report = spill
            .read(origin, &mut |line, place| {
                got.push((String::from_utf8(line.to_vec()).unwrap(), place()))
            })
            .unwrap();
        (got, report)
    }

    #[test]
    fn each_origin_gets_back_its_own_records_in_order_then_its_strays() {
        let mut spill = Spill::new(None).unwrap();
        // Many chunks' worth, interleaved between origins.
        let big = "x".repeat(3000);
        for i in 0..40 {
            for origin in ["a", "b", "c"] {
                let line = format!("{origin}-{i}-{big}");
                spill
                    .push(origin, false, line.as_bytes(), Some(0), &format!("p0 @{i}"))
                    .unwrap();
            }
            if i % 10 == 0 {
                spill
                    .push("a", true, format!("a-stray-{i}").as_bytes(), Some(3), "p3")
                    .unwrap();
            }
        }
        let (got, report) = read_all(&spill, "a");
        let own: Vec<&(String, String)> = got.iter().filter(|(l, _)| !l.contains("stray")).collect();
        assert_eq!(own.len(), 40);
        for (i, (line, place)) in own.iter().enumerate() {
            assert!(line.starts_with(&format!("a-{i}-")), "{i}: {}", &line[..8]);
            assert_eq!(place, &format!("p0 @{i}"));
        }
        // The strays come after every own record, in their order.
        let strays: Vec<&str> = got[40..].iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(strays, ["a-stray-0", "a-stray-10", "a-stray-20", "a-stray-30"]);
        assert_eq!(report.strays.len(), 1);
        assert_eq!(report.strays[0].records, 4);
        let (b, report) = read_all(&spill, "b");
        assert_eq!(b.len(), 40);
        assert!(report.strays.is_empty());
        assert_eq!(
            spill
                .origins()
                .map(|(o, n, s)| (o.to_owned(), n, s))
                .collect::<Vec<_>>(),
            [
                ("a".to_owned(), 40, 4),
                ("b".to_owned(), 40, 0),
                ("c".to_owned(), 40, 0)
            ]
        );
        spill.forget("a");
        assert!(read_all(&spill, "a").0.is_empty());
    }
}
