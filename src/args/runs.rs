//! The run check's flags: which runtime's rules, how long silence may
//! last, which tools cannot act on the outside world.

use std::time::Duration;

use chainship_runs::{Profile, RunCheck, RunCheckConfig, Touched};
use clap::Args;

use crate::exit::CliError;

/// `--profile`, `--open-after`, `--read-only-tool`.
#[derive(Args, Clone, Debug)]
pub struct RunRulesArgs {
    /// Whose run rules to check the events against: agentrt, or none to turn the run check off.
    #[arg(long, default_value = "agentrt", value_name = "NAME", help_heading = "Run check")]
    pub profile: String,
    /// A run (or a tool call, a model call) silent this long by the events' own time is left running (or its outcome unknown).
    #[arg(long, default_value = "15m", value_name = "DURATION", value_parser = humantime::parse_duration, help_heading = "Run check")]
    pub open_after: Duration,
    /// A tool that cannot act on the outside world, so not a side effect to reconcile; repeat for several.
    #[arg(
        long = "read-only-tool",
        value_name = "NAME",
        value_delimiter = ',',
        help_heading = "Run check"
    )]
    pub read_only_tools: Vec<String>,
}

impl RunRulesArgs {
    /// The profile, `None` for `--profile none`.
    pub fn profile(&self) -> Result<Option<&'static Profile>, CliError> {
        if self.profile == "none" {
            return Ok(None);
        }
        Profile::named(&self.profile)
            .map(Some)
            .ok_or_else(|| CliError::usage(format!("--profile {}: unknown; agentrt or none", self.profile)))
    }

    pub fn config(&self) -> RunCheckConfig {
        RunCheckConfig {
            open_after: self.open_after,
            read_only_tools: self.read_only_tools.clone(),
        }
    }

    /// A run check, or `None` when turned off.
    pub fn check(&self) -> Result<Option<RunCheck>, CliError> {
        Ok(self.profile()?.map(|p| RunCheck::new(p, self.config())))
    }

    /// A collector of the runs and side effects in a range, or `None`.
    pub fn touched(&self) -> Result<Option<Touched>, CliError> {
        Ok(self.profile()?.map(|p| Touched::new(p, &self.read_only_tools)))
    }
}
