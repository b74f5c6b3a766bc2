//! The settings a command would run with: each flag's value and where it
//! came from (a flag, a variable, the file's line, the default), secrets
//! masked; and the required flags nothing sets.

use chainship_core::{Error, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

use crate::file::{ConfigFile, leaf_paths};
use crate::{is_secret, is_secret_kafka};

/// One flag's effective value.
pub struct Shown {
    /// Its long name.
    pub key: String,
    /// Its values, a secret as `****` (a librdkafka one as `key=****`).
    pub values: Vec<String>,
    /// `flag`, `environment`, `FILE:LINE` or `default`.
    pub source: String,
}

/// What a command would run with.
pub struct Effective {
    /// The command's full path (`anchor verify`).
    pub command: String,
    pub settings: Vec<Shown>,
    /// The required flags nothing sets (`--db`).
    pub missing: Vec<String>,
    /// The command's flags as parsed with nothing on the command line.
    pub matches: ArgMatches,
    /// The command, the file applied.
    pub leaf: Command,
}

fn usage(message: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Permanent, message)
}

impl ConfigFile {
    /// The settings of `command` (a full path; by default the first of
    /// `usual` that takes every key in the file), the file and the
    /// environment applied.
    pub fn effective(&self, root: &Command, command: Option<&str>, usual: &[&str]) -> Result<Effective, Error> {
        // The full path (`anchor verify`), never just its last word: `verify`
        // and `anchor verify` are different commands with different settings.
        let paths = leaf_paths(root);
        let wanted = match command {
            Some(command) => command.split_whitespace().collect::<Vec<_>>().join(" "),
            None => self.command_for(&paths, usual)?,
        };
        let Some((_, leaf)) = paths.iter().find(|(path, _)| *path == wanted) else {
            let valid: Vec<&str> = paths.iter().map(|(path, _)| path.as_str()).collect();
            return Err(usage(format!(
                "--for {wanted:?}: no such command; use one of: {}",
                valid.join(", ")
            )));
        };
        let name = leaf.get_name().to_owned();
        // Global settings (`--log-format`) apply to every command: show them too.
        let mut leaf = leaf.clone();
        for global in root
            .get_arguments()
            .filter(|a| a.is_global_set() && a.get_id() != "config")
        {
            leaf = leaf.arg(global.clone().global(false));
        }
        let leaf = self.apply(leaf);
        // Show what is missing instead of failing on it.
        let required: Vec<String> = leaf
            .get_arguments()
            .filter(|a| a.is_required_set())
            .map(|a| a.get_id().to_string())
            .collect();
        let mut relaxed = leaf.clone();
        for id in &required {
            relaxed = relaxed.mut_arg(id, |a| a.required(false));
        }
        let matches = relaxed.try_get_matches_from([name.as_str()]).map_err(|e| {
            let text = e.render().to_string();
            usage(text.lines().next().unwrap_or("").trim_start_matches("error: "))
        })?;
        let (mut settings, mut missing) = (Vec::new(), Vec::new());
        for arg in leaf.get_arguments() {
            let id = arg.get_id().as_str();
            let Some(long) = arg.get_long().filter(|l| !matches!(*l, "help" | "version")) else {
                continue;
            };
            let raw: Vec<String> = matches
                .get_raw(id)
                .map(|vals| vals.map(|v| v.to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            if raw.is_empty() {
                if required.iter().any(|r| r == id) {
                    missing.push(format!("--{long}"));
                }
                continue;
            }
            let values = raw
                .iter()
                .map(|v| match v.split_once('=') {
                    _ if is_secret(long) => "****".to_owned(),
                    Some((k, _)) if is_secret_kafka(k) => format!("{k}=****"),
                    _ => v.clone(),
                })
                .collect();
            let source = match matches.value_source(id) {
                Some(ValueSource::CommandLine) => "flag".to_owned(),
                Some(ValueSource::EnvVariable) => "environment".to_owned(),
                Some(ValueSource::DefaultValue) => match self.entries.iter().find(|e| e.long == long) {
                    Some(e) => format!("{}:{}", self.path.display(), e.line),
                    None => "default".to_owned(),
                },
                _ => "default".to_owned(),
            };
            settings.push(Shown {
                key: long.to_owned(),
                values,
                source,
            });
        }
        Ok(Effective {
            command: wanted,
            settings,
            missing,
            matches,
            leaf,
        })
    }

    /// The command the file is for when none is named: the first of `usual`
    /// that takes every key in it.
    fn command_for(&self, paths: &[(String, Command)], usual: &[&str]) -> Result<String, Error> {
        let takes_all = |leaf: &Command| {
            self.entries
                .iter()
                .all(|e| leaf.get_arguments().any(|a| a.get_long() == Some(e.long.as_str())) || e.long == "log-format")
        };
        usual
            .iter()
            .find(|name| paths.iter().any(|(path, leaf)| path == *name && takes_all(leaf)))
            .map(|name| (*name).to_owned())
            .ok_or_else(|| {
                usage(format!(
                    "{}: no one of {} takes every key in it; say which command with --for",
                    self.path.display(),
                    usual.join(", ")
                ))
            })
    }
}
