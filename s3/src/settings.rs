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
        const WHERE: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile (AWS_PROFILE, or the profile setting), or run with a web-identity or instance role";
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
