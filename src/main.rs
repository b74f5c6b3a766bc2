//! `chainship`: the command line. Each subcommand lives in `commands/`; this
//! file parses arguments, sets up logging and maps results to exit codes.

// Argument enums are parsed once per run: boxing their variants buys nothing.
#![allow(clippy::large_enum_variant)]

/// `println!` for results on stdout; a closed stdout (`chainship anchor list
/// | head`) ends the process quietly instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::report::stdout_line(format_args!($($arg)*))
    };
}

mod args;
mod commands;
mod exit;
mod job_metrics;
mod logging;
mod progress;
mod report;
mod trusted_copy;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::logging::LogFormat;

/// Ship a hash-chained SQLite audit log to Kafka, S3 or files, anchor its
/// head where its writer cannot reach, and verify it.
#[derive(Parser, Debug)]
#[command(name = "chainship", version, propagate_version = true)]
#[command(after_help = "Examples:
  chainship verify --db audit.db
  chainship generate --db demo.db --events 10000

Exit codes: 0 ok, 1 verification failed, 2 usage or setup error.")]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// A TOML file of settings (keys are the long flag names); flags and CHAINSHIP_* variables override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Verify(commands::verify::VerifyArgs),
    Generate(commands::generate::GenerateArgs),
    Follow(commands::follow::FollowArgs),
    Keygen(commands::keygen::KeygenArgs),
    Demo(commands::demo::DemoArgs),
    VerifyExport(commands::verify_export::VerifyExportArgs),
    Monitor(commands::monitor::MonitorArgs),
    Check(commands::check::CheckArgs),
    Restore(commands::restore::RestoreArgs),
    Diff(commands::diff::DiffArgs),
    Runs(commands::runs::RunsArgs),
    Prove(commands::prove::ProveArgs),
    Redact(commands::redact::RedactArgs),
    CheckProof(commands::check_proof::CheckProofArgs),
    Evidence(commands::evidence::EvidenceArgs),
    CheckEvidence(commands::evidence::CheckEvidenceArgs),
    /// Work with config files.
    #[command(subcommand)]
    Config(commands::config_cmd::ConfigCommand),
    /// Check or list the signed heads kept in an anchor store.
    #[command(subcommand)]
    Anchor(commands::anchor::AnchorCommand),
    Completions(commands::docs::CompletionsArgs),
    Man(commands::docs::ManArgs),
}

/// glibc gives each thread that allocates an arena of its own (up to
/// eight per core) and keeps what is freed in it: pages read on one thread
/// and freed on another kept a follower's resident memory ~20 MiB above its
/// heap on a long catch-up. Two arenas keep it near the heap. An operator's
/// `MALLOC_ARENA_MAX` is left to rule.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// The command tree, with every flag's environment variable named by rule.
fn cli_command() -> clap::Command {
    chainship_config::env::apply(Cli::command())
}

/// The config file at `path`, read as a small regular file (never a FIFO).
fn load_config(path: &std::path::Path) -> Result<chainship_config::ConfigFile, exit::CliError> {
    let text = chainship_anchor::files::read_small(path, 16 << 20)
        .map_err(|e| exit::CliError::usage(format!("--config {}: {}", path.display(), e.message)))?;
    chainship_config::ConfigFile::parse(path, &text).map_err(|e| exit::CliError::usage(e.message))
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    // Every argument is text: a path that is not UTF-8 is refused with the
    // argument named (std::env::args would panic on it).
    let argv: Vec<String> = match std::env::args_os()
        .enumerate()
        .map(|(i, a)| a.into_string().map_err(|bad| (i, bad)))
        .collect()
    {
        Ok(argv) => argv,
        Err((i, bad)) => {
            let message = format!(
                "argument {i} ({}) is not valid UTF-8: chainship takes paths and values as UTF-8 text",
                bad.to_string_lossy()
            );
            logging::fatal(logging::LogFormat::Text, exit::USAGE, &message);
            return ExitCode::from(exit::USAGE);
        }
    };
    // Errors before the arguments are parsed still honour `--log-format`.
    let early_format = logging::requested_format(&argv);
    let config = match chainship_config::config_path(&argv)
        .map(|p| load_config(&p))
        .transpose()
    {
        Ok(c) => c,
        Err(e) => {
            logging::fatal(early_format, e.code, &e.message);
            return ExitCode::from(e.code);
        }
    };
    let mut command = cli_command();
    if let Some(file) = &config {
        if let Err(e) = file.validate(&command) {
            logging::fatal(early_format, exit::USAGE, &e.message);
            return ExitCode::from(exit::USAGE);
        }
        command = chainship_config::apply_everywhere(file.apply(command), file);
    }
    let cli = match command
        .try_get_matches_from(&argv)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line, like every other error: clap's first line names the flag.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
                .collect();
            let message = message.join(" ");
            logging::fatal(early_format, exit::USAGE, message.trim_start_matches("error: "));
            return ExitCode::from(exit::USAGE);
        }
    };
    logging::init(cli.log_format);
    let result = match &cli.command {
        Command::Verify(args) => commands::verify::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Follow(args) => commands::follow::run(args),
        Command::Keygen(args) => commands::keygen::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::VerifyExport(args) => commands::verify_export::run(args),
        Command::Monitor(args) => commands::monitor::run(args),
        Command::Check(args) => commands::check::run(args),
        Command::Restore(args) => commands::restore::run(args),
        Command::Diff(args) => commands::diff::run(args),
        Command::Runs(args) => commands::runs::run(args),
        Command::Prove(args) => commands::prove::run(args),
        Command::Redact(args) => commands::redact::run(args),
        Command::CheckProof(args) => commands::check_proof::run(args),
        Command::Evidence(args) => commands::evidence::run(args),
        Command::CheckEvidence(args) => commands::evidence::check(args),
        Command::Config(commands::config_cmd::ConfigCommand::Check(args)) => {
            commands::config_cmd::run(args, cli_command(), config.as_ref())
        }
        Command::Anchor(cmd) => commands::anchor::run(cmd),
        Command::Completions(args) => commands::docs::completions(args, cli_command()),
        Command::Man(args) => commands::docs::man(args, cli_command()),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // A reader that left (`| head`) is told nothing, as by Unix tools.
            if e.code != exit::CLOSED_STDOUT {
                logging::fatal(cli.log_format, e.code, &e.message);
            }
            ExitCode::from(e.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainship_config::env::{command_line_only, env_name};

    fn longs(cmd: &clap::Command) -> Vec<String> {
        cmd.get_arguments()
            .filter_map(|a| a.get_long())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_flag_of_every_command_has_a_one_line_help() {
        let root = cli_command();
        root.clone().debug_assert();
        let mut missing = Vec::new();
        for (path, leaf) in chainship_config::leaf_paths(&root) {
            for arg in leaf.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if matches!(long, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} --{long}"));
                }
            }
        }
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn commands_offer_only_flags_that_do_something_for_them() {
        let root = cli_command();
        let leaf = |path: &str| {
            chainship_config::leaf_paths(&root)
                .into_iter()
                .find(|(p, _)| p == path)
                .map(|(_, c)| longs(&c))
                .unwrap()
        };
        for reader in ["anchor verify", "anchor list", "verify-export"] {
            assert!(!leaf(reader).contains(&"anchor-retain-days".to_owned()), "{reader}");
        }
        let export = leaf("verify-export");
        assert!(
            export
                .iter()
                .all(|l| !l.starts_with("s3-batch") && l != "kafka-no-fence"),
            "{export:?}"
        );
        assert!(export.contains(&"s3-endpoint".to_owned()) && export.contains(&"kafka-opt".to_owned()));
        for publisher in ["follow", "check"] {
            assert!(
                leaf(publisher).contains(&"anchor-retain-days".to_owned()),
                "{publisher}"
            );
        }
        // check reads the database as follow does: same schema flags.
        for flag in ["table", "seq-column", "allow-symlink", "db"] {
            assert!(leaf("check").contains(&flag.to_owned()), "check --{flag}");
        }
    }

    #[test]
    fn every_flag_of_every_command_follows_the_rule() {
        fn walk(cmd: &clap::Command, path: &str, seen: &mut usize) {
            for arg in cmd.get_arguments() {
                if let Some(long) = arg.get_long().filter(|l| !matches!(*l, "help" | "version")) {
                    let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                    let expected = (!command_line_only(cmd.get_name(), long)).then(|| env_name(long));
                    assert_eq!(env, expected, "{path} --{long}");
                    *seen += 1;
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut seen = 0;
        walk(&cli_command(), "chainship", &mut seen);
        assert!(seen > 80, "only {seen} flags found");
        assert_eq!(env_name("kafka-opt"), "CHAINSHIP_KAFKA_OPT");
        assert!(command_line_only("verify", "from") && !command_line_only("verify-export", "from"));
        assert!(command_line_only("anchor", "allow-no-heads") && command_line_only("verify-export", "allow-no-heads"));
    }
}
