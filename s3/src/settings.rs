//! Where and as whom to talk to S3, and the client built from that. The
//! sink and the anchor store are configured separately (they may live in
//! different accounts).

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use chainship_core::ErrorKind;

use crate::S3Failure;

/// Where and as whom to talk to S3.
#[derive(Clone, Debug, Default)]
pub struct S3Settings {
    /// An explicit endpoint (MinIO, Ceph, a test server); default: AWS.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`), which most
    /// S3-compatible servers need.
    pub path_style: bool,
    /// A named profile from the AWS config files.
    pub profile: Option<String>,
    /// Static credentials; default: the standard AWS chain (environment,
    /// profile, web identity, instance metadata).
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// A file holding the credentials in the AWS shared-credentials format
    /// (`aws_access_key_id = …`, `aws_secret_access_key = …`): how a systemd
    /// credential (`LoadCredential=`) or a mounted secret hands them over
    /// without putting the secret in the environment or on a command line.
    pub credentials_file: Option<std::path::PathBuf>,
}

impl S3Settings {
    /// Whether the credentials come from [`S3Settings::credentials_file`]
    /// (so an error about them points at that setting, not the profile).
    pub fn uses_credentials_file(&self) -> bool {
        self.access_key_id.is_none() && self.credentials_file.is_some()
    }
}

impl S3Settings {
    pub async fn client(&self) -> aws_sdk_s3::Client {
        let shared = self.shared_config().await;
        let mut builder = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(self.path_style)
            .timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(Duration::from_secs(60))
                    .build(),
            );
        if shared.region().is_none() {
            builder = builder.region(Region::new("us-east-1"));
        }
        if let Some(endpoint) = &self.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        aws_sdk_s3::Client::from_conf(builder.build())
    }

    async fn shared_config(&self) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(profile) = &self.profile {
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &self.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let (Some(id), Some(secret)) = (&self.access_key_id, &self.secret_access_key) {
            loader = loader.credentials_provider(Credentials::new(id, secret, None, None, "chainship-settings"));
        } else if let Some(Ok((id, secret))) = self.credentials_file.as_deref().map(read_credentials_file) {
            loader =
                loader.credentials_provider(Credentials::new(id, secret, None, None, "chainship-credentials-file"));
        }
        loader.load().await
    }

    /// Resolves the credentials once, up front: with none anywhere the SDK
    /// would otherwise fail every request after a round of instance-metadata
    /// lookups, logged at length and retried as if the server were away.
    /// The caller points the error at its own profile setting.
    pub async fn check_credentials(&self) -> Result<(), S3Failure> {
        use aws_credential_types::provider::ProvideCredentials;
        let permanent = |message: String| S3Failure::new(ErrorKind::Permanent, message);
        const WHERE: &str = "give a credentials file (--anchor-s3-credentials-file or --s3-credentials-file, also by environment), set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile (AWS_PROFILE, or the profile setting), or run with a web-identity or instance role";
        if self.access_key_id.is_none()
            && let Some(path) = &self.credentials_file
        {
            read_credentials_file(path).map_err(|e| permanent(e.message))?;
        }
        let shared = self.shared_config().await;
        let Some(provider) = shared.credentials_provider() else {
            return Err(permanent(format!("no AWS credentials: {WHERE}")));
        };
        match tokio::time::timeout(Duration::from_secs(20), provider.provide_credentials()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(permanent(format!("no AWS credentials found ({e}): {WHERE}"))),
            Err(_) => Err(S3Failure::new(
                ErrorKind::Transient,
                "loading AWS credentials took more than 20 s",
            )),
        }
    }
}

/// The access key id and secret in `path` (AWS shared-credentials format:
/// the `[default]` section, or the only one; `key = value` lines, `#` and
/// `;` comments). Only a regular file, opened without blocking (a FIFO
/// nobody writes must not hold the process); errors name the file and line,
/// never a value.
pub fn read_credentials_file(path: &std::path::Path) -> Result<(String, String), chainship_core::Error> {
    use chainship_core::permanent;
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| permanent!("S3 credentials file {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| permanent!("S3 credentials file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(permanent!("S3 credentials file {shown}: not a regular file"));
    }
    let mut text = String::new();
    file.take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| permanent!("S3 credentials file {shown}: {e}"))?;
    let (mut id, mut secret, mut section) = (None, None, None::<String>);
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            // A second section after [default] (or after any first one) is another profile's.
            if id.is_some() || secret.is_some() {
                break;
            }
            section = Some(name.trim().to_owned());
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(permanent!(
                "S3 credentials file {shown} line {}: expected KEY = VALUE",
                n + 1
            ));
        };
        if section.as_deref().is_some_and(|s| s != "default") && text.contains("[default]") {
            continue;
        }
        match key.trim() {
            "aws_access_key_id" => id = Some(value.trim().to_owned()),
            "aws_secret_access_key" => secret = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    match (id.filter(|v| !v.is_empty()), secret.filter(|v| !v.is_empty())) {
        (Some(id), Some(secret)) => Ok((id, secret)),
        _ => Err(permanent!(
            "S3 credentials file {shown}: needs aws_access_key_id and aws_secret_access_key (AWS credentials format)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentials_file_in_the_aws_format_and_its_errors() {
        let dir = std::env::temp_dir().join(format!("chainship-s3-creds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("creds");
        std::fs::write(
            &file,
            "# anchor writer\n[other]\naws_access_key_id = NO\n[default]\naws_access_key_id = AKID\naws_secret_access_key = s3cr3t\n",
        )
        .unwrap();
        assert_eq!(read_credentials_file(&file).unwrap(), ("AKID".into(), "s3cr3t".into()));
        std::fs::write(&file, "aws_access_key_id=AKID\naws_secret_access_key=s3cr3t\n").unwrap();
        assert_eq!(read_credentials_file(&file).unwrap(), ("AKID".into(), "s3cr3t".into()));
        std::fs::write(&file, "aws_secret_access_key = s3cr3t\n").unwrap();
        let e = read_credentials_file(&file).unwrap_err().message;
        assert!(e.contains("needs aws_access_key_id") && !e.contains("s3cr3t"), "{e}");
        std::fs::write(&file, "s3cr3t\n").unwrap();
        let e = read_credentials_file(&file).unwrap_err().message;
        assert!(e.contains("line 1") && !e.contains("s3cr3t"), "{e}");
        let e = read_credentials_file(&dir).unwrap_err().message;
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
