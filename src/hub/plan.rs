//! What to download for a model, decided from the Hub's listing before any byte is asked for
//! (the files the loader reads, each one's size and digest, the bounds), and the Hub's error
//! answers in words. The CLI (`resolve.rs`, over `transport.rs`) and the page (`page::hub`,
//! over the browser's `fetch`) both go through it, so they take the same files, refuse the
//! same repositories and word the same failures.

use super::id::HubId;
use super::listing::{check_sizes, is_weights, safe_path, select_files, Listing, RemoteFile, SHARD_INDEX};
use crate::{Error, Result};

/// A model's download, before its first byte: the commit, the files and their total.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `hf://ORG/NAME@COMMIT`: the model's name in reports and messages.
    pub name: String,
    pub commit: String,
    /// The files the loader reads, each with its size and digest from the listing.
    pub files: Vec<RemoteFile>,
    /// Their sizes together.
    pub total: u64,
    /// The model is gated (its downloads need a token of a user who accepted its terms).
    pub gated: bool,
}

impl Plan {
    /// The plan for `id` from its revision's listing; `reads_bin`: the front end converts
    /// `pytorch_model.bin` (the CLI does, the page does not). The error names the file or the
    /// model and says that nothing was downloaded.
    pub fn new(id: &HubId, listing: &Listing, reads_bin: bool) -> Result<Plan> {
        let name = id.resolved_name(&listing.commit);
        let names = listing.names();
        let chosen = select_files(&names).map_err(|why| Error::in_file(&name, format!("the repository has {why}")))?;
        loadable(&name, &chosen, reads_bin)?;
        let mut files = Vec::new();
        for path in chosen {
            let in_file = |why: String| Error::in_file(&format!("{name}/{path}"), why);
            safe_path(path).map_err(in_file)?;
            files.push(listing.file(path).map_err(in_file)?.clone());
        }
        let total = check_sizes(&files.iter().collect::<Vec<_>>(), is_weights)
            .map_err(|why| Error::in_file(&name, format!("{why}; nothing was downloaded")))?;
        Ok(Plan { name, commit: listing.commit.clone(), files, total, gated: listing.gated })
    }
}

/// Refuses, before any download, what the loader (`model::load`) cannot read although
/// [`select_files`] knows it: weights in shards, and where the front end cannot convert them
/// (`reads_bin` false: the page, whose worker reads `tokenizer.json` and `model.safetensors`
/// by name) a tokenizer in `spm.model` alone and `pytorch_model.bin`; the command line
/// converts both (`model::spm`, the `.bin` reader).
pub fn loadable(resolved: &str, chosen: &[&str], reads_bin: bool) -> Result<()> {
    let refuse = |file: &str, why: &str| Err(Error::in_file(&format!("{resolved}/{file}"), why.to_string()));
    if chosen.contains(&SHARD_INDEX) {
        return refuse(
            SHARD_INDEX,
            "the weights are split in shards; medrank's loader reads one model.safetensors (or pytorch_model.bin), so nothing was downloaded",
        );
    }
    if !reads_bin && chosen.contains(&"spm.model") {
        return refuse(
            "spm.model",
            &format!("the repository has {}; nothing was downloaded", crate::model::load::SPM_ONLY_IN_THE_PAGE),
        );
    }
    if !reads_bin && chosen.contains(&"pytorch_model.bin") {
        return refuse(
            "pytorch_model.bin",
            "the repository has its weights in pytorch_model.bin only, which the page cannot read (it takes model.safetensors); the command line converts it, so nothing was downloaded",
        );
    }
    Ok(())
}

/// The Hub's answer to a request that failed: its status, and its own reason when it sent
/// one (`X-Error-Code`, `X-Error-Message`).
#[derive(Debug, Clone)]
pub struct Status {
    pub status: u16,
    pub reason: String,
    pub code: Option<String>,
    pub message: Option<String>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the Hub answered {} {}", self.status, self.reason)?;
        match &self.message {
            Some(m) => write!(f, " ({m})"),
            None => Ok(()),
        }
    }
}

/// Whether a token went with the request, and where one comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// `HF_TOKEN` (or the token file) was sent.
    Sent,
    /// None was set (the CLI: the user can set one).
    NotSet,
    /// The page: it never sends one.
    NeverSent,
}

impl Token {
    fn hint(self) -> &'static str {
        match self {
            Token::NeverSent => "the page sends no token: download it with the command line (HF_TOKEN set), then choose its folder here",
            _ => "give a Hugging Face access token in HF_TOKEN (or log in with `hf auth login`, which writes $HF_HOME/token)",
        }
    }

    fn gated(self) -> String {
        match self {
            Token::Sent => "the model is gated and your token has no access to it: accept its conditions on its Hub page with the account of the token".into(),
            other => format!("the model is gated: accept its conditions on its Hub page, then {}", other.hint()),
        }
    }
}

/// The listing's failure in words: no such model or revision, a gated or private one.
pub fn listing_failure(id: &HubId, s: &Status, token: Token, url: &str) -> String {
    let why = match (s.status, s.code.as_deref()) {
        (_, Some("RevisionNotFound")) => {
            format!("the model has no revision `{}` (a branch, tag or commit)", id.revision())
        }
        (401 | 404, Some("RepoNotFound")) | (404, _) => format!(
            "no model `{}` on the Hub, or a private one{}",
            id.repo,
            match token {
                Token::Sent => " your token cannot see".to_string(),
                Token::NotSet => ": for a private model, set HF_TOKEN".to_string(),
                Token::NeverSent => format!(": {}", Token::NeverSent.hint()),
            }
        ),
        (401, Some("GatedRepo")) | (403, _) => token.gated(),
        (401, _) if token == Token::Sent => "the token in HF_TOKEN was refused".into(),
        (401, _) => format!("the model is gated or private: {}", token.hint()),
        _ => "try again later".into(),
    };
    format!("{s}: {why} (asking {url})")
}

/// A file's failure in words.
pub fn file_failure(s: &Status, gated: bool, token: Token) -> String {
    match s.status {
        403 => format!("{s}: {}", token.gated()),
        401 if gated => format!("{s}: {}", token.gated()),
        401 => format!("{s}: the model is private: {}", token.hint()),
        404 => format!("{s}: the file is not at this commit"),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(files: &str) -> Listing {
        let text = format!(r#"{{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{files}]}}"#);
        Listing::parse(text.as_bytes()).unwrap()
    }
    const CONFIG: &str = r#"{"rfilename":"config.json","size":10,"blobId":"ce013625030ba8dba906f756967f9e9ca394464a"}"#;
    const TOKENIZER: &str =
        r#"{"rfilename":"tokenizer.json","size":20,"blobId":"ce013625030ba8dba906f756967f9e9ca394464b"}"#;
    const WEIGHTS: &str = r#"{"rfilename":"model.safetensors","size":134,"lfs":{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","size":90}}"#;
    const BIN: &str = r#"{"rfilename":"pytorch_model.bin","size":134,"lfs":{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","size":70}}"#;

    #[test]
    fn the_plan_names_the_commit_the_files_and_their_total() {
        let id = HubId::parse("org/name").unwrap();
        let plan =
            Plan::new(&id, &listing(&[CONFIG, TOKENIZER, WEIGHTS, r#"{"rfilename":"README.md"}"#].join(",")), false)
                .unwrap();
        assert_eq!(plan.name, "hf://org/name@0123456789abcdef0123456789abcdef01234567");
        let files: Vec<_> = plan.files.iter().map(|f| (f.path.as_str(), f.size)).collect();
        assert_eq!(files, [("config.json", 10), ("tokenizer.json", 20), ("model.safetensors", 90)]);
        assert_eq!(plan.total, 120);
    }

    #[test]
    fn the_page_refuses_weights_it_cannot_read_before_any_download() {
        let id = HubId::parse("org/name").unwrap();
        let bin_only = listing(&[CONFIG, TOKENIZER, BIN].join(","));
        assert_eq!(Plan::new(&id, &bin_only, true).unwrap().total, 100);
        let e = Plan::new(&id, &bin_only, false).unwrap_err();
        assert_eq!(
            e.location().unwrap().file,
            "hf://org/name@0123456789abcdef0123456789abcdef01234567/pytorch_model.bin"
        );
        assert!(e.to_string().contains("nothing was downloaded"), "{e}");
        let e = Plan::new(&id, &listing(&[CONFIG, WEIGHTS].join(",")), false).unwrap_err();
        assert!(e.to_string().contains("no tokenizer.json"), "{e}");
    }

    #[test]
    fn failures_say_what_the_user_can_do() {
        let id = HubId::parse("org/name").unwrap();
        let status = |status, code: Option<&str>| Status {
            status,
            reason: "R".into(),
            code: code.map(str::to_string),
            message: None,
        };
        let missing = listing_failure(&id, &status(404, None), Token::NeverSent, "U");
        assert!(missing.contains("no model `org/name`") && missing.contains("the page sends no token"), "{missing}");
        let gated = listing_failure(&id, &status(401, Some("GatedRepo")), Token::NotSet, "U");
        assert!(gated.contains("gated") && gated.contains("HF_TOKEN"), "{gated}");
        assert_eq!(
            file_failure(&status(404, None), false, Token::Sent),
            "the Hub answered 404 R: the file is not at this commit"
        );
    }

    /// A repository whose only tokenizer is `spm.model`: the command line loads it (it
    /// converts the SentencePiece model), the page is told why not before any download, in
    /// the sentence a folder picked in the page gets too (`model::load::SPM_ONLY_IN_THE_PAGE`).
    #[test]
    fn a_repository_with_only_spm_model_is_refused_for_the_page_in_words() {
        let chosen = ["config.json", "spm.model", "model.safetensors"];
        loadable("hf://o/deberta@c0ffee", &chosen, true).unwrap();
        let err = loadable("hf://o/deberta@c0ffee", &chosen, false).unwrap_err().to_string();
        assert_eq!(
            err,
            "hf://o/deberta@c0ffee/spm.model: the repository has a SentencePiece spm.model but no tokenizer.json, \
             the only tokenizer the page reads (the command line converts spm.model); nothing was downloaded"
        );
    }
}
