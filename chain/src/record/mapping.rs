//! What a SIEM format is to chainship: a mapping of the chainship record
//! into another schema that carries the record whole. Each format is one
//! module implementing [`Mapping`] ([`super::ocsf`], [`super::ecs`]);
//! [`super::RecordFormat::mapping`] is the one place that lists them, and
//! writing, detecting and reading back go through it, so a new format is
//! one module, one enum variant and its arms (the compiler names each).

use serde_json::Value;

use super::Record;
use super::facts::Facts;

/// One SIEM format's mapping.
pub trait Mapping: Sync {
    /// How every line this format writes begins (its first member, which
    /// the writer always puts first), for telling a torn record from a file
    /// that is not a sink's, and for reading a line as written quickly.
    fn line_start(&self) -> &'static [u8];

    /// Appends `record` (one JSON object, no newline) to `out`, from the
    /// record's derived `facts` and its own JSON line `canonical` (carried
    /// whole).
    fn write(&self, out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, canonical: &[u8]);

    /// Whether a parsed JSON object is of this format (one of another
    /// class is then found not to be ours by the comparison).
    fn detect(&self, value: &Value) -> bool;

    /// The chainship record a parsed line carries, or why it has none (an
    /// integrity error: the line proves nothing).
    fn carried(&self, value: &Value) -> Result<Record<'static>, crate::Error>;

    /// The carried record of a line in this format, read without building
    /// the whole JSON tree (the caller then checks the line is byte for
    /// byte what chainship writes for it). `None` sends it the long way.
    fn carried_quickly(&self, json: &[u8]) -> Option<Record<'static>>;
}
