//! `--config chainship.toml`: every flag can also live in a file.
//!
//! Keys are the long flag names (`batch-size` or `batch_size`); a `[kafka]`
//! table holds librdkafka settings passed through. The file's values become
//! the flags' defaults, so flags and `CHAINSHIP_*` variables override it.
//! A key that no subcommand knows is an error naming the file and line, and
//! so is a value its flag would refuse.

use std::path::{Path, PathBuf};

use chainship_core::{Error, ErrorKind};
use clap::{Arg, ArgAction, Command};

use crate::env::command_line_only;
use crate::is_secret;

fn usage(message: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Permanent, message)
}

/// One setting from the file.
#[derive(Clone, Debug)]
pub struct Entry {
    pub key: String,
    /// The flag it sets (its long name).
    pub long: String,
    pub values: Vec<String>,
    pub line: usize,
}

#[derive(Clone, Debug)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

fn scalar(value: &toml_edit::Value) -> Option<String> {
    match value {
        toml_edit::Value::String(s) => Some(s.value().clone()),
        toml_edit::Value::Integer(i) => Some(i.value().to_string()),
        toml_edit::Value::Float(f) => Some(f.value().to_string()),
        toml_edit::Value::Boolean(b) => Some(b.value().to_string()),
        _ => None,
    }
}

impl ConfigFile {
    /// The settings in `text`, read from `path` (named in every error).
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, Error> {
        let doc = toml_edit::Document::parse(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(text, s.start));
            usage(format!("{}:{line}: not valid TOML: {}", path.display(), e.message()))
        })?;
        let bad = |line: usize, key: &str, why: &str| usage(format!("{}:{line}: {key}: {why}", path.display()));
        let mut entries = Vec::new();
        for (key, item) in doc.as_table().iter() {
            let line = doc
                .as_table()
                .key(key)
                .and_then(|k| k.span())
                .map_or(0, |s| line_of(text, s.start));
            if key == "kafka" {
                let table = item
                    .as_table_like()
                    .ok_or_else(|| bad(line, key, "must be a table of librdkafka settings"))?;
                for (k, v) in table.iter() {
                    // Each setting's own line, not the `[kafka]` header's.
                    let line = table
                        .key(k)
                        .and_then(|k| k.span())
                        .map_or(line, |s| line_of(text, s.start));
                    let value = v
                        .as_value()
                        .and_then(scalar)
                        .ok_or_else(|| bad(line, &format!("kafka.{k}"), "must be a plain value"))?;
                    entries.push(Entry {
                        key: format!("kafka.{k}"),
                        long: "kafka-opt".into(),
                        values: vec![format!("{k}={value}")],
                        line,
                    });
                }
                continue;
            }
            let value = item
                .as_value()
                .ok_or_else(|| bad(line, key, "tables are only allowed for [kafka]"))?;
            let values = match value {
                toml_edit::Value::Array(items) => items.iter().map(scalar).collect::<Option<Vec<_>>>(),
                other => scalar(other).map(|v| vec![v]),
            }
            .ok_or_else(|| bad(line, key, "must be a string, number, boolean or array of those"))?;
            entries.push(Entry {
                key: key.to_owned(),
                long: key.replace('_', "-"),
                values,
                line,
            });
        }
        Ok(ConfigFile {
            path: path.to_owned(),
            entries,
        })
    }

    fn error(&self, entry: &Entry, why: impl std::fmt::Display) -> Error {
        usage(format!("{}:{}: {}: {why}", self.path.display(), entry.line, entry.key))
    }

    /// Checks every key against the flags of every subcommand, and every
    /// value against its flag's parser.
    pub fn validate(&self, root: &Command) -> Result<(), Error> {
        let mut commands = leaf_commands(root);
        commands.push(root.clone()); // global flags such as --log-format
        for entry in &self.entries {
            // Flags that narrow what a check covers are taken from the command
            // line only: a file left in a job's setup must never make a check cover less.
            let settable: Vec<&Arg> = commands
                .iter()
                .filter(|c| !command_line_only(c.get_name(), &entry.long))
                .filter_map(|c| find_arg(c, &entry.long))
                .collect();
            let Some(arg) = settable.first() else {
                let anywhere = commands.iter().any(|c| find_arg(c, &entry.long).is_some());
                return Err(self.error(
                    entry,
                    if anywhere {
                        "taken from the command line only (a config file must not narrow what a check covers)"
                    } else {
                        "unknown key (not a flag of any chainship command)"
                    },
                ));
            };
            check_values(arg, &entry.values).map_err(|why| self.error(entry, why))?;
        }
        Ok(())
    }

    /// Makes the file's values the defaults of `cmd`'s flags (never of
    /// those taken from the command line only).
    pub fn apply(&self, mut cmd: Command) -> Command {
        let mut longs: Vec<&str> = self.entries.iter().map(|e| e.long.as_str()).collect();
        longs.dedup();
        let name = cmd.get_name().to_owned();
        for long in longs {
            if command_line_only(&name, long) {
                continue;
            }
            let Some(id) = find_arg(&cmd, long).map(|a| a.get_id().clone()) else {
                continue;
            };
            // Several entries may set one flag (the [kafka] table): all are kept.
            let values: Vec<clap::builder::OsStr> = self
                .entries
                .iter()
                .filter(|e| e.long == long)
                .flat_map(|e| e.values.iter().map(|v| clap::builder::OsStr::from(v.clone())))
                .collect();
            // A value from the file satisfies a required flag.
            cmd = cmd.mut_arg(id, |a| a.default_values(values).required(false));
        }
        cmd
    }
}

fn find_arg<'a>(cmd: &'a Command, long: &str) -> Option<&'a Arg> {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long) && long != "config")
}

/// Every command that runs something (subcommands of subcommands included).
pub fn leaf_commands(root: &Command) -> Vec<Command> {
    leaf_paths(root).into_iter().map(|(_, c)| c).collect()
}

/// Every command that runs something, with its full path (`anchor verify`):
/// two commands may share a name (`verify`, `anchor verify`).
pub fn leaf_paths(root: &Command) -> Vec<(String, Command)> {
    let mut out = Vec::new();
    for sub in root.get_subcommands() {
        if sub.has_subcommands() {
            for (path, leaf) in leaf_paths(sub) {
                out.push((format!("{} {path}", sub.get_name()), leaf));
            }
        } else {
            out.push((sub.get_name().to_owned(), sub.clone()));
        }
    }
    out
}

/// Runs a value through its flag's own parser. A refused secret is not
/// echoed (clap's message quotes the value).
fn check_values(arg: &Arg, values: &[String]) -> Result<(), String> {
    let long = arg.get_long().unwrap_or("value");
    let probe = Arg::new(long.to_owned())
        .long(long.to_owned())
        .value_parser(arg.get_value_parser().clone())
        .action(ArgAction::Append)
        .value_delimiter(arg.get_value_delimiter());
    let mut argv = vec!["probe".to_owned()];
    for v in values {
        argv.push(format!("--{long}={v}"));
    }
    Command::new("probe")
        .arg(probe)
        .try_get_matches_from(argv)
        .map(|_| ())
        .map_err(|e| {
            if is_secret(long) {
                return format!("invalid value for --{long} (not shown)");
            }
            let text = e.render().to_string();
            text.lines()
                .next()
                .unwrap_or("invalid value")
                .trim_start_matches("error: ")
                .to_owned()
        })
}

/// Finds `--config PATH` (or `CHAINSHIP_CONFIG`) before clap parses.
pub fn config_path(args: &[String]) -> Option<PathBuf> {
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        if a == "--config" {
            return iter.next().map(PathBuf::from);
        }
        if let Some(p) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("CHAINSHIP_CONFIG").map(PathBuf::from)
}

/// Applies the file to every command that runs something: each takes the
/// values of the flags it has, so which command runs need not be guessed
/// from the arguments (a flag's value may spell a command's name).
pub fn apply_everywhere(mut root: Command, file: &ConfigFile) -> Command {
    let names: Vec<String> = root.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in names {
        root = root.mut_subcommand(name, |sub| {
            if sub.has_subcommands() {
                apply_everywhere(sub, file)
            } else {
                file.apply(sub)
            }
        });
    }
    root
}
