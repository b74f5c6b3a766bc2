//! The invocations the tests repeat, as builders: a test says what is
//! particular to it, and the flags every such run needs are written once.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use super::*;

/// `chainship follow` of a database as an origin; add a sink and a cursor
/// (or their file forms), then any flag of the test's own.
///
/// ```ignore
/// let out = Follow::new(&db, ORIGIN).file_sink(&out).cursor(&cursor).start_at_seq_1().once().output();
/// ```
pub struct Follow(Command);

impl Follow {
    pub fn new(db: &Path, origin: &str) -> Follow {
        let mut cmd = bin();
        cmd.args(["follow", "--db", path_str(db), "--origin", origin]);
        Follow(cmd)
    }

    /// `--sink URL`.
    pub fn sink(mut self, url: &str) -> Follow {
        self.0.args(["--sink", url]);
        self
    }

    /// `--sink file:PATH`.
    pub fn file_sink(self, path: &Path) -> Follow {
        self.sink(&format!("file:{}", path_str(path)))
    }

    /// `--cursor PATH`.
    pub fn cursor(mut self, path: &Path) -> Follow {
        self.0.args(["--cursor", path_str(path)]);
        self
    }

    /// `--from-start`: a follower without a cursor starts at seq 1.
    pub fn start_at_seq_1(self) -> Follow {
        self.args(["--from-start"])
    }

    /// `--once`: deliver what there is, then stop.
    pub fn once(self) -> Follow {
        self.args(["--once"])
    }

    /// Anchored into `a`'s file store, signed with its key.
    pub fn anchored(self, a: &Anchored) -> Follow {
        let store = format!("file:{}", path_str(&a.anchors));
        self.args(["--anchor", &store, "--signing-key", path_str(&a.key)])
    }

    /// The test's own flags.
    pub fn args<I, S>(mut self, args: I) -> Follow
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.0.args(args);
        self
    }

    /// The command, to spawn or adjust further.
    pub fn command(self) -> Command {
        self.0
    }

    /// Runs it to the end.
    pub fn output(mut self) -> Output {
        self.0.output().unwrap()
    }
}
