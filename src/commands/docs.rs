//! `chainship completions SHELL` and `chainship man --out DIR`: shell
//! completions and man pages made from the command definitions themselves
//! (`clap_complete`, `clap_mangen`), so they never disagree with `--help`.
//! The Debian package and `scripts/package` write them at build time.

use std::path::PathBuf;

use clap::Args;
use clap_complete::Shell;

use crate::exit::{CliError, CmdResult, OK};

/// Print the completion script for a shell.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship completions bash > /tmp/chainship.bash
  chainship completions zsh > /tmp/_chainship

Install the bash script as /usr/share/bash-completion/completions/chainship (the Debian
package does), or source it from ~/.bashrc.")]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: Shell,
}

/// Write the man pages: chainship(1) and one page per subcommand.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship man --out /tmp/chainship-man

Read a page with man -l /tmp/chainship-man/chainship-follow.1.")]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn completions(args: &CompletionsArgs, mut command: clap::Command) -> CmdResult {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "chainship", &mut script);
    let text = String::from_utf8(script).map_err(|e| CliError::usage(format!("the completion script: {e}")))?;
    outln!("{}", text.trim_end_matches('\n'));
    Ok(OK)
}

pub fn man(args: &ManArgs, command: clap::Command) -> CmdResult {
    let out = &args.out;
    std::fs::create_dir_all(out).map_err(|e| CliError::usage(format!("--out {}: {e}", out.display())))?;
    clap_mangen::generate_to(command, out)
        .map_err(|e| CliError::usage(format!("--out {}: cannot write the pages: {e}", out.display())))?;
    Ok(OK)
}
