//! The Hub's URL layout and what it says about a revision, which files of it a model needs,
//! how large they may be, and where their downloads may be redirected.
//!
//! Two requests, as Python's `huggingface_hub` makes them:
//! - `GET {endpoint}/api/models/{ORG/NAME}/revision/{REVISION}?blobs=true`: the commit the
//!   revision points at (`sha`) and every file (`siblings`: `rfilename`, `size`, `blobId`,
//!   and for LFS files `lfs: {sha256, size}`);
//! - `GET {endpoint}/{ORG/NAME}/resolve/{COMMIT}/{FILE}`: the file, from the commit (so a
//!   branch moving during a download cannot mix two revisions); large files answer with a
//!   redirect to the Hub's storage host.

use super::id::HubId;
use super::verify::Digest;
use serde::Deserialize;

/// Where the Hub is when `HF_ENDPOINT` does not say otherwise.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The revision listing's largest accepted size (a repository of thousands of files lists
/// in a few hundred kB).
pub const MAX_LISTING_BYTES: u64 = 16 << 20;
/// Every file of one model together: BERT-large in f32 is 1.3 GB, XLM-R large 2.2 GB, and
/// wasm32 (the page) addresses 4 GiB in all.
pub const MAX_MODEL_BYTES: u64 = 4 << 30;
/// Each file that is not weights (configs, tokenizers, the shard index): they are parsed
/// whole in memory; the largest multilingual `tokenizer.json` files are about 20 MB.
pub const MAX_SMALL_FILE_BYTES: u64 = 64 << 20;

/// The files medrank reads besides the tokenizer and the weights, when a repository has
/// them (sentence-transformers' pooling, normalisation and input length: `model::pooling`,
/// `model::embed::input_limit`).
pub const OPTIONAL_FILES: [&str; 3] = ["modules.json", "sentence_bert_config.json", "1_Pooling/config.json"];
/// The shard index of safetensors weights split in several files.
pub const SHARD_INDEX: &str = "model.safetensors.index.json";

/// A Hub (or a mirror, or a test's stand-in), by its base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    base: Url,
}

impl Endpoint {
    /// `http(s)://HOST[:PORT][/PREFIX]`; a trailing `/` is dropped.
    pub fn new(url: &str) -> Result<Endpoint, String> {
        let base = Url::parse(url.trim_end_matches('/'))
            .map_err(|why| format!("HF_ENDPOINT `{url}` is not an http(s) URL: {why}"))?;
        if base.path.contains('?') || base.path.contains('#') {
            return Err(format!("HF_ENDPOINT `{url}` has a query or fragment: give the Hub's base URL"));
        }
        Ok(Endpoint { base })
    }

    /// The base URL, without a trailing `/`.
    pub fn url(&self) -> String {
        self.base.to_string()
    }

    /// The revision listing's URL (the revision percent-encoded whole, `/` too).
    pub fn revision_url(&self, id: &HubId) -> String {
        format!("{}/api/models/{}/revision/{}?blobs=true", self.url(), id.repo, encode_revision(id.revision()))
    }

    /// A file's URL at a commit (file paths are checked by [`safe_path`]: nothing to encode).
    pub fn file_url(&self, repo: &str, commit: &str, path: &str) -> String {
        format!("{}/{repo}/resolve/{commit}/{path}", self.url())
    }

    /// Whether a request to `target` is a request to the Hub itself (the only host the
    /// user's token is sent to).
    pub fn is_own(&self, target: &Url) -> bool {
        target.origin() == self.base.origin()
    }

    /// Whether a download may follow a redirect to `target`: to the Hub's own origin; to
    /// another port of its host (a mirror's or a test's file server); to a subdomain of its
    /// host; and from the public Hub, to its hosts in [`PUBLIC_HUB_SOURCES`] (its storage
    /// under `hf.co` and `huggingface.co`: its CDN and Xet bridge). Never from https down to
    /// http. The error names the host and why.
    pub fn may_redirect_to(&self, target: &Url) -> Result<(), String> {
        if self.base.scheme == "https" && target.scheme != "https" {
            return Err(format!("a redirect from https down to {}://{}: refused", target.scheme, target.host));
        }
        let hub = &self.base.host;
        let host = &target.host;
        let under_hub = host == hub || host.ends_with(&format!(".{hub}"));
        let public_storage = self.is_public() && PUBLIC_HUB_SOURCES.iter().any(|source| source_matches(source, target));
        if under_hub || public_storage {
            Ok(())
        } else {
            Err(format!(
                "a redirect to `{host}`, which is not the Hub ({hub}) nor one of its storage hosts: refused (nothing was sent there)"
            ))
        }
    }

    /// The public Hub (`huggingface.co` or one of its subdomains).
    pub fn is_public(&self) -> bool {
        let hub = &self.base.host;
        hub == "huggingface.co" || hub.ends_with(".huggingface.co")
    }

    /// An http endpoint on this machine (`127.0.0.1`, `[::1]`, `localhost`): a mirror or a
    /// test's stand-in, the only Hub besides the public one the page may be pointed at.
    pub fn is_loopback(&self) -> bool {
        self.base.scheme == "http" && matches!(self.base.host.as_str(), "127.0.0.1" | "[::1]" | "localhost")
    }

    /// The Content-Security-Policy sources (`connect-src`) that allow what
    /// [`Endpoint::may_redirect_to`] allows: the public Hub's [`PUBLIC_HUB_SOURCES`], or
    /// another endpoint's host on every port (and its subdomains, for a name).
    pub fn connect_sources(&self) -> Vec<String> {
        if self.is_public() && self.base.scheme == "https" {
            return PUBLIC_HUB_SOURCES.iter().map(|s| s.to_string()).collect();
        }
        let (scheme, host) = (&self.base.scheme, &self.base.host);
        let mut sources = vec![format!("{scheme}://{host}:*")];
        if host.parse::<std::net::Ipv4Addr>().is_err() && !host.starts_with('[') {
            sources.push(format!("{scheme}://*.{host}:*"));
        }
        sources
    }
}

/// The public Hub and the storage hosts its downloads are redirected to, as
/// Content-Security-Policy sources (https, the default port): the page's `connect-src` lists
/// exactly these, and [`Endpoint::may_redirect_to`] follows a redirect from the public Hub to
/// them and nowhere else.
pub const PUBLIC_HUB_SOURCES: [&str; 4] =
    ["https://huggingface.co", "https://*.huggingface.co", "https://hf.co", "https://*.hf.co"];

/// Whether `target` matches a CSP host source `https://HOST` or `https://*.DOMAIN` (scheme,
/// host, and the scheme's default port, as browsers match a source without a port).
fn source_matches(source: &str, target: &Url) -> bool {
    let Some((scheme, host)) = source.split_once("://") else { return false };
    let default_port = target.port.is_none() || target.port == Some(if scheme == "https" { 443 } else { 80 });
    let host_matches = match host.strip_prefix("*.") {
        Some(domain) => target.host.ends_with(&format!(".{domain}")),
        None => target.host == host,
    };
    target.scheme == scheme && default_port && host_matches
}

/// `main` stays `main`; `refs/pr/1` becomes `refs%2Fpr%2F1` (as `huggingface_hub` quotes
/// it; revisions hold no other character that needs encoding, see `id::check_revision`).
fn encode_revision(revision: &str) -> String {
    revision.replace('/', "%2F")
}

/// An http(s) URL in parts: only what the Hub's URLs and redirects need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub scheme: String,
    /// Lowercase; an IPv6 address keeps its brackets.
    pub host: String,
    pub port: Option<u16>,
    /// From the first `/` on (query included), or empty.
    pub path: String,
}

impl Url {
    pub fn parse(text: &str) -> Result<Url, String> {
        let (scheme, rest) = text.split_once("://").ok_or("no scheme (http:// or https://)")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!("scheme `{scheme}`: only http and https"));
        }
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err("a user name in a URL is not accepted".into());
        }
        let (host, port) = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => {
                let port = authority[i + 1..].parse::<u16>().map_err(|_| format!("bad port in `{authority}`"))?;
                (&authority[..i], Some(port))
            }
            _ => (authority, None),
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("bad host `{host}`"));
        }
        Ok(Url { scheme, host: host.to_ascii_lowercase(), port, path: path.to_string() })
    }

    /// `scheme://host:port` with the scheme's default port filled in.
    pub fn origin(&self) -> (String, String, u16) {
        let default = if self.scheme == "https" { 443 } else { 80 };
        (self.scheme.clone(), self.host.clone(), self.port.unwrap_or(default))
    }

    /// A redirect's `Location` against this URL: absolute, scheme-relative (`//host/..`),
    /// or a path on the same origin (`/..`); relative paths without `/` are resolved
    /// against this URL's folder.
    pub fn join(&self, location: &str) -> Result<Url, String> {
        if location.contains("://") {
            return Url::parse(location);
        }
        if let Some(rest) = location.strip_prefix("//") {
            return Url::parse(&format!("{}://{rest}", self.scheme));
        }
        let path = if location.starts_with('/') {
            location.to_string()
        } else {
            let folder = self.path.split(['?', '#']).next().unwrap_or("");
            let folder = &folder[..folder.rfind('/').map_or(0, |i| i + 1)];
            format!("{}{location}", if folder.is_empty() { "/" } else { folder })
        };
        Ok(Url { path, ..self.clone() })
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        write!(f, "{}", self.path)
    }
}

/// One file of a revision, as the listing describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    pub path: String,
    pub size: u64,
    pub digest: Digest,
}

/// What the Hub says of one revision.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The commit the revision points at.
    pub commit: String,
    /// Every file, with its size and digest where the listing gives them.
    pub files: Vec<(String, Option<RemoteFile>)>,
    /// `gated` is set: downloads need a token of a user who accepted the model's terms.
    pub gated: bool,
}

#[derive(Deserialize)]
struct RevisionJson {
    sha: Option<String>,
    #[serde(default)]
    siblings: Vec<SiblingJson>,
    #[serde(default)]
    gated: serde_json::Value,
}

#[derive(Deserialize)]
struct SiblingJson {
    rfilename: String,
    size: Option<u64>,
    #[serde(rename = "blobId")]
    blob_id: Option<String>,
    lfs: Option<LfsJson>,
}

#[derive(Deserialize)]
struct LfsJson {
    sha256: String,
    size: u64,
}

impl Listing {
    /// Parses the revision listing (`?blobs=true`). The error says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<Listing, String> {
        let json: RevisionJson = serde_json::from_slice(bytes)
            .map_err(|e| format!("the Hub's revision listing is not what it should be: {e}"))?;
        let commit = json.sha.ok_or("the Hub's revision listing names no commit (`sha`)")?;
        if !super::id::is_commit(&commit) {
            return Err(format!("the Hub's revision listing names `{commit}` as its commit: not a commit id"));
        }
        let files = json
            .siblings
            .into_iter()
            .map(|s| {
                let file = match (s.lfs, s.size, s.blob_id) {
                    (Some(lfs), _, _) => Some(RemoteFile {
                        path: s.rfilename.clone(),
                        size: lfs.size,
                        digest: Digest::Sha256(lfs.sha256),
                    }),
                    (None, Some(size), Some(blob)) => {
                        Some(RemoteFile { path: s.rfilename.clone(), size, digest: Digest::GitBlob(blob) })
                    }
                    _ => None,
                };
                (s.rfilename, file)
            })
            .collect();
        let gated = !matches!(json.gated, serde_json::Value::Null | serde_json::Value::Bool(false));
        Ok(Listing { commit, files, gated })
    }

    /// The names of its files.
    pub fn names(&self) -> Vec<&str> {
        self.files.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// A file's size and digest; the error names what the listing lacks.
    pub fn file(&self, path: &str) -> Result<&RemoteFile, String> {
        match self.files.iter().find(|(n, _)| n == path) {
            Some((_, Some(f))) if f.digest.well_formed() => Ok(f),
            Some((_, Some(f))) => {
                Err(format!("the Hub's listing gives `{}` as its digest: not a hex digest", f.digest.hex()))
            }
            Some((_, None)) => Err("the Hub's listing gives no size and digest for it (asked with blobs=true)".into()),
            None => Err("not in the Hub's listing of this revision".into()),
        }
    }
}

/// Which of the `present` files medrank reads (a repository's listing, or a folder's files):
/// `config.json`; `tokenizer.json`, or `spm.model` where there is none; the weights,
/// `model.safetensors`, or the shard index `model.safetensors.index.json` (its shards are
/// added by [`shards`] once it is read), or `pytorch_model.bin` (read natively only); and
/// the sentence-transformers files of [`OPTIONAL_FILES`] that are there. Nothing else
/// (READMEs, other frameworks' weights, training states) is fetched. The error names the
/// missing file.
pub fn select_files<'a>(present: &[&'a str]) -> Result<Vec<&'a str>, String> {
    let has = |name: &str| present.iter().find(|p| **p == name).copied();
    let mut chosen = Vec::new();
    chosen.push(has("config.json").ok_or("no config.json: not a model repository medrank can read")?);
    chosen.push(has("tokenizer.json").or_else(|| has("spm.model")).ok_or(
        "no tokenizer.json (nor spm.model): medrank reads the tokenizer from tokenizer.json, which `transformers` writes with `tokenizer.save_pretrained`",
    )?);
    chosen.push(
        has("model.safetensors")
            .or_else(|| has(SHARD_INDEX))
            .or_else(|| has("pytorch_model.bin"))
            .ok_or("no model.safetensors (nor sharded safetensors with model.safetensors.index.json, nor pytorch_model.bin): no weights medrank can read")?,
    );
    chosen.extend(OPTIONAL_FILES.iter().filter_map(|f| has(f)));
    Ok(chosen)
}

/// The shards a safetensors index names (its `weight_map`'s files, each once, sorted),
/// each of them among `present`.
pub fn shards(index: &[u8], present: &[&str]) -> Result<Vec<String>, String> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: std::collections::BTreeMap<String, String>,
    }
    let index: Index = serde_json::from_slice(index).map_err(|e| format!("not a safetensors shard index: {e}"))?;
    let files: std::collections::BTreeSet<String> = index.weight_map.into_values().collect();
    if files.is_empty() {
        return Err("its weight_map names no shard".into());
    }
    for f in &files {
        if !f.ends_with(".safetensors") || safe_path(f).is_err() {
            return Err(format!("it names `{f}` as a shard: not a .safetensors file of the repository"));
        }
        if !present.contains(&f.as_str()) {
            return Err(format!("it names the shard `{f}`, which the repository does not have"));
        }
    }
    Ok(files.into_iter().collect())
}

/// A file path inside a repository that may become a path on disk and in a URL: segments
/// of `A-Z a-z 0-9 _ . -`, none empty, `.` or `..`, not absolute.
pub fn safe_path(path: &str) -> Result<(), String> {
    let ok = !path.is_empty()
        && path.len() <= 255
        && path.split('/').all(|s| {
            !s.is_empty() && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        });
    if ok {
        Ok(())
    } else {
        Err(format!("`{path}` is not a plain file path (letters, digits, `_`, `.`, `-`, folders by `/`)"))
    }
}

/// The bounds, checked before any byte is downloaded: the weights (`weights` names them)
/// at most [`MAX_MODEL_BYTES`] in all, every other file at most [`MAX_SMALL_FILE_BYTES`].
/// Returns the total; the error names the file or the total.
pub fn check_sizes(files: &[&RemoteFile], is_weights: impl Fn(&str) -> bool) -> Result<u64, String> {
    let mut total = 0u64;
    for f in files {
        if !is_weights(&f.path) && f.size > MAX_SMALL_FILE_BYTES {
            return Err(format!(
                "{}: {} bytes, more than the {} MiB a configuration or tokenizer file may have here",
                f.path,
                f.size,
                MAX_SMALL_FILE_BYTES >> 20
            ));
        }
        total = total.saturating_add(f.size);
    }
    if total > MAX_MODEL_BYTES {
        return Err(format!(
            "the model's files hold {total} bytes, more than the {MAX_MODEL_BYTES} (4 GiB) a model may have here"
        ));
    }
    Ok(total)
}

/// Whether a selected file is weights (bounded by the model's total, not the small files').
pub fn is_weights(path: &str) -> bool {
    path.ends_with(".safetensors") || path.ends_with(".bin")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_urls_follow_the_hubs_layout() {
        let hub = Endpoint::new("https://huggingface.co/").unwrap();
        let id = HubId::parse("org/name@refs/pr/1").unwrap();
        assert_eq!(
            hub.revision_url(&id),
            "https://huggingface.co/api/models/org/name/revision/refs%2Fpr%2F1?blobs=true"
        );
        assert_eq!(
            hub.file_url("org/name", "abc", "1_Pooling/config.json"),
            "https://huggingface.co/org/name/resolve/abc/1_Pooling/config.json"
        );
        let local = Endpoint::new("http://127.0.0.1:8123").unwrap();
        assert_eq!(local.url(), "http://127.0.0.1:8123");
        assert!(Endpoint::new("ftp://x").is_err() && Endpoint::new("huggingface.co").is_err());
    }

    #[test]
    fn redirects_stay_with_the_hub_and_its_storage() {
        let hub = Endpoint::new("https://huggingface.co").unwrap();
        let allowed = |u: &str| hub.may_redirect_to(&Url::parse(u).unwrap()).is_ok();
        assert!(allowed("https://cdn-lfs.hf.co/repos/x"));
        assert!(allowed("https://cas-bridge.xethub.hf.co/xet-bridge-us/x?sig=1"));
        assert!(allowed("https://cdn-lfs-us-1.huggingface.co/x"));
        assert!(!allowed("http://cdn-lfs.hf.co/x"), "no https to http");
        assert!(!allowed("https://evil.example/x"));
        assert!(!allowed("https://hf.co.evil.example/x"));
        assert!(!allowed("https://notahf.co/x"));
        let local = Endpoint::new("http://127.0.0.1:8000").unwrap();
        assert!(local.may_redirect_to(&Url::parse("http://127.0.0.1:9000/blob").unwrap()).is_ok());
        let e = local.may_redirect_to(&Url::parse("http://127.0.0.2:9000/blob").unwrap()).unwrap_err();
        assert!(e.contains("`127.0.0.2`"), "{e}");
        assert!(local.is_own(&Url::parse("http://127.0.0.1:8000/a").unwrap()));
        assert!(!allowed("https://cdn-lfs.hf.co:8443/x"), "a CSP source without a port means 443");
        assert!(!local.is_own(&Url::parse("http://127.0.0.1:9000/a").unwrap()));
    }

    #[test]
    fn the_pages_connect_sources_are_the_hosts_redirects_may_go_to() {
        let hub = Endpoint::new(DEFAULT_ENDPOINT).unwrap();
        assert_eq!(hub.connect_sources(), PUBLIC_HUB_SOURCES);
        assert!(!hub.is_loopback());
        for source in PUBLIC_HUB_SOURCES {
            let example = Url::parse(&source.replace("*.", "cdn-lfs-us-1.")).unwrap();
            assert!(hub.may_redirect_to(&example).is_ok(), "{source}");
        }
        let local = Endpoint::new("http://127.0.0.1:8000").unwrap();
        assert!(local.is_loopback() && !local.is_public());
        assert_eq!(local.connect_sources(), ["http://127.0.0.1:*"]);
        let mirror = Endpoint::new("https://mirror.example").unwrap();
        assert_eq!(mirror.connect_sources(), ["https://mirror.example:*", "https://*.mirror.example:*"]);
        assert!(!mirror.is_loopback() && !Endpoint::new("https://127.0.0.1:1").unwrap().is_loopback());
    }

    #[test]
    fn locations_join_as_browsers_join_them() {
        let at = Url::parse("http://127.0.0.1:8000/org/name/resolve/abc/model.safetensors").unwrap();
        assert_eq!(at.join("/api/x").unwrap().to_string(), "http://127.0.0.1:8000/api/x");
        assert_eq!(at.join("other.bin").unwrap().to_string(), "http://127.0.0.1:8000/org/name/resolve/abc/other.bin");
        assert_eq!(at.join("//cdn.example/y").unwrap().to_string(), "http://cdn.example/y");
        assert_eq!(at.join("https://Cdn.HF.co:444/z").unwrap().to_string(), "https://cdn.hf.co:444/z");
        assert!(Url::parse("http://user@host/").is_err());
        assert_eq!(Url::parse("http://[::1]:80/x").unwrap().host, "[::1]");
    }

    #[test]
    fn the_listing_gives_the_commit_and_each_files_size_and_digest() {
        let text = br#"{"id":"org/name","sha":"0123456789abcdef0123456789abcdef01234567","gated":"manual",
            "siblings":[{"rfilename":"config.json","size":12,"blobId":"ce013625030ba8dba906f756967f9e9ca394464a"},
                        {"rfilename":"model.safetensors","size":134,"blobId":"aa",
                         "lfs":{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","size":90,"pointerSize":134}},
                        {"rfilename":"README.md"}]}"#;
        let l = Listing::parse(text).unwrap();
        assert_eq!(l.commit, "0123456789abcdef0123456789abcdef01234567");
        assert!(l.gated);
        assert_eq!(l.names(), ["config.json", "model.safetensors", "README.md"]);
        let w = l.file("model.safetensors").unwrap();
        assert_eq!((w.size, w.digest.hex()), (90, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
        assert!(matches!(l.file("config.json").unwrap().digest, Digest::GitBlob(_)));
        assert!(l.file("README.md").unwrap_err().contains("no size"));
        assert!(l.file("nope").unwrap_err().contains("not in the Hub's listing"));
        assert!(Listing::parse(br#"{"sha":"main","siblings":[]}"#).unwrap_err().contains("not a commit"));
        assert!(!Listing::parse(br#"{"sha":"0123456789abcdef0123456789abcdef01234567","gated":false}"#).unwrap().gated);
    }

    #[test]
    fn only_the_files_the_loader_reads_are_chosen() {
        let repo = [
            "README.md",
            ".gitattributes",
            "config.json",
            "tokenizer.json",
            "spm.model",
            "vocab.txt",
            "model.safetensors",
            "pytorch_model.bin",
            "tf_model.h5",
            "onnx/model.onnx",
            "modules.json",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
        ];
        assert_eq!(
            select_files(&repo).unwrap(),
            [
                "config.json",
                "tokenizer.json",
                "model.safetensors",
                "modules.json",
                "sentence_bert_config.json",
                "1_Pooling/config.json"
            ]
        );
        assert_eq!(
            select_files(&["config.json", "spm.model", "pytorch_model.bin"]).unwrap(),
            ["config.json", "spm.model", "pytorch_model.bin"]
        );
        assert_eq!(
            select_files(&["config.json", "tokenizer.json", SHARD_INDEX, "pytorch_model.bin"]).unwrap(),
            ["config.json", "tokenizer.json", SHARD_INDEX]
        );
        assert!(select_files(&["tokenizer.json", "model.safetensors"]).unwrap_err().contains("no config.json"));
        assert!(select_files(&["config.json", "vocab.txt", "model.safetensors"])
            .unwrap_err()
            .contains("no tokenizer.json"));
        assert!(select_files(&["config.json", "tokenizer.json", "tf_model.h5"])
            .unwrap_err()
            .contains("no model.safetensors"));
    }

    #[test]
    fn shards_come_from_the_index_and_must_exist() {
        let present = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];
        let index = br#"{"metadata":{},"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}"#;
        assert_eq!(shards(index, &present).unwrap(), present);
        assert!(shards(index, &present[..1]).unwrap_err().contains("does not have"));
        assert!(shards(br#"{"weight_map":{"a":"../x.safetensors"}}"#, &present)
            .unwrap_err()
            .contains("not a .safetensors"));
        assert!(shards(br#"{"weight_map":{}}"#, &present).unwrap_err().contains("no shard"));
        assert!(safe_path("1_Pooling/config.json").is_ok());
        for bad in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b", "a b"] {
            assert!(safe_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_are_bounded_before_any_download() {
        let file = |path: &str, size| RemoteFile { path: path.into(), size, digest: Digest::GitBlob(String::new()) };
        let (config, weights) = (file("config.json", 600), file("model.safetensors", 90_000_000));
        assert_eq!(check_sizes(&[&config, &weights], is_weights), Ok(90_000_600));
        let huge_tokenizer = file("tokenizer.json", MAX_SMALL_FILE_BYTES + 1);
        assert!(check_sizes(&[&huge_tokenizer], is_weights).unwrap_err().starts_with("tokenizer.json:"));
        let huge = file("model.safetensors", MAX_MODEL_BYTES);
        assert!(check_sizes(&[&config, &huge], is_weights).unwrap_err().contains("4 GiB"));
    }
}
