//! A model's Hub id: `ORG/NAME`, optionally `@REVISION` (a branch, a tag or a commit), as
//! the Hub and Python's `huggingface_hub` spell them; `hf://` in front is accepted too (the
//! name reports give a resolved model, `hf://ORG/NAME@COMMIT`, can be pasted back).

/// The branch a revision-less id means (the Hub's default branch name).
pub const DEFAULT_REVISION: &str = "main";

/// The prefix of a model's name once resolved (`hf://ORG/NAME@COMMIT`), as
/// `huggingface_hub`'s file system writes Hub paths.
pub const SCHEME: &str = "hf://";

/// `ORG/NAME[@REVISION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubId {
    /// `ORG/NAME`.
    pub repo: String,
    /// The revision asked for; `None` means [`DEFAULT_REVISION`].
    pub revision: Option<String>,
}

impl HubId {
    /// Parses `ORG/NAME`, `ORG/NAME@REVISION`, with or without `hf://`. The error says what
    /// is wrong with the text (the caller names the option).
    pub fn parse(text: &str) -> Result<HubId, String> {
        let body = text.strip_prefix(SCHEME).unwrap_or(text);
        let (repo, revision) = match body.split_once('@') {
            Some((repo, rev)) => (repo, Some(rev)),
            None => (body, None),
        };
        let Some((org, name)) = repo.split_once('/') else {
            return Err(format!("`{text}` is not a Hub id: expected ORG/NAME or ORG/NAME@REVISION"));
        };
        for (what, part) in [("organisation", org), ("name", name)] {
            check_part(part).map_err(|why| format!("`{text}` is not a Hub id: its {what} {why}"))?;
        }
        if name.ends_with(".git") {
            return Err(format!("`{text}` is not a Hub id: a name may not end with .git"));
        }
        if let Some(rev) = revision {
            check_revision(rev).map_err(|why| format!("`{text}`: the revision after @ {why}"))?;
        }
        Ok(HubId { repo: repo.to_string(), revision: revision.map(str::to_string) })
    }

    /// The revision asked for (`main` when none was given).
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or(DEFAULT_REVISION)
    }

    /// The id as the user wrote it (without `hf://`).
    pub fn display(&self) -> String {
        match &self.revision {
            Some(rev) => format!("{}@{rev}", self.repo),
            None => self.repo.clone(),
        }
    }

    /// The repository's folder in the Hugging Face cache: `models--ORG--NAME`.
    pub fn cache_folder(&self) -> String {
        format!("models--{}", self.repo.replace('/', "--"))
    }

    /// The name of this model at a resolved commit, `hf://ORG/NAME@COMMIT`: what reports
    /// and messages call it (files as `hf://ORG/NAME@COMMIT/config.json`).
    pub fn resolved_name(&self, commit: &str) -> String {
        format!("{SCHEME}{}@{commit}", self.repo)
    }
}

/// A 40-character lowercase hexadecimal git commit id (a revision that never moves).
pub fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// One side of `ORG/NAME`: 1 to 96 of `A-Z a-z 0-9 _ . -`, beginning and ending with a
/// letter, digit or `_`, without `--` or `..` (the Hub's rules, and those
/// `huggingface_hub.utils.validate_repo_id` applies).
fn check_part(part: &str) -> Result<(), String> {
    if part.is_empty() || part.len() > 96 {
        return Err("must be 1 to 96 characters".into());
    }
    if let Some(c) = part.chars().find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c))) {
        return Err(format!("has `{c}`: only letters, digits, `_`, `.` and `-` are allowed"));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    if !edge(part.chars().next()) || !edge(part.chars().last()) {
        return Err("must begin and end with a letter, a digit or `_`".into());
    }
    if part.contains("--") || part.contains("..") {
        return Err("may not hold `--` or `..`".into());
    }
    Ok(())
}

/// A branch, tag or commit: 1 to 255 of `A-Z a-z 0-9 _ . - /`, no `..`, no empty segment
/// (`refs/pr/1` is one). It names a folder under the cache's `refs/`, so nothing that could
/// leave it.
fn check_revision(rev: &str) -> Result<(), String> {
    if rev.is_empty() || rev.len() > 255 {
        return Err("must be 1 to 255 characters".into());
    }
    if let Some(c) = rev.chars().find(|c| !(c.is_ascii_alphanumeric() || "_.-/".contains(*c))) {
        return Err(format!("has `{c}`: a branch, tag or commit holds letters, digits, `_`, `.`, `-` and `/`"));
    }
    if rev.contains("..") || rev.split('/').any(|s| s.is_empty() || s == ".") {
        return Err("may not hold `..` or an empty part between `/`".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_and_without_a_revision() {
        let id = HubId::parse("cross-encoder/nli-distilroberta-base").unwrap();
        assert_eq!((id.repo.as_str(), id.revision()), ("cross-encoder/nli-distilroberta-base", "main"));
        assert_eq!(id.cache_folder(), "models--cross-encoder--nli-distilroberta-base");
        let id = HubId::parse("hf://org/name@v1.0").unwrap();
        assert_eq!((id.repo.as_str(), id.revision.as_deref()), ("org/name", Some("v1.0")));
        assert_eq!(id.display(), "org/name@v1.0");
        let pr = HubId::parse("org/name@refs/pr/3").unwrap();
        assert_eq!(pr.revision(), "refs/pr/3");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert!(is_commit(commit) && !is_commit("main") && !is_commit(&commit.to_uppercase()));
        assert_eq!(id.resolved_name(commit), format!("hf://org/name@{commit}"));
    }

    #[test]
    fn what_is_not_an_id_is_refused_with_the_reason() {
        for (text, why) in [
            ("name-only", "expected ORG/NAME"),
            ("/abs/path", "must be 1 to 96"),
            ("a/b/c", "has `/`"),
            ("./org/name", "begin and end"),
            ("org/-name", "begin and end"),
            ("org/na--me", "`--`"),
            ("org/name.git", ".git"),
            ("org/na me", "has ` `"),
            ("org/name@", "1 to 255"),
            ("org/name@../../etc", "`..`"),
            ("org/name@a//b", "empty part"),
            ("org/name@a b", "has ` `"),
        ] {
            let e = HubId::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
