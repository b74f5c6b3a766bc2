//! Run evidence: what the events say about each run, checked against the
//! runtime's own rules, from the events alone.
//!
//! A [`Profile`] is a runtime's rules as data (agentrt's is the default):
//! which event type plays which part, which payload fields name the tool,
//! the approval, the model call. [`RunCheck`] is fed events in seq order and
//! keeps state only for runs that are still open; it reports each broken
//! rule once, as a [`RunFinding`] with run, step, seq and tool, and each
//! run as a [`RunSummary`] when it ends. [`Touched`] collects which runs and
//! side effects a range of events holds, for the findings of the chain
//! checks ("which runs does this break touch, and what needs reconciling").
//! [`synth`] writes the other way round: agentrt's own run sequences, for
//! demo and test databases (`chainship generate`).

pub mod affected;
pub mod check;
pub mod finding;
pub mod synth;
pub mod tally;
pub mod touched;

/// A runtime's event roles live with the chain: the SIEM mapping reads them too.
pub use chainship_chain::profile::{self, AGENTRT, Profile, Role};
/// The payload fields and event times the rules read live with the chain,
/// which the SIEM record formats also map from.
pub use chainship_chain::{payload, time};
pub use check::{RestoreError, RunCheck, RunCheckConfig, RunEvent};
pub use finding::{RunFinding, RunFindingKind, RunStatus, RunSummary};
pub use touched::{SideEffect, Touched};
