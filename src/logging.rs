//! `tracing` logs on stderr: human-readable by default, JSON for sidecars,
//! and the final error line of a failed run in the same format.
//!
//! Nothing written to stderr may fail the process: with stderr closed or its
//! reader gone (`2>&-`, a log shipper that died) a line is lost, and the run
//! goes on and exits with the code it would have had.

use std::io::{IsTerminal, Write};
use std::time::SystemTime;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// What is logged when `RUST_LOG` is unset: chainship at `info`; the AWS
/// SDK's credential and region lookups only at `error`, since without
/// credentials it warns at length about each instance-metadata attempt, and
/// chainship says the one line that matters (which setting to give).
pub const DEFAULT_FILTER: &str = "info,aws_config=error";

/// Installs the global subscriber. The level comes from `RUST_LOG`
/// ([`DEFAULT_FILTER`] when unset).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| QuietStderr)
        // Its own report of a failed write goes through `eprintln!`, which panics.
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// The last line of a failed run: `chainship: MESSAGE`, or with JSON
/// logging one log line (level ERROR, the message and `exit_code`) that a
/// log pipeline parses like the others. Written whatever `RUST_LOG` says.
pub fn fatal(format: LogFormat, exit_code: u8, message: &str) {
    let line = match format {
        LogFormat::Text => format!("chainship: {message}\n"),
        LogFormat::Json => {
            let line = serde_json::json!({
                "timestamp": humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
                "level": "ERROR",
                "message": message,
                "exit_code": exit_code,
                "target": "chainship",
            });
            format!("{line}\n")
        }
    };
    let _ = QuietStderr.write_all(line.as_bytes());
}

/// The log format asked for on the command line or in the environment, for
/// an error found before the arguments are parsed (a bad flag or config file).
pub fn requested_format(argv: &[String]) -> LogFormat {
    let mut args = argv.iter().skip(1);
    let mut value = None;
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        } else if arg == "--log-format" {
            value = args.next().cloned();
        } else if let Some(v) = arg.strip_prefix("--log-format=") {
            value = Some(v.to_owned());
        }
    }
    value
        .or_else(|| std::env::var("CHAINSHIP_LOG_FORMAT").ok())
        .and_then(|v| LogFormat::from_str(&v, false).ok())
        .unwrap_or_default()
}

/// Standard error that never fails: what cannot be written is dropped.
struct QuietStderr;

impl Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}
