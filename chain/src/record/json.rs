//! A small JSON object writer for records: every record of every format is
//! written through it, once per event on the follower's busiest thread, so
//! it appends straight to the batch and escapes strings eight bytes at a
//! time. Its output is byte for byte what `serde_json` writes (tested), so a
//! record's bytes do not depend on which writer made them.

/// What each byte needs in a JSON string: 0 nothing, else the letter after
/// the backslash (`u`: `\u00XX`). The same escapes serde_json writes.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// A mask with the high bit set in each byte of `w` that is a control
/// byte, `"` or `\\`, exact up to the first such byte (borrows only ever
/// mark bytes after a true one, so `trailing_zeros` finds the first).
#[inline]
fn special_bytes(w: u64) -> u64 {
    let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    // Bytes below 0x20 (those at or above 0x80 never borrow into a match).
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    control | zero_in(w ^ (ONES * b'"' as u64)) | zero_in(w ^ (ONES * b'\\' as u64))
}

/// Appends `s` as a JSON string, quotes included.
#[inline]
pub fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Room for a few escapes too (a JSON text carried as a string has many).
    out.reserve(bytes.len() + bytes.len() / 4 + 8);
    out.push(b'"');
    let (mut start, mut i) = (0, 0);
    loop {
        // Jump a word at a time to the next byte that needs an escape.
        while let Some(word) = bytes.get(i..i + 8) {
            let special = special_bytes(u64::from_le_bytes(word.try_into().expect("8 bytes")));
            if special != 0 {
                i += (special.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        // Fewer than eight bytes left: byte by byte.
        while i < bytes.len() && ESCAPE[bytes[i] as usize] == 0 && bytes.len() - i < 8 {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else { break };
        let escape = ESCAPE[b as usize];
        if escape == 0 {
            continue;
        }
        push_run(out, &bytes[start..i]);
        match escape {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
            letter => {
                out.push(b'\\');
                out.push(letter);
            }
        }
        i += 1;
        start = i;
    }
    push_run(out, &bytes[start..]);
    out.push(b'"');
}

/// Appends a run of plain bytes: short ones without a call to memcpy
/// (between a payload's many quotes the runs are a few bytes).
#[inline]
fn push_run(out: &mut Vec<u8>, run: &[u8]) {
    if run.len() <= 16 {
        for &b in run {
            out.push(b);
        }
    } else {
        out.extend_from_slice(run);
    }
}

/// Writes one JSON object, member by member. Keys are the writer's own
/// constants (plain ASCII names), written as they are.
pub struct Object<'o> {
    out: &'o mut Vec<u8>,
    empty: bool,
}

impl<'o> Object<'o> {
    #[inline]
    pub fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, empty: true }
    }

    #[inline]
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        debug_assert!(key.bytes().all(|b| ESCAPE[b as usize] == 0));
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    #[inline]
    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        string(self.key(key), value);
        self
    }

    /// A member only when there is a value.
    #[inline]
    pub fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        if let Some(value) = value {
            self.str(key, value);
        }
        self
    }

    #[inline]
    pub fn num(&mut self, key: &str, value: impl itoa::Integer) -> &mut Self {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        self
    }

    /// Strings as a JSON array.
    pub fn strs(&mut self, key: &str, values: &[&str]) -> &mut Self {
        let out = self.key(key);
        out.push(b'[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(out, v);
        }
        out.push(b']');
        self
    }

    /// JSON the caller already wrote (a whole value), as it is.
    pub fn raw(&mut self, key: &str, json: &[u8]) -> &mut Self {
        self.key(key).extend_from_slice(json);
        self
    }

    /// A nested object, written by `members`.
    #[inline]
    pub fn object(&mut self, key: &str, members: impl FnOnce(&mut Object<'_>)) -> &mut Self {
        let out = self.key(key);
        let mut inner = Object::new(out);
        members(&mut inner);
        inner.close();
        self
    }

    /// An array holding one object, written by `members`.
    pub fn one_object_array(&mut self, key: &str, members: impl FnOnce(&mut Object<'_>)) -> &mut Self {
        let out = self.key(key);
        out.push(b'[');
        let mut inner = Object::new(out);
        members(&mut inner);
        inner.close();
        self.out.push(b']');
        self
    }

    #[inline]
    pub fn close(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ours(s: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_byte_that_needs_an_escape_gets_serde_jsons() {
        for b in 0u8..0x80 {
            let s = String::from(b as char);
            for text in [
                s.clone(),
                format!("0123456{s}89abcdef"),
                format!("{s}{s}{s}{s}{s}{s}{s}{s}{s}"),
            ] {
                assert_eq!(ours(&text), serde_json::to_string(&text).unwrap(), "byte {b:#x}");
            }
        }
    }

    proptest! {
        #[test]
        fn strings_are_written_as_serde_json_writes_them(s in "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}\u{80}-\u{10ffff}])*") {
            prop_assert_eq!(ours(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn words_with_no_special_byte_are_not_flagged(w in any::<u64>()) {
            let special = w.to_le_bytes().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\');
            let mask = special_bytes(w);
            prop_assert_eq!(mask != 0, special);
            if special {
                let first = w.to_le_bytes().iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\').unwrap();
                prop_assert_eq!((mask.trailing_zeros() / 8) as usize, first);
            }
        }
    }

    #[test]
    fn an_object_is_what_serde_json_writes_for_the_same_members() {
        let mut out = Vec::new();
        let mut o = Object::new(&mut out);
        o.str("a", "x\"y")
            .num("n", -5i64)
            .opt_str("none", None)
            .strs("l", &["p", "q"]);
        o.object("inner", |o| {
            o.num("u", 7u64).raw("r", br#"{"k":[1]}"#);
        });
        o.one_object_array("arr", |o| {
            o.str("z", "");
        });
        o.close();
        let expected = serde_json::json!({"a": "x\"y", "n": -5, "l": ["p", "q"], "inner": {"u": 7, "r": {"k": [1]}}, "arr": [{"z": ""}]});
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&out).unwrap(), expected);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":"x\"y","n":-5,"l":["p","q"],"inner":{"u":7,"r":{"k":[1]}},"arr":[{"z":""}]}"#
        );
    }
}
