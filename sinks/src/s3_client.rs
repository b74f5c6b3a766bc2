//! Building an S3 client from chainship's settings, and sorting S3 errors
//! into transient and permanent. Shared by the S3 sink and the S3 anchor
//! store, which are configured separately (they may live in different
//! accounts).

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

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
    pub async fn check_credentials(&self) -> Result<(), S3Failure> {
        use aws_credential_types::provider::ProvideCredentials;
        let permanent = |message: String| S3Failure {
            transient: false,
            status: None,
            message,
        };
        const WHERE: &str = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile (--s3-profile, AWS_PROFILE), or run with a web-identity or instance role";
        let shared = self.shared_config().await;
        let Some(provider) = shared.credentials_provider() else {
            return Err(permanent(format!("no AWS credentials: {WHERE}")));
        };
        match tokio::time::timeout(Duration::from_secs(20), provider.provide_credentials()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(permanent(format!("no AWS credentials found ({e}): {WHERE}"))),
            Err(_) => Err(S3Failure {
                transient: true,
                status: None,
                message: "loading AWS credentials took more than 20 s".into(),
            }),
        }
    }
}

/// Splits what follows `s3://` into a bucket and a prefix, checking the
/// bucket name.
pub fn split_s3_url(rest: &str) -> Result<(&str, &str), String> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if valid {
        Ok((bucket, prefix))
    } else {
        Err("not a valid bucket name (3-63 of a-z 0-9 . -)".into())
    }
}

/// How an S3 call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Failure {
    pub transient: bool,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    pub message: String,
}

impl S3Failure {
    pub fn precondition_failed(&self) -> bool {
        self.status == Some(412)
    }
}

/// Sorts an SDK error: no answer, timeouts, 5xx and throttling are
/// transient; other 4xx are permanent, named with the server's code.
pub fn classify<E, R>(what: &str, err: &SdkError<E, R>) -> S3Failure
where
    E: ProvideErrorMetadata + std::fmt::Debug,
    R: HttpStatus + std::fmt::Debug,
{
    match err {
        SdkError::TimeoutError(_) => S3Failure {
            transient: true,
            status: None,
            message: format!("{what}: timed out"),
        },
        SdkError::DispatchFailure(e) => S3Failure {
            transient: true,
            status: None,
            message: format!("{what}: cannot reach the server ({e:?})"),
        },
        SdkError::ServiceError(e) => {
            let status = e.raw().status();
            let code = e.err().code().unwrap_or("unknown");
            let detail = e.err().message().unwrap_or("");
            // NoSuchUpload: a multipart upload aborted under us (a lifecycle rule, a restarted
            // follower); sending the batch again starts a new one.
            let transient = status >= 500
                || status == 429
                || matches!(code, "SlowDown" | "Throttling" | "RequestTimeout" | "NoSuchUpload");
            let hint = match code {
                "NoSuchBucket" => " (the bucket does not exist)",
                "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch" => " (check the credentials)",
                "PermanentRedirect" | "AuthorizationHeaderMalformed" => " (wrong region?)",
                _ => "",
            };
            S3Failure {
                transient,
                status: Some(status),
                message: format!("{what}: HTTP {status} {code}{hint} {detail}")
                    .trim_end()
                    .to_owned(),
            }
        }
        SdkError::ResponseError(e) => {
            let status = e.raw().status();
            S3Failure {
                transient: status >= 500 || status == 0,
                status: Some(status),
                message: format!("{what}: bad response (HTTP {status})"),
            }
        }
        other => S3Failure {
            transient: true,
            status: None,
            message: format!("{what}: {other:?}"),
        },
    }
}

/// The HTTP status of a raw response.
pub trait HttpStatus {
    fn status(&self) -> u16;
}

impl HttpStatus for aws_sdk_s3::config::http::HttpResponse {
    fn status(&self) -> u16 {
        self.status().as_u16()
    }
}
