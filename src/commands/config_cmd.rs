//! `chainship config check`: validate a config file and show the settings a
//! command would run with, secrets masked.

use chainship_config::ConfigFile;
use clap::FromArgMatches;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::args::{OutputArgs, SinkWriteArgs};
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

/// The commands a config file usually serves, in the order `--for` defaults to.
const USUAL: [&str; 3] = ["follow", "anchor verify", "verify-export"];

pub fn run(args: &ConfigCheckArgs, root: clap::Command, file: Option<&ConfigFile>) -> CmdResult {
    let file = file.ok_or_else(|| CliError::usage("config check needs --config FILE (or CHAINSHIP_CONFIG)"))?;
    let usage = |e: chainship_chain::Error| CliError::usage(e.message);
    file.validate(&root).map_err(usage)?;
    let e = file.effective(&root, args.command.as_deref(), &USUAL).map_err(usage)?;
    // Settings that are valid one by one but not together (a level the codec lacks).
    if e.leaf.get_arguments().any(|a| a.get_id() == "s3_compression") {
        let write = SinkWriteArgs::from_arg_matches(&e.matches).map_err(|e| CliError::usage(e.to_string()))?;
        write
            .compression()
            .map_err(|e| CliError::usage(format!("{}: {e}", file.path.display())))?;
    }
    let wanted = &e.command;
    if args.output.json {
        let settings: Vec<_> = e
            .settings
            .iter()
            .map(|s| json!({"key": s.key, "values": s.values, "source": s.source}))
            .collect();
        outln!(
            "{}",
            json!({"file": file.path, "command": wanted, "settings": settings, "missing": e.missing})
        );
    } else {
        outln!(
            "{}: ok ({} key(s)) for `chainship {wanted}`",
            file.path.display(),
            file.entries.len()
        );
        for s in &e.settings {
            outln!("{} = {}    # {}", s.key, s.values.join(","), s.source);
        }
        if !e.missing.is_empty() {
            outln!("missing for `chainship {wanted}`: {}", e.missing.join(", "));
        }
    }
    if e.missing.is_empty() {
        Ok(OK)
    } else {
        // The file is not enough to run the command: a setup error.
        Err(CliError::usage(format!(
            "{}: missing for `chainship {wanted}`: {}",
            file.path.display(),
            e.missing.join(", ")
        )))
    }
}
