//! A model by its Hub id in the page: the worker downloads it with the browser's `fetch`, and
//! every decision is the CLI's own code in `crate::hub`, one step at a time:
//!
//! 1. [`HubDownload::new`]: the id (`ORG/NAME[@REVISION]`) and the Hub (the public one, or a
//!    stand-in on this machine for the browser tests), and the revision listing's URL;
//! 2. [`HubDownload::plan`]: the listing's answer read into the download's [`Plan`] (the
//!    commit, the files the loader reads with their sizes and digests, the bounds), or the
//!    Hub's refusal in words;
//! 3. per file, [`HubDownload::open`] (the answer's status, where redirects led, the commit
//!    served, the announced length), [`HubDownload::update`] with each chunk (stopped past the
//!    listed size) and [`HubDownload::finish`] (the size and the Hub's sha256 or blob id).
//!
//! Errors name the model as reports do (`hf://ORG/NAME@COMMIT/FILE`). What the page sends is
//! only these GET requests: no token, nothing of the user's.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::hub::listing::{Url, DEFAULT_ENDPOINT, MAX_LISTING_BYTES};
use crate::hub::plan::{file_failure, listing_failure, Status, Token};
use crate::hub::verify::Failure;
use crate::hub::{Check, Endpoint, HubId, Listing, Plan, RemoteFile};

/// Public checkpoints of one shape the page suggests, for the jobs that use that shape.
#[derive(Serialize, Debug)]
pub struct Suggestions {
    /// What they are used as, in the page's words (the jobs that take them).
    pub role: &'static str,
    pub checkpoints: &'static [Checkpoint],
}

#[derive(Serialize, Debug)]
pub struct Checkpoint {
    pub id: &'static str,
    /// Whether its files were downloaded and run on the machines that test medrank (none
    /// could be: they reach no Hub; README "Models" says what was tested instead).
    pub verified_here: bool,
}

const fn unverified(id: &'static str) -> Checkpoint {
    Checkpoint { id, verified_here: false }
}

/// The suggestions per role (README's table, "Public checkpoints of the right shape, per
/// job", lists the same ids; a test holds it to this list).
pub const SUGGESTED: &[Suggestions] = &[
    Suggestions {
        role: "Evaluator (Rank systems; a base to train one)",
        checkpoints: &[
            unverified("sentence-transformers/all-MiniLM-L6-v2"),
            unverified("sentence-transformers/all-MiniLM-L12-v2"),
        ],
    },
    Suggestions {
        role: "NLI grader (Grade, Statements)",
        checkpoints: &[
            unverified("cross-encoder/nli-distilroberta-base"),
            unverified("typeform/distilbert-base-uncased-mnli"),
            unverified("FacebookAI/roberta-large-mnli"),
        ],
    },
    Suggestions {
        role: "Dense ranker (the command line's nrp --dense-ranker)",
        checkpoints: &[unverified("sentence-transformers/multi-qa-MiniLM-L6-cos-v1")],
    },
];

/// What the page learns of the Hub at `ready`.
#[derive(Serialize)]
pub struct HubDescription {
    /// The public Hub's URL.
    pub endpoint: &'static str,
    pub suggested: &'static [Suggestions],
}

pub fn description() -> HubDescription {
    HubDescription { endpoint: DEFAULT_ENDPOINT, suggested: SUGGESTED }
}

/// The head of an HTTP answer as the worker's `fetch` saw it.
#[derive(Deserialize, Debug, Default)]
pub struct Answer {
    pub status: u16,
    #[serde(default)]
    pub status_text: String,
    /// `response.url`: where the redirects, if any, led.
    pub url: String,
    /// `X-Error-Code`, `X-Error-Message` (the Hub's reason for an error).
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// `X-Repo-Commit`, where the answer exposes it.
    pub repo_commit: Option<String>,
    /// `Content-Length`, where the answer has one.
    pub length: Option<u64>,
}

impl Answer {
    fn status(&self) -> Option<Status> {
        (!(200..300).contains(&self.status)).then(|| Status {
            status: self.status,
            reason: self.status_text.clone(),
            code: self.error_code.clone(),
            message: self.error_message.clone(),
        })
    }
}

/// The plan as the worker reads it.
#[derive(Serialize, Debug)]
pub struct PagePlan {
    /// `hf://ORG/NAME@COMMIT`: the files' names in the report's provenance.
    pub name: String,
    pub commit: String,
    pub total: u64,
    pub files: Vec<PageFile>,
}

#[derive(Serialize, Debug)]
pub struct PageFile {
    pub path: String,
    pub size: u64,
    /// Where to ask for it (at the commit).
    pub url: String,
    /// The digest it is checked against: also its name in the browser's cache.
    pub digest: String,
}

/// One model's download from the Hub (see the module's documentation).
pub struct HubDownload {
    id: HubId,
    endpoint: Endpoint,
    plan: Option<Plan>,
    /// The file being received and its check.
    receiving: Option<(RemoteFile, Check)>,
}

impl HubDownload {
    /// `id` as typed; `endpoint` the public Hub when `None`, else a stand-in on this machine
    /// (`http://127.0.0.1:PORT`): nothing else, so no link can point the page elsewhere.
    pub fn new(id: &str, endpoint: Option<&str>) -> Result<HubDownload> {
        let id = HubId::parse(id.trim()).map_err(Error::invalid)?;
        let endpoint = match endpoint {
            None => Endpoint::new(DEFAULT_ENDPOINT).map_err(Error::invalid)?,
            Some(url) => {
                let endpoint = Endpoint::new(url).map_err(Error::invalid)?;
                if !endpoint.is_loopback() {
                    return Err(Error::invalid(format!(
                        "the page downloads models from {DEFAULT_ENDPOINT} only (or a stand-in Hub on this machine, http://127.0.0.1:PORT), not from {url}"
                    )));
                }
                endpoint
            }
        };
        Ok(HubDownload { id, endpoint, plan: None, receiving: None })
    }

    /// `hf://ORG/NAME[@REVISION]`: the model's name until its commit is known.
    pub fn name(&self) -> String {
        format!("{}{}", crate::hub::id::SCHEME, self.id.display())
    }

    /// The revision listing's URL.
    pub fn listing_url(&self) -> String {
        self.endpoint.revision_url(&self.id)
    }

    /// The listing's answer (its head and its body) read into the plan, as JSON text
    /// ([`PagePlan`]); the error is the Hub's refusal or what the repository lacks.
    pub fn plan(&mut self, answer: &Answer, body: &[u8]) -> Result<String> {
        let url = self.listing_url();
        if let Some(status) = answer.status() {
            return Err(Error::in_file(&self.name(), listing_failure(&self.id, &status, Token::NeverSent, &url)));
        }
        self.arrived_from(&self.name(), answer)?;
        if body.len() as u64 > MAX_LISTING_BYTES {
            return Err(Error::in_file(
                &self.name(),
                format!("the revision listing is longer than {MAX_LISTING_BYTES} bytes (from {url})"),
            ));
        }
        let listing =
            Listing::parse(body).map_err(|why| Error::in_file(&self.name(), format!("{why} (from {url})")))?;
        let plan = Plan::new(&self.id, &listing, false)?;
        let files = plan
            .files
            .iter()
            .map(|f| PageFile {
                path: f.path.clone(),
                size: f.size,
                url: self.endpoint.file_url(&self.id.repo, &plan.commit, &f.path),
                digest: f.digest.hex().to_string(),
            })
            .collect();
        let reply = PagePlan { name: plan.name.clone(), commit: plan.commit.clone(), total: plan.total, files };
        self.plan = Some(plan);
        crate::jobs::json(&reply)
    }

    /// A file's answer, before its body: an error status, a redirect off the Hub and its
    /// storage, another commit than the listing's, or a length over the listed size is
    /// refused before a byte is kept.
    pub fn open(&mut self, path: &str, answer: &Answer) -> Result<()> {
        self.receiving = None;
        let plan = self.plan.as_ref().ok_or_else(|| Error::invalid("no plan: the listing was not read"))?;
        let file = plan.files.iter().find(|f| f.path == path).ok_or_else(|| {
            Error::in_file(&format!("{}/{path}", plan.name), "not among the files the plan downloads")
        })?;
        let named = format!("{}/{path}", plan.name);
        if let Some(status) = answer.status() {
            return Err(Error::in_file(&named, file_failure(&status, plan.gated, Token::NeverSent)));
        }
        self.arrived_from(&named, answer)?;
        if let Some(served) = answer.repo_commit.as_deref().filter(|c| *c != plan.commit) {
            let why = format!("the Hub served commit {served} where the listing named {}", plan.commit);
            return Err(Error::in_file(&named, why));
        }
        if answer.length.is_some_and(|length| length > file.size) {
            let why = Failure::LargerThanAnnounced { announced: file.size }.to_string();
            return Err(Error::in_file(&named, why));
        }
        self.receiving = Some((file.clone(), Check::new(file.size, file.digest.clone())));
        Ok(())
    }

    /// The next chunk of the file being received: an error at once past its listed size.
    pub fn update(&mut self, chunk: &[u8]) -> Result<()> {
        let (file, check) = self.receiving.as_mut().ok_or_else(|| Error::invalid("no file is being received"))?;
        let Err(failure) = check.update(chunk) else { return Ok(()) };
        let path = file.path.clone();
        self.receiving = None;
        Err(Error::in_file(&self.named(&path), failure.to_string()))
    }

    /// The file's transfer is over: its size and digest must be the listed ones.
    pub fn finish(&mut self) -> Result<()> {
        let (file, check) = self.receiving.take().ok_or_else(|| Error::invalid("no file is being received"))?;
        check.finish().map_err(|failure| Error::in_file(&self.named(&file.path), failure.to_string()))
    }

    fn named(&self, path: &str) -> String {
        match &self.plan {
            Some(plan) => format!("{}/{path}", plan.name),
            None => format!("{}/{path}", self.name()),
        }
    }

    /// Where the browser's redirects led: the Hub itself, or a host a redirect from it may go
    /// to (the CLI's rule; the policy's `connect-src` already kept the browser from others).
    fn arrived_from(&self, named: &str, answer: &Answer) -> Result<()> {
        let at = Url::parse(&answer.url)
            .map_err(|why| Error::in_file(named, format!("the answer came from `{}`: {why}", answer.url)))?;
        if self.endpoint.is_own(&at) {
            return Ok(());
        }
        self.endpoint.may_redirect_to(&at).map_err(|why| Error::in_file(named, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::verify::git_blob_id;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
    // FIPS 180-2, Appendix B.1: SHA-256("abc").
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    fn listing() -> String {
        let config = git_blob_id(b"{}");
        let tokenizer = git_blob_id(b"[]");
        format!(
            r#"{{"sha":"{COMMIT}","siblings":[
                {{"rfilename":"config.json","size":2,"blobId":"{config}"}},
                {{"rfilename":"tokenizer.json","size":2,"blobId":"{tokenizer}"}},
                {{"rfilename":"model.safetensors","size":134,"lfs":{{"sha256":"{ABC}","size":3}}}},
                {{"rfilename":"README.md","size":1,"blobId":"{tokenizer}"}}]}}"#
        )
    }

    fn ok(url: &str) -> Answer {
        Answer { status: 200, url: url.into(), ..Answer::default() }
    }

    #[test]
    fn a_download_follows_the_clis_plan_and_checks() {
        let mut hub = HubDownload::new("org/name@v1", Some("http://127.0.0.1:8000")).unwrap();
        assert_eq!(hub.listing_url(), "http://127.0.0.1:8000/api/models/org/name/revision/v1?blobs=true");
        let plan: serde_json::Value =
            serde_json::from_str(&hub.plan(&ok(&hub.listing_url()), listing().as_bytes()).unwrap()).unwrap();
        assert_eq!(plan["name"], format!("hf://org/name@{COMMIT}"));
        assert_eq!(plan["total"], 7);
        let paths: Vec<&str> = plan["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["config.json", "tokenizer.json", "model.safetensors"]);
        let weights = &plan["files"][2];
        assert_eq!(weights["url"], format!("http://127.0.0.1:8000/org/name/resolve/{COMMIT}/model.safetensors"));
        assert_eq!(weights["digest"], ABC);

        // The weights from the stand-in's other port (a redirect to its "CDN"), in two chunks.
        hub.open("model.safetensors", &ok("http://127.0.0.1:9000/blob")).unwrap();
        hub.update(b"a").unwrap();
        hub.update(b"bc").unwrap();
        hub.finish().unwrap();
        hub.open("config.json", &ok(weights["url"].as_str().unwrap())).unwrap();
        hub.update(b"{}").unwrap();
        hub.finish().unwrap();
    }

    #[test]
    fn every_refusal_names_the_model_and_the_file() {
        let mut hub = HubDownload::new("org/name", Some("http://127.0.0.1:8000")).unwrap();
        hub.plan(&ok(&hub.listing_url()), listing().as_bytes()).unwrap();
        let file = |e: Error| (e.location().unwrap().file.clone(), e.to_string());
        let weights = format!("hf://org/name@{COMMIT}/model.safetensors");

        hub.open("model.safetensors", &ok("http://127.0.0.1:9000/x")).unwrap();
        hub.update(b"abd").unwrap();
        let (at, why) = file(hub.finish().unwrap_err());
        assert_eq!(at, weights);
        assert!(why.contains("do not match the Hub's published sha256"), "{why}");

        let missing = Answer { status: 404, status_text: "Not Found".into(), ..ok("http://127.0.0.1:8000/x") };
        let (at, why) = file(hub.open("model.safetensors", &missing).unwrap_err());
        assert_eq!(
            (at.as_str(), why.contains("404 Not Found: the file is not at this commit")),
            (weights.as_str(), true)
        );

        let (_, why) = file(hub.open("model.safetensors", &ok("http://127.0.0.2:9000/x")).unwrap_err());
        assert!(why.contains("a redirect to `127.0.0.2`"), "{why}");
        let other = Answer { repo_commit: Some("f".repeat(40)), ..ok("http://127.0.0.1:8000/x") };
        assert!(file(hub.open("model.safetensors", &other).unwrap_err()).1.contains("served commit"));
        let long = Answer { length: Some(4), ..ok("http://127.0.0.1:8000/x") };
        assert!(file(hub.open("model.safetensors", &long).unwrap_err()).1.contains("more than the 3 bytes"));
        hub.open("model.safetensors", &ok("http://127.0.0.1:8000/x")).unwrap();
        assert!(file(hub.update(b"abcd").unwrap_err()).1.contains("more than the 3 bytes"));

        let mut gone = HubDownload::new("org/gone", Some("http://127.0.0.1:8000")).unwrap();
        let e =
            gone.plan(&Answer { status: 404, status_text: "Not Found".into(), ..Answer::default() }, b"").unwrap_err();
        assert_eq!(e.location().unwrap().file, "hf://org/gone");
        assert!(e.to_string().contains("no model `org/gone` on the Hub"), "{e}");
    }

    #[test]
    fn the_page_reaches_the_public_hub_or_a_stand_in_on_this_machine_only() {
        let public = HubDownload::new("org/name", None).unwrap();
        assert!(public.listing_url().starts_with("https://huggingface.co/api/models/org/name/"));
        assert!(HubDownload::new("org/name", Some("https://evil.example")).is_err());
        assert!(HubDownload::new("org/name", Some("http://10.0.0.1:80")).is_err());
        let e = HubDownload::new("not an id", None).err().unwrap();
        assert!(e.to_string().contains("is not a Hub id"), "{e}");
    }

    #[test]
    fn readme_lists_every_suggested_checkpoint_as_not_verified_here() {
        let readme = include_str!("../../README.md");
        let table = &readme[readme.find("**Public checkpoints of the right shape, per job.**").unwrap()..];
        for c in SUGGESTED.iter().flat_map(|s| s.checkpoints) {
            assert!(table.contains(&format!("`{}`", c.id)), "README's table lacks {}", c.id);
            assert!(!c.verified_here, "{}: nothing is verified here without a route to the Hub", c.id);
        }
    }
}
