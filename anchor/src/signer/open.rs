//! From `--signing-key` to a signer: a key file, an ssh-agent key or a
//! PKCS#11 token key.

use chainship_chain::{Error, Setting, permanent};
use std::path::Path;
use std::sync::Arc;

use super::Signer;

/// Opens what `--signing-key` names: a key file, `ssh-agent:PATH` (an
/// Ed25519 key an ssh-agent holds, PATH its public key file), or an RFC
/// 7512 `pkcs11:` URI (a key in a token). `name` names
/// a key kept outside a key file (a key file names its own).
pub fn open(spec: &Path, name: Option<&str>) -> Result<Arc<dyn Signer>, Error> {
    let text = spec.to_string_lossy();
    if text.starts_with("pkcs11:") {
        let signer = super::pkcs11::Pkcs11Signer::open(&text, name)?;
        return Ok(Arc::new(signer));
    }
    if let Some(public) = text.strip_prefix("ssh-agent:") {
        let signer = super::ssh_agent::AgentSigner::open(Path::new(public), name, None)?;
        return Ok(Arc::new(signer));
    }
    if name.is_some() {
        return Err(permanent!(
            "{}: a key file names its own key; a key name is for ssh-agent and PKCS#11 keys",
            spec.display()
        )
        .with_setting(Setting::SigningKeyName));
    }
    super::SignerKey::load_signer(spec)
}

/// What `--signing-key` named, as messages may show it: a `pkcs11:` URI
/// without its PIN.
pub fn shown(spec: &Path) -> String {
    let text = spec.to_string_lossy();
    match super::pkcs11::Pkcs11Uri::parse(&text) {
        Ok(uri) => uri.shown(),
        Err(_) if text.starts_with("pkcs11:") => text.split('?').next().unwrap_or_default().to_owned() + "?…",
        Err(_) => text.into_owned(),
    }
}
