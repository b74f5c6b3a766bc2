//! `--signing-key pkcs11:…`: heads and checkpoints signed inside a PKCS#11
//! token (an HSM, SoftHSM2), so the private key never exists outside it.
//!
//! The key is named by an RFC 7512 URI:
//!
//! ```text
//! pkcs11:token=chainship;object=prod-eu1-heads?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/hsm-pin
//! ```
//!
//! `token` (the token's label) and `object` (the key's label) or `id` (its
//! CKA_ID, percent-encoded bytes) name the key; `module-path` the PKCS#11
//! library; `pin-source` (a file whose first line is the PIN) or
//! `pin-value` the user PIN, which is never logged or echoed. Signing uses
//! `CKM_EDDSA` (pure Ed25519, as signed notes require), so the notes are
//! byte-for-byte those a key file signs; the note's key name is the object's
//! label unless one is given.
//!
//! A token that is missing, locked or removed is a one-line error naming
//! the URI (without the PIN): exit 2 at start; during a run a transient
//! failure, so heads wait and are retried, and the session is opened again
//! on the next try.

use chainship_chain::{Error, Setting, permanent};
use std::path::PathBuf;
use std::sync::Mutex;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::Mechanism;
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::AuthPin;
use ed25519_dalek::{Signature, VerifyingKey};

use crate::note::valid_key_name;
use crate::signer::Signer;
use crate::store::StoreError;

/// What a `pkcs11:` URI names (the PIN kept apart, never shown).
#[derive(Clone, PartialEq, Eq)]
pub struct Pkcs11Uri {
    pub token: String,
    pub object: Option<String>,
    pub id: Option<Vec<u8>>,
    pub module: PathBuf,
    pin: Option<Pin>,
}

#[derive(Clone, PartialEq, Eq)]
enum Pin {
    Value(String),
    File(PathBuf),
}

impl std::fmt::Debug for Pkcs11Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl Pkcs11Uri {
    /// Parses `pkcs11:PATH-ATTRS[?QUERY-ATTRS]` (RFC 7512).
    pub fn parse(uri: &str) -> Result<Pkcs11Uri, Error> {
        let rest = uri
            .strip_prefix("pkcs11:")
            .ok_or_else(|| permanent!("not a pkcs11: URI"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (mut token, mut object, mut id, mut module, mut pin) = (None, None, None, None, None);
        for attr in path.split(';').filter(|a| !a.is_empty()) {
            let (name, value) = attr.split_once('=').ok_or_else(|| {
                permanent!(
                    "attribute {name:?} has no value",
                    name = attr.split('=').next().unwrap_or("")
                )
            })?;
            let value = percent_decode(value).ok_or_else(|| permanent!("{name}: bad percent-encoding"))?;
            match name {
                "token" => token = Some(utf8(name, value)?),
                "object" => object = Some(utf8(name, value)?),
                "id" => id = Some(value),
                // Other path attributes (manufacturer, model, serial, type…) narrow nothing we need.
                _ => {}
            }
        }
        for attr in query.split('&').filter(|a| !a.is_empty()) {
            let (name, value) = attr
                .split_once('=')
                .ok_or_else(|| permanent!("a query attribute has no value"))?;
            let value = percent_decode(value).ok_or_else(|| permanent!("{name}: bad percent-encoding"))?;
            match name {
                "module-path" => module = Some(PathBuf::from(utf8(name, value)?)),
                "pin-value" => pin = Some(Pin::Value(utf8(name, value)?)),
                "pin-source" => {
                    let source = utf8(name, value)?;
                    let file = source.strip_prefix("file:").unwrap_or(&source);
                    pin = Some(Pin::File(PathBuf::from(file)));
                }
                _ => {}
            }
        }
        Ok(Pkcs11Uri {
            token: token.ok_or_else(|| permanent!("the URI names no token (token=LABEL)"))?,
            object,
            id,
            module: module.ok_or_else(|| permanent!("the URI names no module (?module-path=/path/to/library.so)"))?,
            pin,
        })
        .and_then(|u: Pkcs11Uri| {
            if u.object.is_none() && u.id.is_none() {
                Err(permanent!("the URI names no key (object=LABEL or id=ID)"))
            } else {
                Ok(u)
            }
        })
    }

    /// The URI as shown in messages: never the PIN.
    pub fn shown(&self) -> String {
        let mut out = format!("pkcs11:token={}", self.token);
        if let Some(o) = &self.object {
            out += &format!(";object={o}");
        }
        if let Some(id) = &self.id {
            out += ";id=";
            for b in id {
                out += &format!("%{b:02X}");
            }
        }
        out += &format!("?module-path={}", self.module.display());
        match &self.pin {
            Some(Pin::File(p)) => out += &format!("&pin-source={}", p.display()),
            Some(Pin::Value(_)) => out += "&pin-value=(hidden)",
            None => {}
        }
        out
    }

    fn pin(&self) -> Result<Option<AuthPin>, Error> {
        match &self.pin {
            None => Ok(None),
            Some(Pin::Value(v)) => Ok(Some(AuthPin::from(v.clone()))),
            Some(Pin::File(path)) => {
                let text = crate::files::read_small(path, 4096)
                    .map_err(|e| permanent!("pin-source {}: {e}", path.display()))?;
                let pin = text.lines().next().unwrap_or("").to_owned();
                Ok(Some(AuthPin::from(pin)))
            }
        }
    }
}

fn utf8(name: &str, value: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(value).map_err(|_| permanent!("{name}: not UTF-8"))
}

fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// A PKCS#11 error in one short line (the crate's own texts are paragraphs).
fn ck(what: &str, e: CkError) -> Error {
    match e {
        CkError::Pkcs11(rv, function) => permanent!("{what}: {function:?} returned {rv:?}"),
        CkError::LibraryLoading(e) => permanent!("{what}: cannot load the module ({e})"),
        other => permanent!("{what}: {other:?}"),
    }
}

/// An open session, logged in, and the key's handle in it.
struct Open {
    // Kept for the session's life (the library stays loaded and initialized).
    _ctx: Pkcs11,
    session: Session,
    key: ObjectHandle,
}

/// An Ed25519 key in a PKCS#11 token.
pub struct Pkcs11Signer {
    uri: Pkcs11Uri,
    name: String,
    public: VerifyingKey,
    open: Mutex<Option<Open>>,
    /// The digest of a PIN the token refused: never tried again (a token
    /// locks its PIN after a few wrong tries) until the PIN source changes.
    refused_pin: Mutex<Option<[u8; 32]>>,
}

const WRONG_PIN: &str = "the PIN is wrong";

/// A digest of a PIN, to remember one that was refused without keeping it.
fn pin_digest(pin: Option<&AuthPin>) -> [u8; 32] {
    use secrecy::ExposeSecret;
    use sha2::{Digest, Sha256};
    Sha256::digest(pin.map_or("", |p| p.expose_secret()).as_bytes()).into()
}

impl Pkcs11Signer {
    /// Opens the token `uri` names, logs in, and finds the key and its
    /// public half; named `name`, or by the object's label.
    pub fn open(uri: &str, name: Option<&str>) -> Result<Pkcs11Signer, Error> {
        let uri = Pkcs11Uri::parse(uri).map_err(|e| permanent!("{}: {e}", redact(uri)))?;
        let err = |why: Error| why.context(uri.shown());
        let (open, public) = connect(&uri, uri.pin().map_err(&err)?).map_err(&err)?;
        let name = match (name, &uri.object) {
            (Some(n), _) => n.to_owned(),
            (None, Some(label)) => label.clone(),
            (None, None) => {
                return Err(
                    err(permanent!("a key named by id= needs a key name")).with_setting(Setting::SigningKeyName)
                );
            }
        };
        if !valid_key_name(&name) {
            return Err(err(permanent!(
                "key name {name:?}: a key name must be non-empty, without spaces or '+'"
            ))
            .with_setting(Setting::SigningKeyName));
        }
        Ok(Pkcs11Signer {
            uri,
            name,
            public,
            open: Mutex::new(Some(open)),
            refused_pin: Mutex::new(None),
        })
    }
}

/// Makes an Ed25519 key pair inside the token `uri` names, labelled by its
/// `object=` (and `id=`), the private half sensitive and never extractable:
/// it never exists outside the token. Refuses when a key of that label
/// (or id) is there already. Returns its public key.
pub fn generate(uri: &str) -> Result<VerifyingKey, Error> {
    let uri = Pkcs11Uri::parse(uri).map_err(|e| permanent!("{}: {e}", redact(uri)))?;
    let err = |why: Error| why.context(uri.shown());
    let label = uri
        .object
        .clone()
        .ok_or_else(|| err(permanent!("a new key needs a label (object=LABEL)")))?;
    let (_ctx, session) = log_in(&uri, uri.pin().map_err(&err)?, Access::ReadWrite).map_err(&err)?;
    let mut taken = vec![Attribute::Label(label.as_bytes().to_vec())];
    if let Some(id) = &uri.id {
        taken = vec![Attribute::Id(id.clone())];
    }
    if !session
        .find_objects(&taken)
        .map_err(|e| err(ck("looking for the label", e)))?
        .is_empty()
    {
        return Err(err(permanent!(
            "the token already holds a key of that label or id; nothing was made"
        )));
    }
    let mut common = vec![Attribute::Token(true), Attribute::Label(label.as_bytes().to_vec())];
    if let Some(id) = &uri.id {
        common.push(Attribute::Id(id.clone()));
    }
    // The curve by its name (PrintableString "edwards25519"), as PKCS#11 3.0 allows and tokens accept.
    let mut params = vec![0x13, 12];
    params.extend_from_slice(b"edwards25519");
    let mut public = common.clone();
    public.extend([Attribute::Verify(true), Attribute::EcParams(params)]);
    let mut private = common;
    private.extend([
        Attribute::Sign(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
    ]);
    let (public_handle, _) = session
        .generate_key_pair(&Mechanism::EccEdwardsKeyPairGen, &public, &private)
        .map_err(|e| err(ck("making the key pair", e)))?;
    public_key(&session, public_handle).map_err(err)
}

/// A URI shown before it parsed: the query (which may hold the PIN) cut off.
fn redact(uri: &str) -> String {
    match uri.split_once('?') {
        Some((path, _)) => format!("{path}?…"),
        None => uri.to_owned(),
    }
}

/// Loads the module, finds the token, opens a session, logs in and finds
/// the private key; and its public key.
/// Whether a session may change the token (keygen) or only use it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadOnly,
    ReadWrite,
}

/// Loads the module, finds the token by its label, opens a session and
/// logs in: the one way into a token, for signing and for keygen.
fn log_in(uri: &Pkcs11Uri, pin: Option<AuthPin>, access: Access) -> Result<(Pkcs11, Session), Error> {
    let ctx = Pkcs11::new(&uri.module).map_err(|e| ck("loading the module", e))?;
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => return Err(ck("initializing the module", e)),
    }
    let slots = ctx.get_slots_with_token().map_err(|e| ck("listing the slots", e))?;
    let slot = slots
        .into_iter()
        .find(|s| ctx.get_token_info(*s).is_ok_and(|t| t.label().trim_end() == uri.token))
        .ok_or_else(|| {
            permanent!(
                "no token labelled {:?} (is it there? softhsm2-util --show-slots)",
                uri.token
            )
        })?;
    let session = match access {
        Access::ReadOnly => ctx.open_ro_session(slot),
        Access::ReadWrite => ctx.open_rw_session(slot),
    }
    .map_err(|e| ck("opening a session", e))?;
    match session.login(UserType::User, pin.as_ref()) {
        Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
        Err(CkError::Pkcs11(RvError::PinIncorrect, _)) => return Err(Error::permanent(WRONG_PIN)),
        Err(CkError::Pkcs11(RvError::PinLocked, _)) => return Err(permanent!("the PIN is locked")),
        Err(e) => return Err(ck("logging in", e)),
    }
    Ok((ctx, session))
}

fn connect(uri: &Pkcs11Uri, pin: Option<AuthPin>) -> Result<(Open, VerifyingKey), Error> {
    let (ctx, session) = log_in(uri, pin, Access::ReadOnly)?;
    let find = |class: ObjectClass| -> Result<Vec<ObjectHandle>, Error> {
        let mut template = vec![Attribute::Class(class), Attribute::KeyType(KeyType::EC_EDWARDS)];
        if let Some(label) = &uri.object {
            template.push(Attribute::Label(label.as_bytes().to_vec()));
        }
        if let Some(id) = &uri.id {
            template.push(Attribute::Id(id.clone()));
        }
        session.find_objects(&template).map_err(|e| ck("finding the key", e))
    };
    let key = match find(ObjectClass::PRIVATE_KEY)?.as_slice() {
        [one] => *one,
        [] => return Err(permanent!("no Ed25519 private key with that label or id in the token")),
        more => {
            return Err(permanent!(
                "{} Ed25519 private keys match; name one by object= and id=",
                more.len()
            ));
        }
    };
    let public = match find(ObjectClass::PUBLIC_KEY)?.first() {
        Some(handle) => public_key(&session, *handle)?,
        None => {
            return Err(permanent!(
                "no public key object beside the private key (its verifier key cannot be known)"
            ));
        }
    };
    Ok((
        Open {
            _ctx: ctx,
            session,
            key,
        },
        public,
    ))
}

/// The Ed25519 key in a public key object's CKA_EC_POINT (DER OCTET STRING, or raw).
fn public_key(session: &Session, handle: ObjectHandle) -> Result<VerifyingKey, Error> {
    let attrs = session
        .get_attributes(handle, &[AttributeType::EcPoint])
        .map_err(|e| ck("reading the public key", e))?;
    let point = attrs
        .into_iter()
        .find_map(|a| match a {
            Attribute::EcPoint(p) => Some(p),
            _ => None,
        })
        .ok_or_else(|| permanent!("the public key object has no CKA_EC_POINT"))?;
    let raw: &[u8] = match point.as_slice() {
        [0x04, 0x20, rest @ ..] if rest.len() == 32 => rest,
        raw if raw.len() == 32 => raw,
        _ => return Err(permanent!("CKA_EC_POINT is not a 32-byte Ed25519 key")),
    };
    VerifyingKey::from_bytes(raw.try_into().expect("32 bytes"))
        .map_err(|_| permanent!("not a valid Ed25519 public key"))
}

impl Signer for Pkcs11Signer {
    fn name(&self) -> &str {
        &self.name
    }

    fn public_key(&self) -> VerifyingKey {
        self.public
    }

    fn sign(&self, message: &[u8]) -> Result<Signature, StoreError> {
        let fail = |why: String| StoreError::transient(format!("{}: {why}", self.uri.shown()));
        let mut slot = self
            .open
            .lock()
            .map_err(|_| fail("the signer's lock is poisoned".into()))?;
        if slot.is_none() {
            let pin = self.uri.pin().map_err(|e| fail(e.to_string()))?;
            let digest = pin_digest(pin.as_ref());
            let mut refused = self
                .refused_pin
                .lock()
                .map_err(|_| fail("the signer's lock is poisoned".into()))?;
            if *refused == Some(digest) {
                return Err(fail(
                    "the token refused this PIN before; it is not tried again until the PIN source changes (a token locks its PIN after a few wrong tries)"
                        .into(),
                ));
            }
            let (open, public) = match connect(&self.uri, pin) {
                Ok(opened) => opened,
                Err(why) => {
                    if why.message == WRONG_PIN {
                        *refused = Some(digest);
                        tracing::error!(key = %self.uri.shown(), "the token refused the PIN; it is not tried again until the PIN source changes");
                    }
                    return Err(fail(why.to_string()));
                }
            };
            *refused = None;
            if public != self.public {
                return Err(fail(
                    "the token now holds another key under that name; nothing is signed".into(),
                ));
            }
            *slot = Some(open);
        }
        let open = slot.as_ref().expect("just opened");
        let mechanism = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
        match open.session.sign(&mechanism, open.key, message) {
            Ok(bytes) => {
                let bytes: [u8; 64] = bytes
                    .try_into()
                    .map_err(|b: Vec<u8>| fail(format!("a signature of {} bytes, not 64", b.len())))?;
                Ok(Signature::from_bytes(&bytes))
            }
            Err(e) => {
                // Opened again on the next try (a token removed and put back, a session closed).
                *slot = None;
                Err(fail(ck("signing", e).to_string()))
            }
        }
    }

    fn describe(&self) -> String {
        format!("the PKCS#11 key {}", self.uri.shown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_as_rfc_7512_says_and_never_show_the_pin() {
        let u = Pkcs11Uri::parse(
            "pkcs11:token=chain%20ship;object=prod-heads;id=%01%02?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=12%334",
        )
        .unwrap();
        assert_eq!(u.token, "chain ship");
        assert_eq!(u.object.as_deref(), Some("prod-heads"));
        assert_eq!(u.id, Some(vec![1, 2]));
        assert!(u.pin == Some(Pin::Value("1234".into())));
        assert!(!u.shown().contains("1234") && !format!("{u:?}").contains("1234"));
        let f = Pkcs11Uri::parse("pkcs11:token=t;object=o?module-path=/m.so&pin-source=file:/run/pin").unwrap();
        assert!(f.pin == Some(Pin::File("/run/pin".into())));
        for bad in [
            "pkcs11:object=o?module-path=/m.so",
            "pkcs11:token=t?module-path=/m.so",
            "pkcs11:token=t;object=o",
            "pkcs11:token=t;object=%zz?module-path=/m.so",
        ] {
            assert!(Pkcs11Uri::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(redact("pkcs11:token=t?pin-value=secret"), "pkcs11:token=t?…");
    }
}
