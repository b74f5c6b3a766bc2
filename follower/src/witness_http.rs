//! One `add-checkpoint` call to a witness (C2SP `tlog-witness`), and what
//! its answer means: cosignature lines (200), the size the witness knows
//! (409), an inconsistent checkpoint (422), an unknown log or key (403,
//! 404), or a failure worth retrying (network, 5xx, anything else).

use chainship_chain::{Error, permanent};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// How long one call may take.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The most of an answer read (cosignature lines are short).
const MAX_ANSWER: usize = 64 << 10;

pub type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for http:// and https:// witnesses (system roots).
pub fn client() -> Result<HttpsClient, Error> {
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| permanent!("cannot load the system's TLS roots: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// A witness's answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200: the cosignature lines.
    Cosigned(String),
    /// 409: the witness's latest size for the log is this, not the one sent.
    Conflict(u64),
    /// 422: the consistency proof does not verify against what it saw.
    Inconsistent(String),
    /// 403/404 (or 400): the witness does not know this log or key: a setup error.
    Refused(u16, String),
    /// Network errors, 5xx and the rest: retried.
    Failed(String),
}

/// The request body: `old N`, the proof lines, a blank line, the checkpoint.
pub fn body(old: u64, proof: &[chainship_tlog::Hash], checkpoint_note: &str) -> String {
    let mut out = format!("old {old}\n");
    for h in proof {
        out.push_str(&chainship_tlog::hash_b64(h));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(checkpoint_note);
    out
}

/// POSTs `body` to `<url>/add-checkpoint`.
pub async fn add_checkpoint(client: &HttpsClient, url: &str, body: String) -> Answer {
    let endpoint = format!("{}/add-checkpoint", url.trim_end_matches('/'));
    let request = match hyper::Request::post(&endpoint)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
    {
        Ok(r) => r,
        Err(e) => return Answer::Refused(0, format!("{endpoint}: not a usable URL ({e})")),
    };
    let response = match tokio::time::timeout(TIMEOUT, client.request(request)).await {
        Err(_) => return Answer::Failed(format!("{endpoint}: no answer within {}s", TIMEOUT.as_secs())),
        Ok(Err(e)) => return Answer::Failed(format!("{endpoint}: {e}")),
        Ok(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    // Read at most MAX_ANSWER bytes: an endless answer is cut off, never held.
    let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER);
    let text = match tokio::time::timeout(TIMEOUT, body.collect()).await {
        Ok(Ok(body)) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Ok(Err(e)) => {
            return Answer::Failed(format!(
                "{endpoint}: reading the answer: {e} (answers are at most {MAX_ANSWER} bytes)"
            ));
        }
        Err(_) => {
            return Answer::Failed(format!(
                "{endpoint}: the answer did not finish within {}s",
                TIMEOUT.as_secs()
            ));
        }
    };
    classify(&endpoint, status, text)
}

fn classify(endpoint: &str, status: u16, text: String) -> Answer {
    let short = || text.lines().next().unwrap_or("").chars().take(200).collect::<String>();
    match status {
        200 => Answer::Cosigned(text),
        409 => match text.trim().parse::<u64>() {
            Ok(size) => Answer::Conflict(size),
            Err(_) => Answer::Failed(format!("{endpoint}: 409 without a size ({})", short())),
        },
        422 => Answer::Inconsistent(short()),
        400 | 403 | 404 => Answer::Refused(status, format!("{endpoint}: {status} {}", short())),
        _ => Answer::Failed(format!("{endpoint}: {status} {}", short())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn an_endless_answer_is_cut_off_not_held() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
            let chunk = format!("{:x}\r\n{}\r\n", 8192, "x".repeat(8192));
            // Far more than any answer may hold, then the connection stays open.
            for _ in 0..1024 {
                if conn.write_all(chunk.as_bytes()).is_err() {
                    return;
                }
            }
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer =
            rt.block_on(async { add_checkpoint(&client().unwrap(), &url, body(0, &[], "o\n1\nAA==\n")).await });
        match answer {
            Answer::Failed(why) => assert!(why.contains("at most"), "{why}"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn answers_are_sorted_as_the_spec_says() {
        assert_eq!(
            classify("w", 200, "— w AAAA\n".into()),
            Answer::Cosigned("— w AAAA\n".into())
        );
        assert_eq!(classify("w", 409, "17\n".into()), Answer::Conflict(17));
        assert!(matches!(classify("w", 409, "x".into()), Answer::Failed(_)));
        assert!(matches!(
            classify("w", 422, "bad proof".into()),
            Answer::Inconsistent(_)
        ));
        assert!(matches!(
            classify("w", 404, "unknown log".into()),
            Answer::Refused(404, _)
        ));
        assert!(matches!(classify("w", 503, "".into()), Answer::Failed(_)));
        assert_eq!(body(0, &[], "o\n1\nAA==\n\n— o x\n"), "old 0\n\no\n1\nAA==\n\n— o x\n");
    }
}
