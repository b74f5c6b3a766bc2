//! The run check inside the follower: every event that passed the chain
//! check is also judged against the runtime's run rules (see
//! `chainship_runs`). A finding is logged and counted, never a reason to
//! stop: the log is what it is, and the export must carry it.
//!
//! On start the state of the runs still open at the resume point is
//! rebuilt from the database (events 1 to the cursor, read without
//! re-hashing), so a restart neither forgets an open tool start nor raises
//! a finding a continuous run would not have.

use chainship_chain::{DbError, EventBatch, EventDb, EventRef};
use chainship_runs::{Profile, RunCheck, RunCheckConfig, RunEvent, RunFindingKind};

use crate::metrics;

/// Which rules, and how they are applied.
#[derive(Clone, Debug)]
pub struct RunRules {
    pub profile: &'static Profile,
    pub config: RunCheckConfig,
}

pub struct FollowerRunCheck {
    check: RunCheck,
}

impl FollowerRunCheck {
    /// The check, with the runs open at `after` rebuilt from `db`.
    pub fn rebuild(rules: &RunRules, db: &EventDb, after: u64) -> Result<FollowerRunCheck, DbError> {
        let mut check = RunCheck::new(rules.profile, rules.config.clone());
        let mut page = EventBatch::new();
        let mut read = 0;
        while read < after {
            page.clear();
            if db.read_page(read, 4096, 8 << 20, &mut page)? == 0 {
                break;
            }
            for e in page.iter().take_while(|e| e.seq <= after) {
                check.feed(&RunEvent::from(&e));
            }
            read = page.last().map_or(after, |e| e.seq);
            check.sweep();
        }
        let mut me = FollowerRunCheck { check };
        if after > 0 {
            tracing::info!(
                after,
                open_runs = me.check.open_runs(),
                "run check: the state of open runs rebuilt from the database"
            );
        }
        me.publish();
        Ok(me)
    }

    pub fn feed(&mut self, e: &EventRef<'_>) {
        self.check.feed(&RunEvent::from(e));
    }

    /// After a page: applies the silence rule, logs and counts findings.
    pub fn page_done(&mut self) {
        self.check.sweep();
        self.publish();
    }

    fn publish(&mut self) {
        for f in self.check.take_findings() {
            tracing::warn!(
                kind = f.kind.as_str(),
                run = %f.run_id,
                step = %f.step_id,
                seq = f.seq,
                tool = f.tool.as_deref().unwrap_or(""),
                "run check: {}",
                f.message
            );
            metrics::run_finding(f.kind.as_str());
        }
        let _ = self.check.take_summaries();
        metrics::runs(self.check.open_runs(), self.check.total(RunFindingKind::UnknownOutcome));
    }
}
