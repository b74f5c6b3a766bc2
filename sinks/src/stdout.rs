//! `stdout:` — writes JSON Lines to standard output, for piping into
//! Vector, Fluent Bit or `jq`. It cannot read back what it wrote, so across
//! a crash the reader may see the last batch twice (records carry `seq` to
//! drop such duplicates).

use std::io::Write;

use async_trait::async_trait;
use chainship_chain::Head;

use crate::Sink;
use crate::batch::Batch;
use crate::error::SinkError;

#[derive(Default)]
pub struct StdoutSink;

#[async_trait]
impl Sink for StdoutSink {
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError> {
        Ok(after)
    }

    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError> {
        let mut out = std::io::stdout().lock();
        match out.write_all(&batch.jsonl).and_then(|_| out.flush()) {
            Ok(()) => Ok(()),
            // The reader has gone (`... | head`): nothing to retry or report.
            // The follower stops as Unix tools do on SIGPIPE (status 141),
            // like the CLI's own output; the cursor stays at the last batch
            // written whole.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(SinkError::closed("stdout sink: the reader of standard output has gone"))
            }
            Err(e) => Err(SinkError::permanent(format!("stdout sink: {e}"))),
        }
    }

    async fn check(&mut self) -> Result<String, SinkError> {
        Ok("standard output".into())
    }

    fn reads_back(&self) -> bool {
        false
    }

    fn describe(&self) -> String {
        "stdout:".into()
    }
}
