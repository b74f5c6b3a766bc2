//! The one error vocabulary of every chainship crate: what went wrong, in
//! one line naming the file, seq or setting at fault, and its [`ErrorKind`],
//! which alone decides what happens next (retry, stop, exit code).

use std::fmt;

/// What happens after an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Timeouts, 5xx, a broker or server away: retry with backoff.
    Transient,
    /// Bad configuration, access denied, a bucket missing: stop (exit 2).
    Permanent,
    /// The data contradicts the chain (a sink or store holds what the chain
    /// does not, a damaged record): never retried; stop (exit 1).
    Integrity,
    /// The reader of what the process writes has gone (`... | head`): stop
    /// without a word, as Unix tools do on SIGPIPE (exit 141).
    Closed,
}

impl ErrorKind {
    /// The label used in metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Transient => "transient",
            ErrorKind::Permanent => "permanent",
            ErrorKind::Integrity => "integrity",
            ErrorKind::Closed => "closed",
        }
    }
}

/// A setting an error points at, named for what it means. Libraries never
/// name command-line flags; the CLI knows which flag sets each of these and
/// adds it to the message it prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setting {
    /// Following a database path that is a symbolic link.
    AllowSymlink,
    /// The events table's name.
    Table,
    /// One of the column names, by what it holds ("hash column").
    Column(&'static str),
    /// Where a follower without a cursor starts (from seq 1, or from a seq).
    StartFrom,
    /// The librdkafka settings passed through to the Kafka sink.
    KafkaClient,
    /// The Kafka sink's pinned partition.
    KafkaPartition,
    /// The AWS profile of the S3 sink.
    SinkS3Profile,
    /// The AWS profile of the S3 anchor store.
    AnchorS3Profile,
    /// The credentials file of the S3 sink.
    SinkS3CredentialsFile,
    /// The credentials file of the S3 anchor store.
    AnchorS3CredentialsFile,
    /// The seq an inclusion proof is asked for.
    ProofSeq,
    /// The checkpoint an inclusion proof is asked in.
    ProofCheckpoint,
    /// The name a signing key signs notes with.
    SigningKeyName,
    /// The runtime profile of the run check (`none` turns it off).
    RunProfile,
    /// Adding events to an existing generated database.
    Append,
    /// How many records after the last trusted head a check lets pass.
    MaxUnvouched,
    /// The file a nightly verify keeps what it verified in.
    VerifyState,
    /// Where a command writes what it makes (an evidence bundle).
    Out,
}

impl Setting {
    /// The setting in words, for messages read outside the CLI (logs).
    pub fn describe(self) -> &'static str {
        match self {
            Setting::AllowSymlink => "the setting that allows a symbolic link",
            Setting::Table => "the table setting",
            Setting::Column(_) => "the column name settings",
            Setting::StartFrom => "the start setting (from seq 1, or from a seq)",
            Setting::KafkaClient => "the Kafka client settings passed through",
            Setting::KafkaPartition => "the Kafka partition setting",
            Setting::SinkS3Profile => "the S3 sink's profile setting",
            Setting::AnchorS3Profile => "the anchor store's profile setting",
            Setting::SinkS3CredentialsFile => "the S3 sink's credentials file setting",
            Setting::AnchorS3CredentialsFile => "the anchor store's credentials file setting",
            Setting::ProofSeq => "the seq to prove",
            Setting::ProofCheckpoint => "the checkpoint to prove in",
            Setting::SigningKeyName => "the signing key name setting",
            Setting::RunProfile => "the run check's profile setting",
            Setting::Append => "the append setting",
            Setting::MaxUnvouched => "the unvouched limit",
            Setting::VerifyState => "the verify state file setting",
            Setting::Out => "the output path setting",
        }
    }
}

/// Errors that know their kind (the typed errors of each crate).
pub trait HasKind: fmt::Display {
    fn kind(&self) -> ErrorKind;

    /// The setting to look at, if the error comes from one.
    fn setting(&self) -> Option<Setting> {
        None
    }

    /// The message without the setting's description (the CLI names the flag instead).
    fn bare_message(&self) -> String {
        self.to_string()
    }
}

/// A one-line message, its kind, and the setting it points at: what sinks,
/// anchor stores and S3 calls return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub setting: Option<Setting>,
}

impl Error {
    /// An error of `kind` saying `message` (one line naming what is at fault).
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> Self {
        Error {
            kind,
            message: message.to_string(),
            setting: None,
        }
    }

    /// The same error, pointing at `setting`.
    pub fn with_setting(mut self, setting: Setting) -> Self {
        self.setting = Some(setting);
        self
    }

    /// May pass: retried with backoff.
    pub fn transient(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Transient, message)
    }

    /// Will not pass as things are: stops, exit 2.
    pub fn permanent(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Permanent, message)
    }

    /// The data contradicts the chain: stops, exit 1, never retried.
    pub fn integrity(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Integrity, message)
    }

    /// The output's reader has gone: stops quietly, exit 141.
    pub fn closed(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Closed, message)
    }

    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }

    /// The same error, its message prefixed with where it happened.
    pub fn context(self, place: impl fmt::Display) -> Self {
        Error {
            message: format!("{place}: {}", self.message),
            ..self
        }
    }

    /// Classifies an I/O error: a full disk or an interruption may pass,
    /// a missing permission will not.
    pub fn from_io(context: impl fmt::Display, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let message = format!("{context}: {e}");
        match e.kind() {
            K::PermissionDenied | K::NotFound | K::IsADirectory | K::NotADirectory | K::ReadOnlyFilesystem => {
                Error::permanent(message)
            }
            _ => Error::transient(message),
        }
    }

    /// Classifies an I/O error on storage that is often a mount (an anchor
    /// store in another trust domain): a name not found there, or a
    /// directory where a file was, may be the mount away and pass; a
    /// missing permission, a read-only file system, a file where a
    /// directory belongs or an unsupported operation will not.
    pub fn from_io_on_mount(context: impl fmt::Display, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let message = format!("{context}: {e}");
        match e.kind() {
            K::PermissionDenied | K::ReadOnlyFilesystem | K::NotADirectory | K::Unsupported => {
                Error::permanent(message)
            }
            _ => Error::transient(message),
        }
    }
}

impl HasKind for Error {
    fn kind(&self) -> ErrorKind {
        self.kind
    }

    fn setting(&self) -> Option<Setting> {
        self.setting
    }

    fn bare_message(&self) -> String {
        self.message.clone()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match self.setting {
            Some(s) => write!(f, " (see {})", s.describe()),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Error {}

/// `Error::permanent(format!(..))`: a setting, file or argument that will
/// not work as it is (exit 2).
#[macro_export]
macro_rules! permanent {
    ($($arg:tt)*) => { $crate::Error::permanent(format!($($arg)*)) };
}

/// `Error::transient(format!(..))`: may pass (a server away, a disk full).
#[macro_export]
macro_rules! transient {
    ($($arg:tt)*) => { $crate::Error::transient(format!($($arg)*)) };
}

/// `Error::integrity(format!(..))`: data read back that contradicts what it
/// must say (a damaged note, tile or record: exit 1).
#[macro_export]
macro_rules! integrity {
    ($($arg:tt)*) => { $crate::Error::integrity(format!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_split_into_passing_and_lasting() {
        let full = std::io::Error::from_raw_os_error(28); // ENOSPC
        assert_eq!(Error::from_io("writing x", &full).kind, ErrorKind::Transient);
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(Error::from_io("x", &gone).kind, ErrorKind::Permanent);
        assert_eq!(Error::from_io_on_mount("x", &gone).kind, ErrorKind::Transient);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = Error::from_io("writing x", &denied);
        assert_eq!(e.kind, ErrorKind::Permanent);
        assert!(e.message.starts_with("writing x: "), "{}", e.message);
        assert_eq!(e.context("sink").message.split(": ").next(), Some("sink"));
        let pointed = Error::permanent("partition 7 does not exist").with_setting(Setting::KafkaPartition);
        assert_eq!(
            pointed.to_string(),
            "partition 7 does not exist (see the Kafka partition setting)"
        );
        assert_eq!(pointed.bare_message(), "partition 7 does not exist");
        assert_eq!(pointed.clone().context("sink").setting, Some(Setting::KafkaPartition));
    }
}
