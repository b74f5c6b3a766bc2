//! Signing keys off the follower's disk: a real OpenSSH `ssh-agent` holding
//! an `ssh-keygen -t ed25519` key. The verifier key is computed here from
//! the public key file (C2SP signed-note: name, key id, 0x01 || key), not by
//! chainship, and the checkpoints the agent signed are verified by aics-tlog,
//! an independent C2SP implementation.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::*;

const ORIGIN: &str = "signers/agentrt";
const KEY_NAME: &str = "signers/agent-key";

/// An ssh-agent of our own on a socket in `dir`, killed when dropped.
struct Agent {
    socket: PathBuf,
    child: Option<KillOnDrop>,
}

impl Agent {
    fn start(dir: &Path) -> Agent {
        let socket = dir.join("agent.sock");
        let _ = std::fs::remove_file(&socket);
        let child = Command::new("ssh-agent")
            .args(["-D", "-a", path_str(&socket)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent (openssh-client) must be installed: ./scripts/test installs it");
        let until = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < until, "ssh-agent did not open its socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        Agent {
            socket,
            child: Some(KillOnDrop(child)),
        }
    }

    fn add(&self, key: &Path) {
        let out = Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .output()
            .unwrap();
        assert!(out.status.success(), "ssh-add: {}", stderr(&out));
    }

    fn kill(&mut self) {
        drop(self.child.take());
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// `ssh-keygen -t ed25519` in `dir`, with `comment`; returns the private key path.
fn ssh_keygen(dir: &Path, comment: &str) -> PathBuf {
    let key = dir.join("id_ed25519");
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path_str(&key)])
        .output()
        .expect("ssh-keygen (openssh-client) must be installed");
    assert!(out.status.success(), "{}", stderr(&out));
    key
}

/// The C2SP signed-note verifier key of an OpenSSH ed25519 public key file.
fn verifier_key(public_file: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(public_file).unwrap();
    let blob = B64.decode(text.split_whitespace().nth(1).unwrap()).unwrap();
    // string "ssh-ed25519" (4 + 11 bytes), then string key (4 + 32 bytes).
    assert_eq!(blob.len(), 4 + 11 + 4 + 32);
    c2sp_verifier_key(name, &blob[blob.len() - 32..])
}

/// A C2SP signed-note verifier key, from the spec:
/// `name+hex(SHA-256(name || "\n" || 0x01 || key)[:4])+base64(0x01 || key)`.
fn c2sp_verifier_key(name: &str, key: &[u8]) -> String {
    let mut typed = vec![0x01];
    typed.extend_from_slice(key);
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update(b"\n");
    hasher.update(&typed);
    format!("{name}+{}+{}", hex::encode(&hasher.finalize()[..4]), B64.encode(&typed))
}

fn follow(dir: &Path, db: &Path, anchors: &Path, socket: &Path, public: &Path, extra: &[&str]) -> Command {
    let mut cmd = bin();
    cmd.args(["follow", "--from-start", "--db", path_str(db), "--origin", ORIGIN])
        .args(["--sink", &format!("file:{}", path_str(&dir.join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.join("cursor"))])
        .args(["--anchor", &format!("file:{}", path_str(anchors))])
        .args(["--signing-key", &format!("ssh-agent:{}", path_str(public))])
        .args(["--signing-key-name", KEY_NAME, "--anchor-interval", "0s"])
        .args(extra)
        .env("SSH_AUTH_SOCK", socket);
    cmd
}

fn anchor_verify(db: &Path, anchors: &Path, vkey: &str) -> (i32, Value) {
    let out = run(&[
        "anchor",
        "verify",
        "--json",
        "--db",
        path_str(db),
        "--anchor",
        &format!("file:{}", path_str(anchors)),
        "--origin",
        ORIGIN,
        "--trusted-key",
        vkey,
    ]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    (code(&out), v)
}

/// Heads and checkpoints signed by the agent verify with the key computed
/// from the public key file, for chainship's verifier and for aics-tlog;
/// the notes are byte-for-byte a key file's format.
#[test]
fn heads_and_checkpoints_signed_by_ssh_agent_verify_independently() {
    let dir = tempfile::TempDir::new().unwrap();
    let agent = Agent::start(dir.path());
    let key = ssh_keygen(dir.path(), "operator@host");
    agent.add(&key);
    let public = key.with_extension("pub");
    let vkey = verifier_key(&public, KEY_NAME);
    let db = generate(dir.path(), "audit.db", 600);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let out = follow(
        dir.path(),
        &db,
        &anchors,
        &agent.socket,
        &public,
        &["--once", "--batch-size", "200"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (c, v) = anchor_verify(&db, &anchors, &vkey);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 600, "{v}");
    let head = std::fs::read_to_string(anchors.join(ORIGIN).join(format!("{:020}.head", 600))).unwrap();
    assert!(head.contains(&format!("\n\u{2014} {KEY_NAME} ")), "{head}");
    let verified: Value = {
        let out = aics_tlog()
            .args(["verify-checkpoint", "--tiles", path_str(&anchors.join(ORIGIN))])
            .args(["--log-key", &vkey, "--origin", ORIGIN])
            .output()
            .unwrap();
        serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
    };
    assert_eq!(verified["ok"], true, "{verified}");
    // `check` prints the same verifier key, for operators to hand to auditors.
    let out = bin()
        .args(["check", "--origin", ORIGIN, "--sink", "stdout:"])
        .args(["--signing-key", &format!("ssh-agent:{}", path_str(&public))])
        .args(["--signing-key-name", KEY_NAME])
        .env("SSH_AUTH_SOCK", &agent.socket)
        .output()
        .unwrap();
    assert!(stdout(&out).contains(&vkey), "{}{}", stdout(&out), stderr(&out));
}

/// Key trouble at start is one line naming the key file and exit 2: no
/// agent, an agent without the key, a key of another type.
#[test]
fn key_trouble_at_start_is_one_line_and_exit_2() {
    let dir = tempfile::TempDir::new().unwrap();
    let key = ssh_keygen(dir.path(), "operator@host");
    let public = key.with_extension("pub");
    let db = generate(dir.path(), "audit.db", 10);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let missing = dir.path().join("no-agent.sock");
    let out = follow(dir.path(), &db, &anchors, &missing, &public, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("id_ed25519.pub") && stderr(&out).contains("cannot reach the agent"),
        "{}",
        stderr(&out)
    );
    let agent = Agent::start(dir.path());
    let out = follow(dir.path(), &db, &anchors, &agent.socket, &public, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("does not hold this key"), "{}", stderr(&out));
    let rsa = dir.path().join("id_rsa");
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", path_str(&rsa)])
        .output()
        .unwrap();
    assert!(made.status.success());
    let out = follow(
        dir.path(),
        &db,
        &anchors,
        &agent.socket,
        &rsa.with_extension("pub"),
        &["--once"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("ssh-rsa key"), "{}", stderr(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    assert!(!anchors.join(ORIGIN).exists(), "nothing published");
}

/// The agent killed mid-run: the export goes on, heads wait (nothing is
/// signed by another key); the agent back with the key, heads catch up.
#[test]
fn an_agent_that_goes_away_delays_heads_never_the_export() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut agent = Agent::start(dir.path());
    let key = ssh_keygen(dir.path(), "operator@host");
    agent.add(&key);
    let public = key.with_extension("pub");
    let vkey = verifier_key(&public, KEY_NAME);
    let db = generate(dir.path(), "audit.db", 100);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let child = follow(
        dir.path(),
        &db,
        &anchors,
        &agent.socket,
        &public,
        &["--retry-max-delay", "1s"],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut child = KillOnDrop(child);
    let head = |seq: u64| anchors.join(ORIGIN).join(format!("{seq:020}.head"));
    assert!(wait_for_file(&head(100), Duration::from_secs(30)), "first head");
    agent.kill();
    append(&db, 50);
    let out = dir.path().join("out.jsonl");
    let until = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&out).unwrap().lines().count() < 150 {
        assert!(Instant::now() < until, "the export went on without the agent");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!head(150).exists(), "no head without the key");
    let agent = Agent::start(dir.path());
    agent.add(&key);
    assert!(wait_for_file(&head(150), Duration::from_secs(30)), "heads catch up");
    signal(&child.0, SIGTERM);
    assert!(wait_with_limit(&mut child.0, Duration::from_secs(20)).success());
    let (c, v) = anchor_verify(&db, &anchors, &vkey);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 150, "{v}");
    assert_eq!(
        v["heads"]["trusted"], v["heads"]["kept"],
        "every head is the agent key's: {v}"
    );
}

fn wait_for_file(path: &Path, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while !path.exists() {
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// SoftHSM2's PKCS#11 module, as Debian installs it.
const SOFTHSM: &str = "/usr/lib/softhsm/libsofthsm2.so";
const PIN: &str = "4821";

/// A SoftHSM2 token of our own (its config and token directory in `dir`)
/// holding an Ed25519 key pair labelled `heads`, made with OpenSC's
/// pkcs11-tool: the key never leaves the token.
struct Token {
    conf: PathBuf,
    tokens: PathBuf,
    pin_file: PathBuf,
}

impl Token {
    fn create(dir: &Path) -> Token {
        assert!(
            Path::new(SOFTHSM).exists(),
            "{SOFTHSM} is missing: ./scripts/test installs softhsm2 and opensc"
        );
        let tokens = dir.join("tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                path_str(&tokens)
            ),
        )
        .unwrap();
        let pin_file = dir.join("hsm-pin");
        std::fs::write(&pin_file, format!("{PIN}\n")).unwrap();
        let token = Token { conf, tokens, pin_file };
        token.tool(
            "softhsm2-util",
            &[
                "--init-token",
                "--free",
                "--label",
                "chainship",
                "--pin",
                PIN,
                "--so-pin",
                "99999",
            ],
        );
        token.tool(
            "pkcs11-tool",
            &[
                "--module",
                SOFTHSM,
                "--token-label",
                "chainship",
                "--login",
                "--pin",
                PIN,
            ]
            .into_iter()
            .chain([
                "--keypairgen",
                "--key-type",
                "EC:edwards25519",
                "--label",
                "heads",
                "--id",
                "01",
            ])
            .collect::<Vec<_>>(),
        );
        token
    }

    fn tool(&self, tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool)
            .args(args)
            .env("SOFTHSM2_CONF", &self.conf)
            .output()
            .unwrap_or_else(|e| panic!("{tool} ({e}): ./scripts/test installs softhsm2 and opensc"));
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    fn uri(&self) -> String {
        format!(
            "pkcs11:token=chainship;object=heads?module-path={SOFTHSM}&pin-source=file:{}",
            path_str(&self.pin_file)
        )
    }

    /// The verifier key, from the public key pkcs11-tool exports (an
    /// RFC 8410 SubjectPublicKeyInfo: the key is its last 32 bytes).
    fn verifier_key(&self, dir: &Path, label: &str, name: &str) -> String {
        let pem = dir.join(format!("{label}.pub.pem"));
        self.tool(
            "pkcs11-tool",
            &[
                "--module",
                SOFTHSM,
                "--token-label",
                "chainship",
                "--read-object",
                "--type",
                "pubkey",
            ]
            .into_iter()
            .chain(["--label", label, "-o", path_str(&pem)])
            .collect::<Vec<_>>(),
        );
        let text = std::fs::read_to_string(&pem).unwrap();
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = B64.decode(body).unwrap();
        assert_eq!(der.len(), 44, "an Ed25519 SubjectPublicKeyInfo");
        c2sp_verifier_key(name, &der[12..])
    }
}

fn follow_token(dir: &Path, db: &Path, anchors: &Path, token: &Token, uri: &str, extra: &[&str]) -> Command {
    let mut cmd = bin();
    cmd.args(["follow", "--from-start", "--db", path_str(db), "--origin", ORIGIN])
        .args(["--sink", &format!("file:{}", path_str(&dir.join("out.jsonl")))])
        .args(["--cursor", path_str(&dir.join("cursor"))])
        .args(["--anchor", &format!("file:{}", path_str(anchors))])
        .args(["--signing-key", uri, "--anchor-interval", "0s"])
        .args(extra)
        .env("SOFTHSM2_CONF", &token.conf);
    cmd
}

/// Heads and checkpoints signed inside a SoftHSM2 token (CKM_EDDSA) verify
/// with the key the test computes from the token's exported public key,
/// for chainship's verifier and for aics-tlog.
#[test]
fn heads_and_checkpoints_signed_in_a_pkcs11_token_verify_independently() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let vkey = token.verifier_key(dir.path(), "heads", "heads");
    let db = generate(dir.path(), "audit.db", 600);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let out = follow_token(
        dir.path(),
        &db,
        &anchors,
        &token,
        &token.uri(),
        &["--once", "--batch-size", "200"],
    )
    .output()
    .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (c, v) = anchor_verify(&db, &anchors, &vkey);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 600, "{v}");
    let out = aics_tlog()
        .args(["verify-checkpoint", "--tiles", path_str(&anchors.join(ORIGIN))])
        .args(["--log-key", &vkey, "--origin", ORIGIN])
        .output()
        .unwrap();
    let verified: Value = serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    assert_eq!(verified["ok"], true, "{verified}");
}

/// A wrong PIN, a missing token or an unknown key at start: one line naming
/// the URI, never the PIN, exit 2, nothing published.
#[test]
fn token_trouble_at_start_is_one_line_without_the_pin() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let db = generate(dir.path(), "audit.db", 10);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let secret = "77665544";
    let cases = [
        (
            format!("pkcs11:token=chainship;object=heads?module-path={SOFTHSM}&pin-value={secret}"),
            "the PIN is wrong",
        ),
        (
            format!("pkcs11:token=elsewhere;object=heads?module-path={SOFTHSM}&pin-value={PIN}"),
            "no token labelled \"elsewhere\"",
        ),
        (
            format!("pkcs11:token=chainship;object=other?module-path={SOFTHSM}&pin-value={PIN}"),
            "no Ed25519 private key",
        ),
        (
            format!("pkcs11:token=chainship;object=heads?module-path=/nonexistent/lib.so&pin-value={secret}"),
            "cannot load the module",
        ),
    ];
    for (uri, says) in cases {
        let out = follow_token(dir.path(), &db, &anchors, &token, &uri, &["--once"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{uri}: {err}");
        assert!(err.contains(says) && err.contains("pkcs11:token="), "{uri}: {err}");
        assert!(
            !err.contains(secret) && !err.contains(PIN),
            "the PIN is never shown: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(!anchors.join(ORIGIN).exists(), "nothing published");
}

/// A PIN source that is a FIFO nobody writes (or a key file that is one)
/// is refused at once, exit 2, instead of holding `follow` in `open()` past
/// every stop signal (issue 46).
#[test]
fn a_fifo_as_pin_source_or_key_is_refused_at_once() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let db = generate(dir.path(), "audit.db", 10);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let fifo = dir.path().join("pin.fifo");
    let made = Command::new("mkfifo")
        .args(["-m", "600", path_str(&fifo)])
        .status()
        .unwrap();
    assert!(made.success());
    let uri = format!(
        "pkcs11:token=chainship;object=heads?module-path={SOFTHSM}&pin-source=file:{}",
        path_str(&fifo)
    );
    for key in [uri.as_str(), path_str(&fifo)] {
        let mut child = follow_token(dir.path(), &db, &anchors, &token, key, &["--once"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_with_limit(&mut child, Duration::from_secs(20));
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{key}: {err}");
        assert!(err.contains("a FIFO, not a regular file"), "{key}: {err}");
    }
    // The verifiers' key and policy files too.
    for flag in ["--trusted-key", "--policy"] {
        let mut child = bin()
            .args(["anchor", "verify", "--db", path_str(&db), "--origin", ORIGIN])
            .args(["--anchor", &format!("file:{}", path_str(&anchors))])
            .args([flag, path_str(&fifo)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_with_limit(&mut child, Duration::from_secs(20));
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains("a FIFO, not a regular file"), "{flag}: {err}");
    }
}

/// The token removed mid-run: the export goes on, heads wait (none signed
/// by anything else); the token back, the heads catch up.
#[test]
fn a_token_removed_mid_run_delays_heads_never_the_export() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let vkey = token.verifier_key(dir.path(), "heads", "heads");
    let kept = dir.path().join("tokens.kept");
    copy_tree(&token.tokens, &kept);
    let db = generate(dir.path(), "audit.db", 100);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let child = follow_token(
        dir.path(),
        &db,
        &anchors,
        &token,
        &token.uri(),
        &["--retry-max-delay", "1s"],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut child = KillOnDrop(child);
    let head = |seq: u64| anchors.join(ORIGIN).join(format!("{seq:020}.head"));
    assert!(wait_for_file(&head(100), Duration::from_secs(30)), "first head");
    token.tool("softhsm2-util", &["--delete-token", "--token", "chainship"]);
    append(&db, 50);
    let out = dir.path().join("out.jsonl");
    let until = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&out).unwrap().lines().count() < 150 {
        assert!(Instant::now() < until, "the export went on without the token");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!head(150).exists(), "no head without the token");
    std::fs::remove_dir_all(&token.tokens).unwrap();
    copy_tree(&kept, &token.tokens);
    assert!(wait_for_file(&head(150), Duration::from_secs(30)), "heads catch up");
    signal(&child.0, SIGTERM);
    assert!(wait_with_limit(&mut child.0, Duration::from_secs(20)).success());
    let (c, v) = anchor_verify(&db, &anchors, &vkey);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 150, "{v}");
    assert_eq!(
        v["heads"]["trusted"], v["heads"]["kept"],
        "every head is the token key's: {v}"
    );
}

/// `chainship keygen --out pkcs11:…` makes the key pair inside the token:
/// the verifier key it prints is the one the token's public key gives (as
/// the test computes it), heads signed with it verify, the private key
/// cannot be read out, and a second keygen of that label makes nothing.
#[test]
fn keygen_makes_the_key_inside_the_token() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let uri = format!(
        "pkcs11:token=chainship;object=minted?module-path={SOFTHSM}&pin-source=file:{}",
        path_str(&token.pin_file)
    );
    let keygen = || {
        bin()
            .args(["keygen", "--name", "minted", "--out", &uri])
            .env("SOFTHSM2_CONF", &token.conf)
            .output()
            .unwrap()
    };
    let out = keygen();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed = stdout(&out).trim().to_owned();
    // The public key as OpenSC exports it, turned into a verifier key here.
    let expected = token.verifier_key(dir.path(), "minted", "minted");
    assert_eq!(printed, expected);
    // The private key never leaves the token: OpenSC lists it sensitive and never extractable.
    let listed = token.tool(
        "pkcs11-tool",
        &[
            "--module",
            SOFTHSM,
            "--token-label",
            "chainship",
            "--login",
            "--pin",
            PIN,
        ]
        .into_iter()
        .chain(["--list-objects", "--type", "privkey"])
        .collect::<Vec<_>>(),
    );
    let minted = listed
        .split("Private Key Object")
        .find(|o| o.contains("label:      minted"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        minted.contains("never extractable") && minted.contains("sensitive") && minted.contains("local"),
        "{minted}"
    );
    // Heads signed with it verify with the printed key.
    let db = generate(dir.path(), "audit.db", 200);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let out = follow_token(dir.path(), &db, &anchors, &token, &uri, &["--once"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (c, v) = anchor_verify(&db, &anchors, &printed);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["last_trusted_head"]["seq"], 200, "{v}");
    // A second keygen of the label makes nothing.
    let again = keygen();
    assert_eq!(code(&again), 2, "{}", stderr(&again));
    assert!(stderr(&again).contains("already holds a key"), "{}", stderr(&again));
}

/// A PIN the token refused is not tried again until the PIN source
/// changes (a token locks its PIN after a few wrong tries): the follower
/// says so, keeps exporting, and signs again once the PIN file is right.
#[test]
fn a_refused_pin_is_not_tried_again_until_it_changes() {
    let dir = tempfile::TempDir::new().unwrap();
    let token = Token::create(dir.path());
    let kept = dir.path().join("tokens.kept");
    copy_tree(&token.tokens, &kept);
    let db = generate(dir.path(), "audit.db", 100);
    let anchors = dir.path().join("anchors");
    std::fs::create_dir(&anchors).unwrap();
    let log = dir.path().join("follower.log");
    let child = follow_token(
        dir.path(),
        &db,
        &anchors,
        &token,
        &token.uri(),
        &["--retry-max-delay", "1s"],
    )
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let mut child = KillOnDrop(child);
    let head = |seq: u64| anchors.join(ORIGIN).join(format!("{seq:020}.head"));
    assert!(wait_for_file(&head(100), Duration::from_secs(30)), "first head");
    // The session is lost (token taken away and put back) and the PIN file now holds a wrong PIN.
    std::fs::write(&token.pin_file, "0000\n").unwrap();
    token.tool("softhsm2-util", &["--delete-token", "--token", "chainship"]);
    append(&db, 20);
    std::thread::sleep(Duration::from_secs(2));
    std::fs::remove_dir_all(&token.tokens).unwrap();
    copy_tree(&kept, &token.tokens);
    let until = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).unwrap().contains("it is not tried again") {
        assert!(Instant::now() < until, "{}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(4));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.matches("the token refused the PIN;").count(),
        1,
        "one wrong login only: {text}"
    );
    assert!(!text.contains(PIN) && !text.contains("0000\n"), "{text}");
    assert!(!head(120).exists());
    // The right PIN back in the file: signing resumes.
    std::fs::write(&token.pin_file, format!("{PIN}\n")).unwrap();
    assert!(wait_for_file(&head(120), Duration::from_secs(30)), "heads catch up");
    signal(&child.0, SIGTERM);
    assert!(wait_with_limit(&mut child.0, Duration::from_secs(20)).success());
}
