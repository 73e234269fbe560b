//! HTTP to the Hub (native, the `hub` feature): `ureq` over rustls, redirects followed by
//! hand so each hop is checked ([`Endpoint::may_redirect_to`]) and the token is sent to the
//! Hub's own origin only, every byte counted and hashed as it arrives ([`Check`]).

use super::listing::{Endpoint, RemoteFile, Url, MAX_LISTING_BYTES};
use super::plan::Status;
use super::verify::{Check, Failure};
use std::io::{Read, Write};
use std::time::Duration;

/// Redirects one request may take (the Hub takes one: to its storage host).
const MAX_REDIRECTS: usize = 5;

/// Why a request failed, before the caller names the model and file.
#[derive(Debug)]
pub enum HttpFailure {
    /// No answer: no connection, a timeout, a TLS failure (the cache may still serve).
    Unreachable(String),
    /// The Hub answered with an error status (with its own reason, when it sent one).
    Status(Status),
    /// A redirect that is not followed, or an answer that contradicts the listing.
    Refused(String),
    /// The bytes did not hold (size or digest).
    Check(Failure),
    /// The answer broke off while its body was read.
    Broken { received: u64, announced: u64, why: String },
    /// Writing the file here failed.
    Write(std::io::Error),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Unreachable(why) => write!(f, "the Hub could not be reached: {why}"),
            HttpFailure::Status(status) => write!(f, "{status}"),
            HttpFailure::Refused(why) => write!(f, "{why}"),
            HttpFailure::Check(failure) => write!(f, "{failure}"),
            HttpFailure::Broken { received, announced, why } => write!(
                f,
                "the transfer broke off after {received} of the {announced} bytes the Hub's listing announces (truncated: {why}); nothing was kept"
            ),
            HttpFailure::Write(e) => write!(f, "writing the file failed: {e}"),
        }
    }
}

pub struct Transport {
    agent: ureq::Agent,
    endpoint: Endpoint,
    token: Option<String>,
}

impl Transport {
    pub fn new(endpoint: Endpoint, token: Option<String>) -> Transport {
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("medrank/{}", crate::VERSION))
            // The sizes the listing announces are the files' own: no compression.
            .accept_encoding("identity")
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .build();
        Transport { agent: ureq::Agent::new_with_config(config), endpoint, token }
    }

    /// GET `url`, following allowed redirects; the final answer (any status).
    fn get(&self, url: &str) -> Result<ureq::http::Response<ureq::Body>, HttpFailure> {
        let mut at = Url::parse(url).map_err(HttpFailure::Refused)?;
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self.agent.get(at.to_string());
            if let (Some(token), true) = (&self.token, self.endpoint.is_own(&at)) {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            let response = request.call().map_err(|e| HttpFailure::Unreachable(e.to_string()))?;
            if !response.status().is_redirection() {
                return Ok(response);
            }
            let location = header(&response, "location")
                .ok_or_else(|| HttpFailure::Refused(format!("a redirect from {at} without a Location")))?;
            let next =
                at.join(&location).map_err(|why| HttpFailure::Refused(format!("a redirect to `{location}`: {why}")))?;
            if !self.endpoint.is_own(&next) {
                self.endpoint.may_redirect_to(&next).map_err(HttpFailure::Refused)?;
            }
            at = next;
        }
        Err(HttpFailure::Refused(format!("more than {MAX_REDIRECTS} redirects")))
    }

    /// The revision listing's bytes (at most [`MAX_LISTING_BYTES`]).
    pub fn listing(&self, url: &str) -> Result<Vec<u8>, HttpFailure> {
        let response = self.get(url)?;
        if !response.status().is_success() {
            return Err(status_failure(&response));
        }
        response.into_body().into_with_config().limit(MAX_LISTING_BYTES).read_to_vec().map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => {
                HttpFailure::Refused(format!("the revision listing is longer than {MAX_LISTING_BYTES} bytes"))
            }
            e => HttpFailure::Unreachable(e.to_string()),
        })
    }

    /// Downloads `file` at `commit` into `out`, checked as it comes ([`Check`]); `progress`
    /// gets the bytes received so far.
    pub fn download(
        &self,
        url: &str,
        commit: &str,
        file: &RemoteFile,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), HttpFailure> {
        let response = self.get(url)?;
        if !response.status().is_success() {
            return Err(status_failure(&response));
        }
        if let Some(served) = header(&response, "x-repo-commit") {
            if served != commit {
                return Err(HttpFailure::Refused(format!(
                    "the Hub served commit {served} where the listing named {commit}"
                )));
            }
        }
        // A length announced above the listing's size is refused before the body is read.
        if let Some(length) = header(&response, "content-length").and_then(|l| l.parse::<u64>().ok()) {
            if length > file.size {
                return Err(HttpFailure::Check(Failure::LargerThanAnnounced { announced: file.size }));
            }
        }
        let mut check = Check::new(file.size, file.digest.clone());
        let mut body = response.into_body().into_reader();
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let n = match body.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(HttpFailure::Broken {
                        received: check.received(),
                        announced: file.size,
                        why: e.to_string(),
                    })
                }
            };
            check.update(&buffer[..n]).map_err(HttpFailure::Check)?;
            out.write_all(&buffer[..n]).map_err(HttpFailure::Write)?;
            progress(check.received());
        }
        check.finish().map_err(HttpFailure::Check)
    }
}

fn header(response: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn status_failure(response: &ureq::http::Response<ureq::Body>) -> HttpFailure {
    let status = response.status();
    HttpFailure::Status(Status {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("").to_string(),
        code: header(response, "x-error-code"),
        message: header(response, "x-error-message"),
    })
}
