//! How S3 objects are compressed, and how an object's name says so: one
//! place for the codec, its level, its file-name suffix and its
//! `Content-Encoding`, so the writer and every reader agree.

use chainship_chain::{Error, permanent};
use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

/// A compression format for JSON Lines objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Codec {
    /// Read by every SIEM loader; level 1 keeps it off the critical path.
    #[default]
    Gzip,
    /// Smaller and faster than gzip, for loaders that read it.
    Zstd,
}

impl Codec {
    pub const ALL: [Codec; 2] = [Codec::Gzip, Codec::Zstd];

    /// The object name suffix, which is how readers pick a decoder.
    pub fn suffix(self) -> &'static str {
        match self {
            Codec::Gzip => ".jsonl.gz",
            Codec::Zstd => ".jsonl.zst",
        }
    }

    /// The HTTP content coding (RFC 9110 for gzip, RFC 8878 for zstd).
    pub fn content_encoding(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
        }
    }

    /// The level used when none is given: fast enough that compressing
    /// one object takes less time than reading and encoding the next.
    pub fn default_level(self) -> i32 {
        match self {
            Codec::Gzip => 1,
            Codec::Zstd => 3,
        }
    }

    /// The levels the codec accepts.
    pub fn levels(self) -> std::ops::RangeInclusive<i32> {
        match self {
            Codec::Gzip => 1..=9,
            Codec::Zstd => 1..=19,
        }
    }

    /// The codec an object name ends with, and the name without it.
    pub fn split_name(name: &str) -> Option<(&str, Codec)> {
        Codec::ALL
            .into_iter()
            .find_map(|codec| name.strip_suffix(codec.suffix()).map(|stem| (stem, codec)))
    }

    /// A reader of the decompressed bytes of `compressed`.
    pub fn decoder<'a>(self, compressed: impl Read + 'a) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Codec::Gzip => Box::new(flate2::read::MultiGzDecoder::new(compressed)),
            Codec::Zstd => Box::new(zstd::stream::read::Decoder::new(compressed)?),
        })
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.content_encoding())
    }
}

impl FromStr for Codec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "gzip" | "gz" => Ok(Codec::Gzip),
            "zstd" | "zst" => Ok(Codec::Zstd),
            other => Err(permanent!("unknown compression {other:?} (gzip or zstd)")),
        }
    }
}

/// A codec and its level, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compression {
    codec: Codec,
    level: i32,
}

impl Default for Compression {
    fn default() -> Self {
        Compression::new(Codec::default(), None).expect("the default level is valid")
    }
}

impl Compression {
    /// `level` defaults to the codec's; a level the codec does not accept is
    /// refused with a message naming the range.
    pub fn new(codec: Codec, level: Option<i32>) -> Result<Self, Error> {
        let level = level.unwrap_or(codec.default_level());
        if !codec.levels().contains(&level) {
            let range = codec.levels();
            return Err(permanent!(
                "compression level {level} is not one {codec} accepts ({}..={})",
                range.start(),
                range.end()
            ));
        }
        Ok(Compression { codec, level })
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// A compressor writing into `out`, for a body compressed as it is built.
    pub fn encoder(&self, out: Vec<u8>) -> io::Result<BodyEncoder> {
        Ok(match self.codec {
            Codec::Gzip => BodyEncoder::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::new(self.level as u32),
            )),
            Codec::Zstd => BodyEncoder::Zstd(zstd::stream::write::Encoder::new(out, self.level)?),
        })
    }

    /// Compresses a whole object body.
    pub fn compress(&self, data: &[u8]) -> io::Result<Vec<u8>> {
        let out = Vec::with_capacity(data.len() / 4);
        match self.codec {
            Codec::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::new(self.level as u32));
                gz.write_all(data)?;
                gz.finish()
            }
            Codec::Zstd => zstd::stream::encode_all(data, self.level).map(|mut v| {
                v.shrink_to_fit();
                v
            }),
        }
    }
}

/// A body being compressed as records are added (see [`crate::Batch`]).
pub enum BodyEncoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl BodyEncoder {
    pub fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            BodyEncoder::Gzip(e) => e.write_all(data),
            BodyEncoder::Zstd(e) => e.write_all(data),
        }
    }

    /// The compressed bytes so far (a lower bound of the body's size).
    pub fn compressed_len(&self) -> usize {
        match self {
            BodyEncoder::Gzip(e) => e.get_ref().len(),
            BodyEncoder::Zstd(e) => e.get_ref().len(),
        }
    }

    /// The whole compressed body.
    pub fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            BodyEncoder::Gzip(e) => e.finish(),
            BodyEncoder::Zstd(e) => e.finish(),
        }
    }
}

impl fmt::Debug for BodyEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BodyEncoder({} compressed bytes)", self.compressed_len())
    }
}

/// Whether two byte streams are equal, read 64 KiB at a time.
pub fn same_bytes(mut a: impl Read, mut b: impl Read) -> io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut a, &mut x)?;
        let m = read_full(&mut b, &mut y)?;
        if x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_compares_what_bodies_hold_not_how_they_were_compressed() {
        let records: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("{{\"seq\":{i}}}\n").into_bytes())
            .collect();
        for codec in Codec::ALL {
            let fast = Compression::new(codec, Some(1)).unwrap().compress(&records).unwrap();
            let small = Compression::new(codec, Some(9)).unwrap().compress(&records).unwrap();
            assert_ne!(fast, small, "{codec}: two levels, two encodings");
            assert!(same_bytes(codec.decoder(&fast[..]).unwrap(), codec.decoder(&small[..]).unwrap()).unwrap());
            let mut other = records.clone();
            other[70_000] ^= 1;
            let other = Compression::new(codec, Some(1)).unwrap().compress(&other).unwrap();
            assert!(!same_bytes(codec.decoder(&fast[..]).unwrap(), codec.decoder(&other[..]).unwrap()).unwrap());
            // One a prefix of the other: not the same.
            let cut = Compression::new(codec, Some(1))
                .unwrap()
                .compress(&records[..records.len() - 1])
                .unwrap();
            assert!(!same_bytes(codec.decoder(&fast[..]).unwrap(), codec.decoder(&cut[..]).unwrap()).unwrap());
        }
    }

    #[test]
    fn every_codec_round_trips_and_names_its_objects() {
        let data = "{\"seq\":1,\"payload\":\"café ✓\"}\n".repeat(1000);
        for codec in Codec::ALL {
            let c = Compression::new(codec, None).unwrap();
            let packed = c.compress(data.as_bytes()).unwrap();
            assert!(packed.len() < data.len() / 10, "{codec} compresses");
            let mut back = String::new();
            codec.decoder(&packed[..]).unwrap().read_to_string(&mut back).unwrap();
            assert_eq!(back, data);
            let name = format!("p/00000000000000000001-00000000000000000002{}", codec.suffix());
            assert_eq!(
                Codec::split_name(&name),
                Some(("p/00000000000000000001-00000000000000000002", codec))
            );
            assert_eq!(codec.to_string().parse::<Codec>(), Ok(codec));
        }
        assert_eq!(Codec::split_name("a.jsonl"), None);
    }

    #[test]
    fn levels_outside_the_codec_range_are_refused() {
        assert!(
            Compression::new(Codec::Gzip, Some(10))
                .unwrap_err()
                .message
                .contains("gzip accepts (1..=9)")
        );
        assert!(Compression::new(Codec::Zstd, Some(0)).is_err());
        assert!(Compression::new(Codec::Zstd, Some(19)).is_ok());
        assert!("lz4".parse::<Codec>().unwrap_err().message.contains("gzip or zstd"));
    }
}
