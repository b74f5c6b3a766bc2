//! Witnesses: the ones the follower asks to cosign (`--witness`), and the
//! witness keys an auditor trusts (`--witness-key`), each with a quorum.

use chainship_anchor::cosignature::{WitnessKey, WitnessPolicy, load_witness_keys};
use chainship_follower::witnessing::Witness;
use clap::Args;

use crate::exit::CliError;

/// The witnesses a follower asks to cosign each checkpoint.
#[derive(Args, Clone, Debug)]
pub struct WitnessArgs {
    /// A witness to ask for cosignatures, URL=VKEY: its add-checkpoint URL prefix and its
    /// cosignature key (NAME+KEYID+BASE64, type 0x04); repeat for several.
    #[arg(long = "witness", value_name = "URL=VKEY", value_delimiter = ',')]
    pub witnesses: Vec<String>,
    /// How many witnesses must cosign a checkpoint before it is kept cosigned (default: all).
    #[arg(long, value_name = "K")]
    pub witness_quorum: Option<usize>,
}

impl WitnessArgs {
    /// The witnesses and the quorum; none configured: empty.
    pub fn load(&self) -> Result<(Vec<Witness>, usize), CliError> {
        let mut witnesses = Vec::new();
        for spec in &self.witnesses {
            let (url, key) = spec
                .split_once('=')
                .ok_or_else(|| CliError::usage(format!("--witness {spec}: expected URL=VKEY")))?;
            let uri = url.parse::<hyper::Uri>().ok().filter(|u| {
                matches!(u.scheme_str(), Some("http" | "https"))
                    && u.host().is_some_and(|h| !h.is_empty())
                    && port_ok(u)
            });
            if uri.is_none() {
                return Err(CliError::usage(format!(
                    "--witness {spec}: the URL must be http:// or https://, with a host and a port from 1 to 65535"
                )));
            }
            let key = WitnessKey::parse(key).map_err(|e| CliError::usage(format!("--witness {e}")))?;
            if witnesses.iter().any(|w: &Witness| w.key.key == key.key || w.url == url) {
                return Err(CliError::usage(format!(
                    "--witness {spec}: this witness (its URL or key) is listed twice; a quorum counts each witness once"
                )));
            }
            witnesses.push(Witness {
                url: url.to_owned(),
                key,
            });
        }
        let quorum = quorum(self.witness_quorum, witnesses.len(), "--witness")?;
        Ok((witnesses, quorum))
    }
}

/// The witness keys an auditor trusts, and how many must have cosigned.
#[derive(Args, Clone, Debug)]
pub struct WitnessTrustArgs {
    /// A trusted witness key (NAME+KEYID+BASE64, type 0x04), or a file of them; repeat for
    /// several. With it, a checkpoint without a quorum of these cosignatures is `uncosigned`.
    #[arg(long = "witness-key", value_name = "VKEY|FILE", value_delimiter = ',')]
    pub witness_keys: Vec<String>,
    /// How many of the trusted witnesses must have cosigned (default: all).
    #[arg(long, value_name = "K")]
    pub witness_quorum: Option<usize>,
    /// A checkpoint whose head was published less than this long ago may still be waiting
    /// for its cosignatures: a warning, not `uncosigned` (stores, not single proofs).
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub witness_grace: std::time::Duration,
}

impl WitnessTrustArgs {
    /// The policy, or `None` when no witness key is given.
    pub fn load(&self) -> Result<Option<WitnessPolicy>, CliError> {
        if self.witness_keys.is_empty() {
            if self.witness_quorum.is_some() {
                return Err(CliError::usage("--witness-quorum needs --witness-key"));
            }
            return Ok(None);
        }
        let keys = load_witness_keys(&self.witness_keys).map_err(|e| CliError::usage(format!("--witness-key {e}")))?;
        let quorum = quorum(self.witness_quorum, keys.len(), "--witness-key")?;
        Ok(Some(WitnessPolicy {
            keys,
            quorum,
            rule: None,
        }))
    }
}

fn quorum(given: Option<usize>, of: usize, flag: &str) -> Result<usize, CliError> {
    match given {
        Some(_) if of == 0 => Err(CliError::usage(format!("--witness-quorum needs {flag}"))),
        None => Ok(of),
        Some(k) if k >= 1 && k <= of => Ok(k),
        Some(k) => Err(CliError::usage(format!(
            "--witness-quorum {k}: between 1 and the number of {flag} given ({of})"
        ))),
    }
}

/// A port, when the URL names one, is 1 to 65535 (`Uri::port` is `None`
/// both without a port and with one out of range).
fn port_ok(uri: &hyper::Uri) -> bool {
    let written = uri
        .authority()
        .and_then(|a| a.as_str().rsplit_once(':'))
        .map(|(_, p)| p)
        .filter(|p| !p.contains(']'));
    match written {
        None => true,
        Some(p) => p.parse::<u16>().is_ok_and(|n| n > 0),
    }
}
