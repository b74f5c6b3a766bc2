//! Sorting S3 SDK errors by kind: no answer, timeouts, 5xx and throttling
//! pass; other 4xx do not. The HTTP status is kept for callers that look
//! for one answer (404: not there, 412: already there).

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use chainship_core::{Error, ErrorKind};

/// How an S3 call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Failure {
    pub kind: ErrorKind,
    /// The HTTP status, when the server answered.
    pub status: Option<u16>,
    pub message: String,
}

impl S3Failure {
    pub fn new(kind: ErrorKind, message: impl std::fmt::Display) -> Self {
        S3Failure {
            kind,
            status: None,
            message: message.to_string(),
        }
    }

    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }

    /// The workspace's error, its message prefixed with `place` (the sink or store).
    pub fn error(self, place: impl std::fmt::Display) -> Error {
        Error::new(self.kind, format!("{place}: {}", self.message))
    }

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
        SdkError::TimeoutError(_) => S3Failure::new(ErrorKind::Transient, format!("{what}: timed out")),
        SdkError::DispatchFailure(e) => {
            S3Failure::new(ErrorKind::Transient, format!("{what}: cannot reach the server ({e:?})"))
        }
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
                kind: if transient {
                    ErrorKind::Transient
                } else {
                    ErrorKind::Permanent
                },
                status: Some(status),
                message: format!("{what}: HTTP {status} {code}{hint} {detail}")
                    .trim_end()
                    .to_owned(),
            }
        }
        SdkError::ResponseError(e) => {
            let status = e.raw().status();
            S3Failure {
                kind: if status >= 500 || status == 0 {
                    ErrorKind::Transient
                } else {
                    ErrorKind::Permanent
                },
                status: Some(status),
                message: format!("{what}: bad response (HTTP {status})"),
            }
        }
        other => S3Failure::new(ErrorKind::Transient, format!("{what}: {other:?}")),
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
