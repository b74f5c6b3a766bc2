//! `chainship demo`: the story of `chainship_demo`, run with this binary.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chainship_demo::{Failure, Options};
use clap::Args;

use crate::exit::{CliError, CmdResult, OK};
use crate::report::CLOSED_STDOUT;

/// Run the end-to-end demo: generate, follow, anchor, verify, tamper, catch.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship demo
  chainship demo --dir /tmp/my-demo --events 5000")]
pub struct DemoArgs {
    /// Work here (created; must not exist), and keep it afterwards. Default: a
    /// new directory under the system temp dir ($TMPDIR), removed at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Events in the demo database before the live writer starts.
    #[arg(long, default_value_t = 2000)]
    pub events: u64,
    /// How long the live writer appends while the follower runs.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub writer_for: Duration,
}

pub fn run(args: &DemoArgs) -> CmdResult {
    let exe = std::env::current_exe().map_err(|e| CliError::usage(format!("demo: cannot find this binary: {e}")))?;
    // Ctrl-C stops the demo at its next step instead of killing it, so that
    // the temporary directory is still removed; a second one kills it.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&interrupted));
        let _ = signal_hook::flag::register(signal, Arc::clone(&interrupted));
    }
    let options = Options {
        exe,
        dir: args
            .dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("chainship-demo-{}", std::process::id()))),
        keep: args.dir.is_some(),
        events: args.events,
        writer_for: args.writer_for,
        interrupted,
    };
    let mut say = |line: String| {
        crate::report::try_stdout_line(format_args!("{line}")).map_err(|e| match e.code {
            CLOSED_STDOUT => Failure::ClosedOutput,
            _ => Failure::Setup(e.message),
        })
    };
    match chainship_demo::run(&options, &mut say) {
        Ok(()) => Ok(OK),
        // The reader of stdout left (`chainship demo | head -3`): exit 141
        // quietly, as every command does, but after the clean-up.
        Err(Failure::ClosedOutput) => Ok(CLOSED_STDOUT),
        Err(Failure::Interrupted) => Err(CliError {
            code: 130,
            message: "demo: interrupted".into(),
        }),
        Err(Failure::Setup(m)) => Err(CliError::usage(m)),
        Err(Failure::Unexpected(m)) => Err(CliError::failed(m)),
    }
}
