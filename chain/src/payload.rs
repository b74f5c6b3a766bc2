//! The few payload fields the rules read, taken from the stored JSON
//! without building the rest of it. A value that is not a string counts as
//! absent; a payload that is not a JSON object (or repeats a key the rules
//! read) gives nothing, which the rules then treat as missing evidence.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The fields, borrowed from the payload where no escape forces a copy.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Payload<'a> {
    #[serde(borrow)]
    pub tool: Text<'a>,
    #[serde(borrow)]
    pub approval_id: Text<'a>,
    #[serde(borrow)]
    pub status: Text<'a>,
    #[serde(borrow)]
    pub outcome: Text<'a>,
    #[serde(borrow)]
    pub call_id: Text<'a>,
    /// A decision's kind (`tool_call`, `complete`, `fail`).
    #[serde(borrow)]
    pub kind: Text<'a>,
    /// A tool call's arguments, as the JSON text stored (agentrt writes the
    /// decided and the started arguments through the same encoder).
    #[serde(borrow)]
    pub args: Option<&'a serde_json::value::RawValue>,
}

impl<'a> Payload<'a> {
    pub fn parse(json: &'a [u8]) -> Payload<'a> {
        // Only an object: serde would also fill the fields from an array, by position.
        if json.trim_ascii_start().first() != Some(&b'{') {
            return Payload::default();
        }
        serde_json::from_slice(json).unwrap_or_default()
    }
}

/// A string value, or nothing for any other JSON value.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Option<Cow<'a, str>>);

impl Text<'_> {
    pub fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Text(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_and_nothing_else() {
        let p =
            Payload::parse(br#"{"tool":"bank_pay","args":{"to":"bob","tool":"x"},"approval_id":"a1","n":[1,{"a":2}]}"#);
        assert_eq!((p.tool.get(), p.approval_id.get()), (Some("bank_pay"), Some("a1")));
        assert_eq!(p.outcome.get(), None);
        let escaped = Payload::parse(br#"{"outcome":"al\u006cow"}"#);
        assert_eq!(escaped.outcome.get(), Some("allow"));
        assert_eq!(Payload::parse(br#"{"call_id":7}"#).call_id.get(), None);
        let empty = |p: Payload<'_>| p.tool.get().is_none() && p.outcome.get().is_none() && p.args.is_none();
        assert!(empty(Payload::parse(b"not json")));
        assert!(empty(Payload::parse(br#"["tool"]"#)));
        let args = Payload::parse(br#"{"tool":"t","args":{"a": [1, {"b":"c"}]}}"#);
        assert_eq!(args.args.map(|a| a.get()), Some(r#"{"a": [1, {"b":"c"}]}"#));
        // A repeated key the rules read is not evidence of either value.
        assert_eq!(
            Payload::parse(br#"{"outcome":"deny","outcome":"allow"}"#).outcome.get(),
            None
        );
    }
}
