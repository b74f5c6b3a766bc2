//! `chainship config check`: validate a config file and show the settings a
//! command would run with, secrets masked.

use clap::FromArgMatches;
use clap::parser::ValueSource;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::args::{OutputArgs, SinkWriteArgs};
use crate::config::{ConfigFile, is_secret, is_secret_kafka, leaf_paths};
use crate::exit::{CliError, CmdResult, OK};

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    Check(ConfigCheckArgs),
}

/// Validate a config file; print the effective settings with secrets masked.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship config check --config /etc/chainship/chainship.toml
  chainship config check --config chainship.toml --for 'anchor verify' --json

Unknown keys and values a flag would refuse are errors naming the file, line and key (exit 2).
Settings come from flags, then CHAINSHIP_* variables, then the file, then built-in defaults.")]
pub struct ConfigCheckArgs {
    /// Which command's settings to show, by its full name (`follow`, `anchor verify`, `verify-export`, ...);
    /// by default the first of `follow`, `anchor verify`, `verify-export` that takes every key in the file.
    #[arg(long = "for", value_name = "COMMAND")]
    pub command: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &ConfigCheckArgs, root: clap::Command, file: Option<&ConfigFile>) -> CmdResult {
    let file = file.ok_or_else(|| CliError::usage("config check needs --config FILE (or CHAINSHIP_CONFIG)"))?;
    file.validate(&root)?;
    // The full path (`anchor verify`), never just its last word: `verify`
    // and `anchor verify` are different commands with different settings.
    let paths = leaf_paths(&root);
    let wanted = match &args.command {
        Some(command) => command.split_whitespace().collect::<Vec<_>>().join(" "),
        None => command_for(file, &paths)?,
    };
    let Some((_, leaf)) = paths.iter().find(|(path, _)| *path == wanted) else {
        let valid: Vec<&str> = paths.iter().map(|(path, _)| path.as_str()).collect();
        return Err(CliError::usage(format!(
            "--for {:?}: no such command; use one of: {}",
            wanted,
            valid.join(", ")
        )));
    };
    let leaf_name = leaf.get_name().to_owned();
    // Global settings (`--log-format`) apply to every command: show them too.
    let mut leaf = leaf.clone();
    for global in root
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_id() != "config")
    {
        leaf = leaf.arg(global.clone().global(false));
    }
    let leaf = file.apply(leaf);
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
    let matches = relaxed.try_get_matches_from([leaf_name.as_str()]).map_err(|e| {
        CliError::usage(
            e.render()
                .to_string()
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
                .to_owned(),
        )
    })?;
    // Settings that are valid one by one but not together (a level the codec lacks).
    if leaf.get_arguments().any(|a| a.get_id() == "s3_compression") {
        let write = SinkWriteArgs::from_arg_matches(&matches).map_err(|e| CliError::usage(e.to_string()))?;
        write
            .compression()
            .map_err(|e| CliError::usage(format!("{}: {e}", file.path.display())))?;
    }

    let mut settings = Vec::new();
    let mut missing = Vec::new();
    for arg in leaf.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(long) = arg.get_long() else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
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
        let masked: Vec<String> = raw
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
            Some(ValueSource::DefaultValue) => match file.entries.iter().find(|e| e.long == long) {
                Some(e) => format!("{}:{}", file.path.display(), e.line),
                None => "default".to_owned(),
            },
            _ => "default".to_owned(),
        };
        settings.push((long.to_owned(), masked, source));
    }
    if args.output.json {
        outln!(
            "{}",
            json!({
                "file": file.path,
                "command": wanted,
                "settings": settings.iter().map(|(k, v, s)| json!({"key": k, "values": v, "source": s})).collect::<Vec<_>>(),
                "missing": missing,
            })
        );
    } else {
        outln!(
            "{}: ok ({} key(s)) for `chainship {wanted}`",
            file.path.display(),
            file.entries.len()
        );
        for (k, v, s) in &settings {
            outln!("{k} = {}    # {s}", v.join(","));
        }
        if !missing.is_empty() {
            outln!("missing for `chainship {wanted}`: {}", missing.join(", "));
        }
    }
    if missing.is_empty() {
        Ok(OK)
    } else {
        // The file is not enough to run the command: a setup error.
        Err(CliError::usage(format!(
            "{}: missing for `chainship {wanted}`: {}",
            file.path.display(),
            missing.join(", ")
        )))
    }
}

/// The command a config file is for when `--for` is not given: the first of
/// the commands a config file usually serves that takes every key in it.
fn command_for(file: &ConfigFile, paths: &[(String, clap::Command)]) -> Result<String, CliError> {
    const USUAL: [&str; 3] = ["follow", "anchor verify", "verify-export"];
    let takes_all = |leaf: &clap::Command| {
        file.entries
            .iter()
            .all(|e| leaf.get_arguments().any(|a| a.get_long() == Some(e.long.as_str())) || e.long == "log-format")
    };
    USUAL
        .iter()
        .find(|name| paths.iter().any(|(path, leaf)| path == *name && takes_all(leaf)))
        .map(|name| (*name).to_owned())
        .ok_or_else(|| {
            CliError::usage(format!(
                "{}: no one of {} takes every key in it; say which command with --for",
                file.path.display(),
                USUAL.join(", ")
            ))
        })
}
