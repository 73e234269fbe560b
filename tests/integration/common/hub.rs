//! A stand-in Hugging Face Hub on 127.0.0.1, so no test reaches the real one. It speaks the
//! Hub's URL layout as medrank and Python's `huggingface_hub` use it:
//! - `GET /api/models/{ORG/NAME}/revision/{REV}` (the commit and `siblings` with sizes,
//!   blob ids and LFS sha256), `GET /api/models/{ORG/NAME}/tree/{REV}` (what newer
//!   `huggingface_hub` lists instead);
//! - `HEAD|GET /{ORG/NAME}/resolve/{REV}/{FILE}`: small files from here with `ETag` and
//!   `X-Repo-Commit`; LFS files (weights) redirected, as the Hub redirects them to its CDN,
//!   to a second server on another port (`X-Linked-Etag`, `X-Linked-Size`);
//! - a gated repository answers 401 without `Authorization: Bearer TOKEN`; missing models,
//!   revisions and files 404 with the Hub's `X-Error-Code`.
//!
//! Faults per file (a wrong sha256 in the listing, a redirect to another host, a truncated
//! transfer, more bytes than announced, an error status) make the failures the tests
//! check. Every request is logged (which server, method, path, whether a token came).

use sha1::Digest as _;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// What can go wrong with one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The listing publishes another sha256 than the bytes served have.
    WrongSha256,
    /// The resolve URL redirects to this `host:port` instead of the CDN.
    RedirectTo(String),
    /// The `Content-Length` is right, half the bytes come, then the connection closes.
    Truncate,
    /// More bytes come than the listing announces: with a `Content-Length` saying so, or
    /// chunked (no length before the body).
    Larger { with_length: bool },
    /// The resolve URL answers this status.
    Status(u16),
    /// The listing announces this size (the bytes served stay the file's own).
    Announce(u64),
}

/// Which of the stand-in's servers a request reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Hub,
    Cdn,
    /// A listener on another loopback address (127.0.0.2): the unexpected host.
    Elsewhere,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub server: Server,
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
}

#[derive(Clone)]
struct File {
    path: String,
    bytes: Vec<u8>,
    lfs: bool,
}

impl File {
    fn sha256(&self) -> String {
        hex(&sha2::Sha256::digest(&self.bytes))
    }
    fn blob_id(&self) -> String {
        git_blob_id(&self.bytes)
    }
    /// The git blob of an LFS file is its pointer file.
    fn pointer(&self) -> Vec<u8> {
        format!("version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n", self.sha256(), self.bytes.len())
            .into_bytes()
    }
}

#[derive(Default)]
struct Repo {
    refs: BTreeMap<String, String>,
    commits: BTreeMap<String, Vec<File>>,
    gated_token: Option<String>,
}

#[derive(Default)]
struct State {
    repos: BTreeMap<String, Repo>,
    faults: Vec<(String, String, Fault)>,
    log: Vec<Request>,
}

pub struct StandIn {
    /// `http://127.0.0.1:PORT`: HF_ENDPOINT for the runs.
    pub endpoint: String,
    pub cdn: String,
    /// `127.0.0.2:PORT`: a host no download may be redirected to.
    pub elsewhere: String,
    state: Arc<Mutex<State>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn git_blob_id(bytes: &[u8]) -> String {
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    hex(&h.finalize())
}

/// The files of a model folder (recursively), as (path with `/`, bytes), sorted.
pub fn folder_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &std::path::Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.path().is_dir() {
                walk(&e.path(), &format!("{name}/"), out);
            } else {
                out.push((name, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

impl StandIn {
    pub fn start() -> StandIn {
        let state = Arc::new(Mutex::new(State::default()));
        let hub = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn = TcpListener::bind("127.0.0.1:0").unwrap();
        let elsewhere = TcpListener::bind("127.0.0.2:0").unwrap();
        let stand_in = StandIn {
            endpoint: format!("http://{}", hub.local_addr().unwrap()),
            cdn: format!("http://{}", cdn.local_addr().unwrap()),
            elsewhere: elsewhere.local_addr().unwrap().to_string(),
            state: state.clone(),
        };
        for (listener, server) in [(hub, Server::Hub), (cdn, Server::Cdn), (elsewhere, Server::Elsewhere)] {
            let state = state.clone();
            let cdn = stand_in.cdn.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (state, cdn) = (state.clone(), cdn.clone());
                    std::thread::spawn(move || serve(stream, server, &state, &cdn));
                }
            });
        }
        stand_in
    }

    /// A new commit of `repo` holding `files` (path, bytes), on `branch` (created or moved);
    /// weights and other binary files are LFS files. Returns the commit id.
    pub fn commit(&self, repo: &str, branch: &str, files: &[(String, Vec<u8>)]) -> String {
        let mut state = self.state.lock().unwrap();
        let r = state.repos.entry(repo.to_string()).or_default();
        let mut h = sha1::Sha1::new();
        h.update(format!("{repo} {} {}", r.commits.len(), files.len()).as_bytes());
        for (path, bytes) in files {
            h.update(path.as_bytes());
            h.update(git_blob_id(bytes).as_bytes());
        }
        let commit = hex(&h.finalize());
        let lfs = |p: &str| [".safetensors", ".bin", ".model", ".h5", ".onnx"].iter().any(|e| p.ends_with(e));
        let files = files.iter().map(|(p, b)| File { path: p.clone(), bytes: b.clone(), lfs: lfs(p) }).collect();
        r.commits.insert(commit.clone(), files);
        r.refs.insert(branch.to_string(), commit.clone());
        commit
    }

    /// A tag (or branch) pointing at an existing commit.
    pub fn tag(&self, repo: &str, name: &str, commit: &str) {
        self.state.lock().unwrap().repos.get_mut(repo).unwrap().refs.insert(name.into(), commit.into());
    }

    /// Downloads of `repo` need `Authorization: Bearer {token}` (its listing stays public).
    pub fn gate(&self, repo: &str, token: &str) {
        self.state.lock().unwrap().repos.get_mut(repo).unwrap().gated_token = Some(token.into());
    }

    pub fn fault(&self, repo: &str, file: &str, fault: Fault) {
        self.state.lock().unwrap().faults.push((repo.into(), file.into(), fault));
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().log.clone()
    }

    pub fn clear_log(&self) {
        self.state.lock().unwrap().log.clear();
    }

    /// The sha256 of a file of a commit (what the cache names its blob).
    pub fn sha256(&self, repo: &str, commit: &str, path: &str) -> String {
        let state = self.state.lock().unwrap();
        state.repos[repo].commits[commit].iter().find(|f| f.path == path).unwrap().sha256()
    }
}

/// One connection: requests until the client closes it or a fault closes it.
fn serve(stream: TcpStream, server: Server, state: &Mutex<State>, cdn: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let mut authorization = None;
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "authorization" => authorization = Some(v.trim().to_string()),
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let path = target.split('?').next().unwrap_or("").to_string();
        state.lock().unwrap().log.push(Request {
            server,
            method: method.clone(),
            path: path.clone(),
            authorization: authorization.clone(),
        });
        let reply = {
            let state = state.lock().unwrap();
            match server {
                Server::Hub => hub_reply(&state, &method, &path, authorization.as_deref(), cdn),
                Server::Cdn => cdn_reply(&state, &path),
                Server::Elsewhere => Reply::status(200, &[]),
            }
        };
        if !reply.write(&mut out, method == "HEAD") {
            return;
        }
    }
}

/// An answer, and how it misbehaves.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Send this many bytes of the body, then close (the length says all of it).
    cut_at: Option<usize>,
    /// Chunked, without a length.
    chunked: bool,
}

impl Reply {
    fn status(status: u16, headers: &[(&str, String)]) -> Reply {
        Reply {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            body: Vec::new(),
            cut_at: None,
            chunked: false,
        }
    }
    fn json(value: serde_json::Value) -> Reply {
        let mut r = Reply::status(200, &[("Content-Type", "application/json".into())]);
        r.body = value.to_string().into_bytes();
        r
    }
    fn error(status: u16, code: &str, message: &str) -> Reply {
        Reply::status(status, &[("X-Error-Code", code.into()), ("X-Error-Message", message.into())])
    }

    /// Writes the answer; false when the connection is to be closed.
    fn write(&self, out: &mut TcpStream, head_only: bool) -> bool {
        let reason = match self.status {
            200 => "OK",
            302 => "Found",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            _ => "Error",
        };
        let mut head = format!("HTTP/1.1 {} {reason}\r\n", self.status);
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if self.chunked {
            head.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
        } else {
            if !self.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length")) {
                head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
            }
            head.push_str("\r\n");
        }
        if out.write_all(head.as_bytes()).is_err() {
            return false;
        }
        if head_only {
            return true;
        }
        if self.chunked {
            for chunk in self.body.chunks(4096) {
                let _ = out.write_all(format!("{:x}\r\n", chunk.len()).as_bytes());
                let _ = out.write_all(chunk);
                let _ = out.write_all(b"\r\n");
            }
            let _ = out.write_all(b"0\r\n\r\n");
            let _ = out.flush();
            return false;
        }
        let end = self.cut_at.unwrap_or(self.body.len());
        if out.write_all(&self.body[..end]).is_err() {
            return false;
        }
        let _ = out.flush();
        if self.cut_at.is_some() {
            let _ = out.shutdown(std::net::Shutdown::Both);
            return false;
        }
        true
    }
}

fn fault_of<'a>(state: &'a State, repo: &str, path: &str) -> Option<&'a Fault> {
    state.faults.iter().find(|(r, p, _)| r == repo && p == path).map(|(_, _, f)| f)
}

/// The bytes of a file as served, with its fault applied.
fn file_reply(file: &File, fault: Option<&Fault>, mut reply: Reply) -> Reply {
    reply.body = file.bytes.clone();
    match fault {
        Some(Fault::Truncate) => {
            reply.cut_at = Some(file.bytes.len() / 2);
            reply.headers.push(("Content-Length".into(), file.bytes.len().to_string()));
        }
        Some(Fault::Larger { with_length }) => {
            reply.body.extend_from_slice(&[0u8; 100]);
            if *with_length {
                reply.headers.push(("Content-Length".into(), reply.body.len().to_string()));
            } else {
                reply.chunked = true;
            }
        }
        _ => {}
    }
    reply
}

fn hub_reply(state: &State, method: &str, path: &str, authorization: Option<&str>, cdn: &str) -> Reply {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if method != "GET" && method != "HEAD" {
        return Reply::status(405, &[]);
    }
    // /api/models/ORG/NAME/revision/REV and /api/models/ORG/NAME/tree/REV
    if parts.len() >= 6 && parts[0] == "api" && parts[1] == "models" {
        let repo_id = format!("{}/{}", parts[2], parts[3]);
        let revision = parts[5..].join("/").replace("%2F", "/");
        let Some(repo) = state.repos.get(&repo_id) else {
            return Reply::error(404, "RepoNotFound", "Repository not found");
        };
        let commit = repo.refs.get(&revision).cloned().unwrap_or(revision.clone());
        let Some(files) = repo.commits.get(&commit) else {
            return Reply::error(404, "RevisionNotFound", &format!("Invalid rev id: {revision}"));
        };
        let announced = |f: &File| match fault_of(state, &repo_id, &f.path) {
            Some(Fault::Announce(size)) => *size,
            _ => f.bytes.len() as u64,
        };
        let published = |f: &File| {
            if fault_of(state, &repo_id, &f.path) == Some(&Fault::WrongSha256) {
                hex(&sha2::Sha256::digest(b"other bytes"))
            } else {
                f.sha256()
            }
        };
        return match parts[4] {
            "revision" => {
                let siblings: Vec<serde_json::Value> = files
                    .iter()
                    .map(|f| {
                        if f.lfs {
                            serde_json::json!({"rfilename": f.path, "size": announced(f), "blobId": git_blob_id(&f.pointer()),
                                "lfs": {"sha256": published(f), "size": announced(f), "pointerSize": f.pointer().len()}})
                        } else {
                            serde_json::json!({"rfilename": f.path, "size": announced(f), "blobId": f.blob_id()})
                        }
                    })
                    .collect();
                let gated = if repo.gated_token.is_some() { serde_json::json!("manual") } else { serde_json::json!(false) };
                Reply::json(serde_json::json!({"_id": commit, "id": repo_id, "modelId": repo_id, "sha": commit,
                    "private": false, "disabled": false, "gated": gated, "tags": [], "siblings": siblings}))
            }
            "tree" => Reply::json(serde_json::Value::Array(
                files
                    .iter()
                    .map(|f| {
                        let mut entry = serde_json::json!({"type": "file", "path": f.path, "size": f.bytes.len()});
                        if f.lfs {
                            entry["oid"] = git_blob_id(&f.pointer()).into();
                            entry["lfs"] = serde_json::json!({"oid": published(f), "size": f.bytes.len(), "pointerSize": f.pointer().len()});
                        } else {
                            entry["oid"] = f.blob_id().into();
                        }
                        entry
                    })
                    .collect(),
            )),
            _ => Reply::status(404, &[]),
        };
    }
    // /ORG/NAME/resolve/REV/FILE...
    if parts.len() >= 5 && parts[2] == "resolve" {
        let repo_id = format!("{}/{}", parts[0], parts[1]);
        let file_path = parts[4..].join("/");
        let Some(repo) = state.repos.get(&repo_id) else {
            return Reply::error(404, "RepoNotFound", "Repository not found");
        };
        let commit = repo.refs.get(parts[3]).cloned().unwrap_or(parts[3].to_string());
        let Some(files) = repo.commits.get(&commit) else {
            return Reply::error(404, "RevisionNotFound", "Invalid rev id");
        };
        if let Some(token) = &repo.gated_token {
            match authorization {
                Some(a) if a == format!("Bearer {token}") => {}
                Some(_) => return Reply::error(403, "GatedRepo", "Access to this gated model is not granted"),
                None => {
                    return Reply::error(
                        401,
                        "GatedRepo",
                        "Access to this model is restricted: you must be authenticated",
                    )
                }
            }
        }
        let Some(file) = files.iter().find(|f| f.path == file_path) else {
            return Reply::error(404, "EntryNotFound", "Entry not found");
        };
        let fault = fault_of(state, &repo_id, &file.path);
        if let Some(Fault::Status(s)) = fault {
            return Reply::error(*s, "Fault", "a fault of the stand-in");
        }
        let commit_header = ("X-Repo-Commit", commit.clone());
        if file.lfs {
            let location = match fault {
                Some(Fault::RedirectTo(host)) => format!("http://{host}/{}", file.sha256()),
                _ => format!("{cdn}/{repo_id}/{}", file.sha256()),
            };
            return Reply::status(
                302,
                &[
                    ("Location", location),
                    commit_header,
                    ("ETag", format!("\"{}\"", git_blob_id(&file.pointer()))),
                    ("X-Linked-Etag", format!("\"{}\"", file.sha256())),
                    ("X-Linked-Size", file.bytes.len().to_string()),
                ],
            );
        }
        let reply = Reply::status(200, &[commit_header, ("ETag", format!("\"{}\"", file.blob_id()))]);
        return file_reply(file, fault, reply);
    }
    Reply::status(404, &[])
}

/// The CDN: `/{ORG/NAME}/{sha256}` -> that blob of that repository.
fn cdn_reply(state: &State, path: &str) -> Reply {
    let Some((repo_id, sha)) = path.trim_start_matches('/').rsplit_once('/') else { return Reply::status(404, &[]) };
    let files = state.repos.get(repo_id).into_iter().flat_map(|r| r.commits.values().flatten());
    match files.into_iter().find(|f| f.lfs && f.sha256() == sha) {
        Some(file) => {
            let reply = Reply::status(200, &[("ETag", format!("\"{sha}\""))]);
            file_reply(file, fault_of(state, repo_id, &file.path), reply)
        }
        None => Reply::status(404, &[]),
    }
}
