//! `medrank serve DIR --port N`: a tiny static file server for the browser app.
//!
//! Why our own: the page needs `application/wasm` (streaming compilation refuses other
//! types), the same strict Content-Security-Policy as the page's meta tag, and nothing that
//! talks to the outside world. std::net only, GET and HEAD only, bound to 127.0.0.1 so it is
//! never reachable from another machine. Dotfiles (any path part starting with `.`) are
//! never served.
//!
//! Hostile clients (a slow one holds a connection open by sending its request a byte at a
//! time; a slow reader takes a large file's answer slowly), and how each is bounded:
//! - a connection's request head is read on a thread of its own (a small stack), and must
//!   be complete within [`Limits::request_timeout`] of the connection's start, in total,
//!   not per read: past it the client gets 408 and the connection is closed. So slow
//!   clients never hold a worker: forty of them dribbling a byte every few seconds used to
//!   keep all eight workers and the queue busy, and every other request at 503.
//! - at most [`Limits::open`] connections are read or wait at once, at most
//!   [`Limits::open_per_client`] of them from one client address; a connection beyond
//!   either gets 503 at once (from one more thread, which reads its request first so that
//!   closing does not reset the connection before the answer is read).
//! - complete requests wait in one queue for [`Limits::workers`] workers, which take the
//!   first request whose client holds fewer than [`Limits::workers_per_client`] of them:
//!   one client (eight slow readers of a large file) cannot hold every worker.
//! - a file's body is streamed in fixed-size pieces (the kernel's copy where it has one),
//!   never read whole: eight slow readers of a 100 MB file used to cost 769 MB of memory.
//! - a worker only decides the answer; a file's answer is sent from a thread of its own
//!   (a small stack, the connection keeping its place among the open ones), which must
//!   have sent it all within [`Limits::response_timeout`] (a write deadline, each write
//!   given the time left), or the connection is closed. So slow readers never hold a
//!   worker: the server listens on 127.0.0.1 only, every client shares one address, and
//!   four slow readers of a 100 MB file used to hold the four workers that address may
//!   have, and every other request waited about 30 s.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The policy the page also declares in its `<meta http-equiv>`: nothing from any other
/// origin but the Hugging Face Hub's hosts, which the worker may download a model from
/// (`connect-src`: exactly `hub::listing::PUBLIC_HUB_SOURCES`, the hosts a download from the
/// Hub may be redirected to; a site built with `MEDRANK_HUB=off` has `'self'` alone), no
/// inline script, wasm allowed to compile, workers from blob: URLs (the threaded build's
/// pool: wasm-bindgen-rayon starts each thread from a blob of its own same-origin helper
/// script). `frame-ancestors` only works as a header. A worker follows the policy of its
/// own script's answer, not the page's meta tag: this header is what binds its downloads.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; \
connect-src 'self' https://huggingface.co https://*.huggingface.co https://hf.co https://*.hf.co; \
script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data: blob:; \
worker-src 'self' blob:; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// Largest request head we read; anything longer is refused (431).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Stack of a thread that reads one request head (it holds a small buffer and the head).
const READER_STACK: usize = 128 * 1024;

/// The default seconds a client has to send its whole request head (`--request-timeout`).
pub const REQUEST_TIMEOUT_SECONDS: u64 = 10;
/// The bound of `--request-timeout` (seconds).
pub const MAX_REQUEST_TIMEOUT_SECONDS: u64 = 600;
/// The seconds an answer has to be sent whole (the site's largest file, a 91 MB model,
/// takes well under a second on 127.0.0.1).
pub const RESPONSE_TIMEOUT_SECONDS: u64 = 120;
/// The bytes of a file sent per write, each write given the time left until the deadline.
const SEND_PIECE: u64 = 64 * 1024;

/// How many connections the server takes and how long it waits (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Threads that answer complete requests (one user's browser opens about six
    /// connections at a time).
    pub workers: usize,
    /// Workers one client address may hold at once (fewer than all).
    pub workers_per_client: usize,
    /// Connections being read or waiting for a worker, in all; beyond, 503.
    pub open: usize,
    /// Of those, from one client address; beyond, 503.
    pub open_per_client: usize,
    /// The whole request head must arrive within this time of the connection's start.
    pub request_timeout: Duration,
    /// A file's answer must have been sent whole within this time of its first byte.
    pub response_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 8,
            workers_per_client: 4,
            open: 256,
            open_per_client: 128,
            request_timeout: Duration::from_secs(REQUEST_TIMEOUT_SECONDS),
            response_timeout: Duration::from_secs(RESPONSE_TIMEOUT_SECONDS),
        }
    }
}

/// The policy this process's server sends: [`CONTENT_SECURITY_POLICY`], or that with a
/// stand-in Hub's hosts (`--hub-stand-in`), set once by [`serve`] (one server per process).
static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn policy() -> &'static str {
    POLICY.get().map_or(CONTENT_SECURITY_POLICY, String::as_str)
}

/// [`CONTENT_SECURITY_POLICY`] whose `connect-src` also allows a stand-in Hub on this machine
/// (the browser tests': every port of its host, as a download from it may be redirected to).
pub fn policy_with_stand_in(stand_in: &crate::hub::Endpoint) -> String {
    let sources = stand_in.connect_sources().join(" ");
    CONTENT_SECURITY_POLICY.replacen("connect-src 'self' ", &format!("connect-src 'self' {sources} "), 1)
}

/// [`CONTENT_SECURITY_POLICY`] with `connect-src 'self'` alone: what a site built with
/// `MEDRANK_HUB=off` declares (its index.html says so), and what it is then served with.
pub fn policy_without_hub() -> String {
    let directives = CONTENT_SECURITY_POLICY.split("; ");
    let directives = directives.map(|d| if d.starts_with("connect-src ") { "connect-src 'self'" } else { d });
    directives.collect::<Vec<_>>().join("; ")
}

/// Serve `dir` on 127.0.0.1:`port` (0: a free port) until the process ends. Prints the URL
/// to stdout. `stand_in`: a Hub on this machine the page's worker may reach too. A site
/// built without Hub access (its index.html's connect-src is `'self'` alone) gets that.
pub fn serve(dir: &Path, port: u16, limits: Limits, stand_in: Option<&crate::hub::Endpoint>) -> io::Result<()> {
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap_or_default();
    if page.contains("connect-src 'self';") {
        let _ = POLICY.set(policy_without_hub());
    } else if let Some(hub) = stand_in {
        let _ = POLICY.set(policy_with_stand_in(hub));
    }
    let (listener, root) = bind(dir, port)?;
    println!("medrank: serving {} at http://{}/", root.display(), listener.local_addr()?);
    println!("medrank: press Ctrl+C to stop");
    accept_loop(listener, root, limits);
    Ok(())
}

/// Start the server on a background thread and return its address (port 0 picks a free
/// port). Used by tests; the thread lives until the process ends.
pub fn serve_in_background(dir: &Path, port: u16) -> io::Result<SocketAddr> {
    serve_in_background_with(dir, port, Limits::default())
}

/// [`serve_in_background`] with other limits.
pub fn serve_in_background_with(dir: &Path, port: u16, limits: Limits) -> io::Result<SocketAddr> {
    let (listener, root) = bind(dir, port)?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || accept_loop(listener, root, limits));
    Ok(addr)
}

fn bind(dir: &Path, port: u16) -> io::Result<(TcpListener, Arc<PathBuf>)> {
    let root = dir.canonicalize().map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    if !root.is_dir() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: not a folder", dir.display())));
    }
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    Ok((listener, Arc::new(root)))
}

/// A complete request waiting for a worker.
struct Job {
    stream: TcpStream,
    head: Head,
    client: IpAddr,
    /// Holds the connection's place among the open ones until the answer is sent.
    _open: OpenSlot,
}

/// What the accepting thread, the readers and the workers share.
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or a worker becomes free.
    changed: Condvar,
    limits: Limits,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Connections open (read, waiting or served) in all and per client.
    open: usize,
    open_by_client: HashMap<IpAddr, usize>,
    /// Workers busy per client.
    serving: HashMap<IpAddr, usize>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A worker that panicked while holding the lock left the counts consistent (they
        // change in one statement each), so the state stays usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A connection's place among the open ones, given back when it is dropped.
struct OpenSlot {
    shared: Arc<Shared>,
    client: IpAddr,
}

impl Drop for OpenSlot {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.open -= 1;
        if let Some(n) = state.open_by_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                state.open_by_client.remove(&self.client);
            }
        }
    }
}

/// Takes a place for a new connection from `client`, or `None` when the server or that
/// client is at its limit.
fn open_slot(shared: &Arc<Shared>, client: IpAddr) -> Option<OpenSlot> {
    let mut state = shared.lock();
    let of_client = state.open_by_client.get(&client).copied().unwrap_or(0);
    if state.open >= shared.limits.open || of_client >= shared.limits.open_per_client {
        return None;
    }
    state.open += 1;
    *state.open_by_client.entry(client).or_default() += 1;
    Some(OpenSlot { shared: Arc::clone(shared), client })
}

/// The index of the first queued job whose client holds fewer than `per_client` workers.
fn next_job(queue: &VecDeque<Job>, serving: &HashMap<IpAddr, usize>, per_client: usize) -> Option<usize> {
    first_free(queue.iter().map(|j| j.client), serving, per_client)
}

/// [`next_job`] over the clients of the queue, in order.
fn first_free(
    clients: impl Iterator<Item = IpAddr>,
    serving: &HashMap<IpAddr, usize>,
    per_client: usize,
) -> Option<usize> {
    clients.enumerate().find(|(_, c)| serving.get(c).copied().unwrap_or(0) < per_client).map(|(i, _)| i)
}

/// Accepts connections: each gets a place among the open ones and a thread that reads its
/// request head, or 503 from the overflow thread when there is no place; when that thread
/// is busy too, the connection is closed at once.
fn accept_loop(listener: TcpListener, root: Arc<PathBuf>, limits: Limits) {
    let limits = Limits {
        workers: limits.workers.max(1),
        workers_per_client: limits.workers_per_client.max(1),
        open: limits.open.max(1),
        open_per_client: limits.open_per_client.max(1),
        ..limits
    };
    let shared = Arc::new(Shared { state: Mutex::new(State::default()), changed: Condvar::new(), limits });
    for _ in 0..limits.workers {
        let (shared, root) = (Arc::clone(&shared), Arc::clone(&root));
        std::thread::spawn(move || worker(&shared, &root));
    }
    let (overflow, turned_away) = sync_channel::<TcpStream>(32);
    std::thread::spawn(move || {
        for mut stream in turned_away {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = read_head(&stream, Instant::now() + Duration::from_millis(500));
            let _ = respond_error(&mut stream, 503, "Service Unavailable", false);
        }
    });
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let started = Instant::now();
        let Ok(peer) = stream.peer_addr() else { continue };
        let Some(slot) = open_slot(&shared, peer.ip()) else {
            drop(overflow.try_send(stream));
            continue;
        };
        let reader_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .stack_size(READER_STACK)
            .spawn(move || read_request(stream, slot, &reader_shared, started + reader_shared.limits.request_timeout));
        // No thread to be had (the system's limit): the connection closes with its slot.
        drop(spawned);
    }
}

/// Reads one connection's request head (whole by `deadline`) and queues it for a worker;
/// a client too slow gets 408, one whose head is too long 431.
fn read_request(stream: TcpStream, slot: OpenSlot, shared: &Shared, deadline: Instant) {
    let head = match read_head(&stream, deadline) {
        Ok(head) => head,
        Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) => {
            let mut out = stream;
            let _ = out.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = respond_error(&mut out, 408, "Request Timeout", false);
            // Closing with the client's bytes unread would reset the connection, and the
            // reset can overtake the answer: stop sending, then take what still comes for a
            // moment.
            let _ = out.shutdown(std::net::Shutdown::Write);
            let _ = out.set_read_timeout(Some(Duration::from_millis(500)));
            let _ = io::copy(&mut (&out).take(MAX_HEAD_BYTES as u64), &mut io::sink());
            return;
        }
        Err(_) => return,
    };
    let mut state = shared.lock();
    state.queue.push_back(Job { stream, head, client: slot.client, _open: slot });
    drop(state);
    shared.changed.notify_all();
}

fn worker(shared: &Shared, root: &Path) {
    loop {
        let job = {
            let mut state = shared.lock();
            loop {
                let per_client = shared.limits.workers_per_client;
                if let Some(i) = next_job(&state.queue, &state.serving, per_client) {
                    let job = state.queue.remove(i).expect("the index is in the queue");
                    *state.serving.entry(job.client).or_default() += 1;
                    break job;
                }
                state = shared.changed.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        let client = job.client;
        // A broken connection concerns only that client; the server keeps going. A file's
        // answer goes to a thread of its own with the connection's place.
        let _ = handle(job.stream, job.head, root, job._open, shared.limits.response_timeout);
        let mut state = shared.lock();
        if let Some(n) = state.serving.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                state.serving.remove(&client);
            }
        }
        drop(state);
        // A job of this client may now run.
        shared.changed.notify_all();
    }
}

/// One request per connection (`Connection: close`): simple, and plenty for one user.
/// Errors are answered here (a few hundred bytes, which a socket's buffer takes whatever
/// the client does); a file's answer is sent by [`send_file`] on a thread of its own, which
/// holds `open` (the connection's place) until it is done.
fn handle(stream: TcpStream, head: Head, root: &Path, open: OpenSlot, response_timeout: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut out = stream;
    let head = match head {
        Head::Complete(h) => h,
        Head::TooLong => return respond_error(&mut out, 431, "Request Header Fields Too Large", false),
        Head::NotText => return respond_error(&mut out, 400, "Bad Request", false),
    };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    // An empty request line, or one without a target, is no request (it was answered 405).
    if target.is_empty() {
        return respond_error(&mut out, 400, "Bad Request", false);
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond_error(&mut out, 405, "Method Not Allowed", false);
    }
    let file = match resolve(root, target) {
        Resolved::File(file) => file,
        Resolved::BadPath => return respond_error(&mut out, 400, "Bad Request", head_only),
        Resolved::NotFound => return respond_error(&mut out, 404, "Not Found", head_only),
    };
    // Streamed, never read whole: the length from the open file, then its bytes in pieces
    // (`io::copy` uses the kernel's copy between a file and a socket where there is one).
    let opened = std::fs::File::open(&file).and_then(|f| f.metadata().map(|m| (f, m.len())));
    let Ok((body, length)) = opened else { return respond_error(&mut out, 404, "Not Found", head_only) };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let headers = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {length}\r\nCache-Control: {}\r\n{}\r\n",
        mime_type(name),
        cache_control(&file, root),
        common_headers()
    );
    let deadline = Instant::now() + response_timeout;
    let sending = std::thread::Builder::new().stack_size(READER_STACK).spawn(move || {
        let _ = send_file(out, headers, body, length, head_only, deadline);
        drop(open);
    });
    // No thread to be had (the system's limit): the connection closes with its place.
    sending.map(drop)
}

/// Writes `bytes` whole by `deadline`, each write given the time left (a `TimedOut` error
/// past it).
fn write_until(out: &mut TcpStream, bytes: &[u8], deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "the answer took too long to send"));
    }
    out.set_write_timeout(Some(left))?;
    out.write_all(bytes)
}

/// Sends a file's answer (`headers`, then `length` bytes of `body` unless `head_only`)
/// whole by `deadline`: in pieces of [`SEND_PIECE`] bytes, each given the time left (the
/// kernel's copy where it has one); past the deadline the connection is dropped.
fn send_file(
    mut out: TcpStream,
    headers: String,
    body: std::fs::File,
    length: u64,
    head_only: bool,
    deadline: Instant,
) -> io::Result<()> {
    write_until(&mut out, headers.as_bytes(), deadline)?;
    if head_only {
        return out.flush();
    }
    // At most the announced length, should the file grow meanwhile.
    let mut body = body.take(length);
    let mut sent = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the answer took too long to send"));
        }
        out.set_write_timeout(Some(left))?;
        let n = io::copy(&mut (&mut body).take(SEND_PIECE), &mut out)?;
        if n == 0 {
            break;
        }
        sent += n;
    }
    if sent < length {
        // The file shrank: the client must not take a short body for the whole file.
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while it was sent"));
    }
    out.flush()
}

enum Head {
    Complete(String),
    /// Longer than [`MAX_HEAD_BYTES`] (431).
    TooLong,
    /// Not UTF-8 text (400).
    NotText,
}

/// A connection's reads, each given only the time left until one deadline: a client that
/// sends a byte now and then gets no more time in all than one that sends nothing.
struct UntilDeadline<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for UntilDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the request head took too long"));
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

/// Read up to the blank line ending the request head, all of it by `deadline` (an error
/// of kind `TimedOut` or `WouldBlock` past it).
fn read_head(stream: &TcpStream, deadline: Instant) -> io::Result<Head> {
    let mut reader = BufReader::new(UntilDeadline { stream, deadline });
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = (&mut reader).take(MAX_HEAD_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 || line == b"\r\n" || line == b"\n" {
            return Ok(match String::from_utf8(head) {
                Ok(h) => Head::Complete(h),
                Err(_) => Head::NotText,
            });
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD_BYTES {
            return Ok(Head::TooLong);
        }
    }
}

enum Resolved {
    File(PathBuf),
    /// Not a path at all: a malformed `%` escape, not UTF-8 once decoded, a NUL or `\` (400).
    BadPath,
    /// No such file, outside the folder, or a dotfile (404).
    NotFound,
}

/// Map a request target to a file inside `root`. The query string is ignored; `..`,
/// absolute parts, anything escaping `root` through a link, and any part starting with `.`
/// (dotfiles such as `.git` or `.env`, also when a link leads there) are not found.
fn resolve(root: &Path, target: &str) -> Resolved {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let Some(decoded) = percent_decode(path) else { return Resolved::BadPath };
    if !decoded.starts_with('/') || decoded.contains('\\') || decoded.contains('\0') {
        return Resolved::BadPath;
    }
    let mut file = root.to_path_buf();
    for component in Path::new(decoded.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => file.push(part),
            Component::CurDir => {}
            _ => return Resolved::NotFound,
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    let Ok(real) = file.canonicalize() else { return Resolved::NotFound };
    let dotted = |p: &Path| p.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
    // Both the path asked for and where its links lead must be inside and free of dotfiles.
    let requested = file.strip_prefix(root).unwrap_or(Path::new("."));
    match real.strip_prefix(root) {
        Ok(rel) if real.is_file() && !dotted(rel) && !dotted(requested) => Resolved::File(real),
        _ => Resolved::NotFound,
    }
}

/// `%XX` decoding; `None` for malformed escapes or non-UTF-8 results.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The Content-Type for a file name. Browsers compile wasm streaming only when the type is
/// exactly `application/wasm`, and run module workers only with a JavaScript type.
pub fn mime_type(file_name: &str) -> &'static str {
    let ext = file_name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json; charset=utf-8",
        "webmanifest" => "application/manifest+json; charset=utf-8",
        "jsonl" | "ndjson" => "application/x-ndjson; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "tsv" => "text/tab-separated-values; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "xml" => "application/xml; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        _ => "application/octet-stream",
    }
}

/// Model files are large and never change under the same path: cache them for a day.
/// Everything else revalidates, so a rebuilt site is picked up at once (the service worker
/// provides offline use).
fn cache_control(file: &Path, root: &Path) -> &'static str {
    let in_models = file.strip_prefix(root).map(|p| p.starts_with("models")).unwrap_or(false);
    if in_models {
        "public, max-age=86400"
    } else {
        "no-cache"
    }
}

/// Besides the policy: no MIME sniffing, no referrer, and cross-origin isolation (COOP+COEP),
/// which gives the page SharedArrayBuffer — the flag a running job polls to cancel.
fn common_headers() -> String {
    format!(
        "Content-Security-Policy: {}\r\n\
         X-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\n\
         Cross-Origin-Opener-Policy: same-origin\r\n\
         Cross-Origin-Embedder-Policy: require-corp\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\n\
         Connection: close\r\n",
        policy()
    )
}

fn respond_error(out: &mut TcpStream, code: u16, reason: &str, head_only: bool) -> io::Result<()> {
    let body = format!("{code} {reason}\n");
    // A 405 must say which methods are allowed (RFC 9110, 15.5.6).
    let allow = if code == 405 { "Allow: GET, HEAD\r\n" } else { "" };
    let headers = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nCache-Control: no-store\r\n{allow}{}\r\n",
        body.len(),
        common_headers()
    );
    out.write_all(headers.as_bytes())?;
    if !head_only {
        out.write_all(body.as_bytes())?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Send a raw request and return (status line, headers lowercased, body).
    fn request(addr: SocketAddr, raw: &str) -> (String, String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(raw.as_bytes()).unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8(all[..split].to_vec()).unwrap();
        let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
        (status.to_string(), headers.to_ascii_lowercase(), all[split + 4..].to_vec())
    }

    fn get(addr: SocketAddr, path: &str) -> (String, String, Vec<u8>) {
        request(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
    }

    /// GET that must answer 200: its headers (lower case) and body.
    fn get_ok(addr: SocketAddr, path: &str) -> (String, Vec<u8>) {
        let (status, headers, body) = get(addr, path);
        assert_eq!(status, "HTTP/1.1 200 OK", "GET {path}");
        (headers, body)
    }

    fn site() -> (tempdir::Dir, SocketAddr) {
        let dir = tempdir::Dir::new();
        std::fs::write(dir.0.join("index.html"), "<!doctype html><title>t</title>").unwrap();
        std::fs::write(dir.0.join("app.wasm"), [0u8, 0x61, 0x73, 0x6d]).unwrap();
        std::fs::write(dir.0.join("worker.js"), "postMessage(1)").unwrap();
        std::fs::create_dir_all(dir.0.join("models/m")).unwrap();
        std::fs::write(dir.0.join("models/m/config.json"), "{}").unwrap();
        std::fs::write(dir.0.join("a b.csv"), "x,y\n").unwrap();
        let addr = serve_in_background(&dir.0, 0).unwrap();
        (dir, addr)
    }

    /// A throwaway folder under the system temp dir, removed on drop.
    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "medrank-serve-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn serves_wasm_with_the_wasm_type_and_the_strict_policy() {
        let (_dir, addr) = site();
        let (headers, body) = get_ok(addr, "/app.wasm");
        assert!(headers.contains("content-type: application/wasm\r\n"), "{headers}");
        assert!(headers.contains("content-length: 4"));
        assert!(headers.contains(&format!("content-security-policy: {CONTENT_SECURITY_POLICY}\r\n")));
        assert!(headers.contains("cache-control: no-cache"));
        assert!(headers.contains("cross-origin-embedder-policy: require-corp"));
        assert_eq!(body, [0u8, 0x61, 0x73, 0x6d]);
    }

    #[test]
    fn the_policy_is_the_pages_and_connects_to_the_hub_alone() {
        let page = include_str!("../../www/index.html");
        let meta = page.split("http-equiv=\"Content-Security-Policy\" content=\"").nth(1).unwrap();
        let meta = &meta[..meta.find('"').unwrap()];
        assert_eq!(format!("{meta}; frame-ancestors 'none'"), CONTENT_SECURITY_POLICY);
        let connect = CONTENT_SECURITY_POLICY.split("; ").find(|d| d.starts_with("connect-src ")).unwrap();
        let hub = crate::hub::Endpoint::new(crate::hub::listing::DEFAULT_ENDPOINT).unwrap();
        assert_eq!(connect, format!("connect-src 'self' {}", hub.connect_sources().join(" ")));
        let stand_in = crate::hub::Endpoint::new("http://127.0.0.1:8123").unwrap();
        let tests = policy_with_stand_in(&stand_in);
        assert!(tests.contains("connect-src 'self' http://127.0.0.1:* https://huggingface.co "), "{tests}");
        let off = policy_without_hub();
        assert!(off.starts_with("default-src 'self'; connect-src 'self'; script-src 'self'"), "{off}");
        assert!(!off.contains("hf.co") && off.ends_with("frame-ancestors 'none'"), "{off}");
    }

    #[test]
    fn folder_gives_index_html_and_query_strings_are_ignored() {
        let (_dir, addr) = site();
        let (headers, body) = get_ok(addr, "/?x=1");
        assert!(headers.contains("content-type: text/html; charset=utf-8"));
        assert_eq!(body, b"<!doctype html><title>t</title>");
        let (_, headers, _) = get(addr, "/worker.js");
        assert!(headers.contains("content-type: text/javascript; charset=utf-8"));
    }

    #[test]
    fn models_are_cached_and_percent_escapes_decoded() {
        let (_dir, addr) = site();
        let (_, headers, _) = get(addr, "/models/m/config.json");
        assert!(headers.contains("cache-control: public, max-age=86400"), "{headers}");
        let (headers, body) = get_ok(addr, "/a%20b.csv");
        assert!(headers.contains("content-type: text/csv; charset=utf-8"));
        assert_eq!(body, b"x,y\n");
    }

    #[test]
    fn refuses_escapes_from_the_folder_missing_files_and_other_methods() {
        let (_dir, addr) = site();
        for path in ["/../etc/passwd", "/%2e%2e/etc/passwd", "/models/../../x", "/nope.js"] {
            let (status, _, _) = get(addr, path);
            assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
        }
        let (status, headers, _) = request(addr, "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
        assert!(headers.contains("content-security-policy"));
        assert!(headers.contains("\r\nallow: get, head\r\n"), "{headers}");
    }

    /// Send raw bytes (not necessarily UTF-8) and return the status line.
    fn status_of_bytes(addr: SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(raw).unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).unwrap();
        String::from_utf8_lossy(&all).lines().next().unwrap_or("").to_string()
    }

    #[test]
    fn bad_paths_get_400_instead_of_a_closed_connection() {
        let (_dir, addr) = site();
        // Raw bytes that are not UTF-8 in the path: the connection used to close unanswered.
        assert_eq!(status_of_bytes(addr, b"GET /\xff\xfe.js HTTP/1.1\r\n\r\n"), "HTTP/1.1 400 Bad Request");
        // Escapes that are malformed, decode to non-UTF-8, or smuggle a NUL or a backslash.
        for path in ["/%zz", "/%ff.js", "/a%00.js", "/a%5c..%5cx", "nothing-absolute"] {
            let (status, _, _) = get(addr, path);
            assert_eq!(status, "HTTP/1.1 400 Bad Request", "{path}");
        }
        // An empty request line, or a method alone, is no request: 400 (it was 405, as if
        // a method had been refused).
        assert_eq!(status_of_bytes(addr, b"\r\n\r\n"), "HTTP/1.1 400 Bad Request");
        assert_eq!(status_of_bytes(addr, b"GET\r\n\r\n"), "HTTP/1.1 400 Bad Request");
        assert_eq!(status_of_bytes(addr, b"POST / HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
    }

    #[test]
    fn dotfiles_are_never_served() {
        let (dir, addr) = site();
        std::fs::write(dir.0.join(".env"), "SECRET=1").unwrap();
        std::fs::create_dir_all(dir.0.join(".git")).unwrap();
        std::fs::write(dir.0.join(".git/config"), "[core]").unwrap();
        std::fs::create_dir_all(dir.0.join("models/.cache")).unwrap();
        std::fs::write(dir.0.join("models/.cache/x.json"), "{}").unwrap();
        for path in ["/.env", "/.git/config", "/%2egit/config", "/models/.cache/x.json", "/./.env"] {
            let (status, _, body) = get(addr, path);
            assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
            assert_eq!(body, b"404 Not Found\n", "{path}");
        }
        // A link with an ordinary name that leads to a dotfile is refused as well.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.0.join(".env"), dir.0.join("env.txt")).unwrap();
            assert_eq!(get(addr, "/env.txt").0, "HTTP/1.1 404 Not Found");
        }
        // Files whose names merely contain a dot are served.
        assert_eq!(get(addr, "/worker.js").0, "HTTP/1.1 200 OK");
    }

    /// Limits for the tests: `open` connections at most, one worker per client.
    fn small(open: usize, request_timeout: Duration) -> Limits {
        Limits {
            workers: 2,
            workers_per_client: 1,
            open,
            open_per_client: open,
            request_timeout,
            response_timeout: Duration::from_secs(RESPONSE_TIMEOUT_SECONDS),
        }
    }

    #[test]
    fn connections_beyond_the_open_limit_get_503_and_idle_ones_do_not_hold_workers() {
        let dir = tempdir::Dir::new();
        std::fs::write(dir.0.join("index.html"), "hi").unwrap();
        // Two idle connections (they send nothing) take both places: the third is answered
        // 503 by the overflow thread. Unbounded, each would have had a thread of its own.
        let addr = serve_in_background_with(&dir.0, 0, small(2, Duration::from_secs(30))).unwrap();
        let idle = TcpStream::connect(addr).unwrap();
        let queued = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let (status, headers, body) = get(addr, "/");
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
        assert!(headers.contains("cross-origin-embedder-policy: require-corp"));
        assert_eq!(body, b"503 Service Unavailable\n");
        // Once the idle clients go, it serves again.
        drop(idle);
        drop(queued);
        std::thread::sleep(Duration::from_millis(300));
        let (_, body) = get_ok(addr, "/");
        assert_eq!(body, b"hi");
    }

    #[test]
    fn a_request_head_must_arrive_whole_before_the_deadline_however_it_trickles() {
        let dir = tempdir::Dir::new();
        std::fs::write(dir.0.join("index.html"), "hi").unwrap();
        // 1.5 s for the whole head; a byte every 0.4 s keeps every single read within any
        // per-read timeout, and used to hold a worker for as long as it went on.
        let addr = serve_in_background_with(&dir.0, 0, small(8, Duration::from_millis(1500))).unwrap();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_millis(400))).unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        for byte in b"GET / HTTP/1.1\r\nHost: x\r\n".iter().cycle() {
            if slow.write_all(&[*byte]).is_err() {
                break;
            }
            let mut buf = [0u8; 256];
            match slow.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
            if answer.ends_with(b"408 Request Timeout\n") || started.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer:?}");
        // Meanwhile another client is served at once.
        assert_eq!(get_ok(addr, "/").1, b"hi");
    }

    #[test]
    fn a_worker_goes_to_the_first_request_of_a_client_below_its_share() {
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let serving = HashMap::from([(a, 1)]);
        // Client a holds its one worker: b's request, queued after two of a's, goes first.
        assert_eq!(first_free([a, a, b].into_iter(), &serving, 1), Some(2));
        assert_eq!(first_free([a, a].into_iter(), &serving, 1), None);
        assert_eq!(first_free([a, b].into_iter(), &serving, 2), Some(0));
        assert_eq!(first_free([b].into_iter(), &HashMap::new(), 1), Some(0));
    }

    #[test]
    fn large_files_are_streamed_whole_and_exact() {
        let dir = tempdir::Dir::new();
        // 3 MiB and a bit, in a pattern that shows a misplaced piece.
        let data: Vec<u8> = (0..3 * 1024 * 1024 + 17u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.0.join("big.bin"), &data).unwrap();
        let addr = serve_in_background(&dir.0, 0).unwrap();
        let (headers, body) = get_ok(addr, "/big.bin");
        assert!(headers.contains(&format!("content-length: {}", data.len())), "{headers}");
        assert!(body == data, "the body differs from the file");
    }

    #[test]
    fn head_sends_headers_without_body() {
        let (_dir, addr) = site();
        let (status, headers, body) = request(addr, "HEAD /worker.js HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(headers.contains("content-length: 14"));
        assert!(body.is_empty());
    }

    #[test]
    fn mime_types_of_every_served_kind() {
        assert_eq!(mime_type("medrank_bg.wasm"), "application/wasm");
        assert_eq!(mime_type("APP.JS"), "text/javascript; charset=utf-8");
        assert_eq!(mime_type("tokenizer.json"), "application/json; charset=utf-8");
        assert_eq!(mime_type("model.safetensors"), "application/octet-stream");
        assert_eq!(mime_type("bundle.jsonl"), "application/x-ndjson; charset=utf-8");
        assert_eq!(mime_type("docs.tsv"), "text/tab-separated-values; charset=utf-8");
        assert_eq!(mime_type("topics.xml"), "application/xml; charset=utf-8");
        assert_eq!(mime_type("README"), "application/octet-stream");
    }
}
