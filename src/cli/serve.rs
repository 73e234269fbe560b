//! `medrank serve DIR --port N`: a tiny static file server for the browser app.
//!
//! Why our own: the page needs `application/wasm` (streaming compilation refuses other
//! types), the same strict Content-Security-Policy as the page's meta tag, and nothing that
//! talks to the outside world. std::net only, GET and HEAD only, bound to 127.0.0.1 so it is
//! never reachable from another machine. A fixed pool of worker threads takes connections
//! from a bounded queue; when the queue is full the connection gets 503 at once, so a flood
//! of (idle) connections never makes more threads (one more thread answers those 503s). Dotfiles (any path part starting with
//! `.`) are never served.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The policy the page also declares in its `<meta http-equiv>`: nothing from any other
/// origin, no inline script, wasm allowed to compile, workers from blob: URLs (the threaded
/// build's pool: wasm-bindgen-rayon starts each thread from a blob of its own same-origin
/// helper script). `frame-ancestors` only works as a header.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; connect-src 'self'; \
script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data: blob:; \
worker-src 'self' blob:; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// Largest request head we read; anything longer is refused (431).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Worker threads that answer requests, and connections that may wait for one; a
/// connection beyond both gets 503. One user's browser opens about six at a time.
pub const WORKERS: usize = 8;
pub const QUEUE: usize = 32;

/// How long a connection may take to send its request head (a worker waits that long).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `dir` on 127.0.0.1:`port` until the process ends. Prints the URL to stdout.
pub fn serve(dir: &Path, port: u16) -> io::Result<()> {
    let (listener, root) = bind(dir, port)?;
    println!("medrank: serving {} at http://{}/", root.display(), listener.local_addr()?);
    println!("medrank: press Ctrl+C to stop");
    accept_loop(listener, root, WORKERS, QUEUE);
    Ok(())
}

/// Start the server on a background thread and return its address (port 0 picks a free
/// port). Used by tests; the thread lives until the process ends.
pub fn serve_in_background(dir: &Path, port: u16) -> io::Result<SocketAddr> {
    serve_in_background_with(dir, port, WORKERS, QUEUE)
}

/// [`serve_in_background`] with a given number of workers and queued connections.
pub fn serve_in_background_with(dir: &Path, port: u16, workers: usize, queue: usize) -> io::Result<SocketAddr> {
    let (listener, root) = bind(dir, port)?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || accept_loop(listener, root, workers, queue));
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

/// Accepts connections and hands them to `workers` threads through a queue of `queue`
/// places. A connection that finds the queue full goes to one more thread that answers 503
/// (after reading the request, so that closing does not reset the connection before the
/// client reads the answer); when that one is busy too, the connection is closed at once.
fn accept_loop(listener: TcpListener, root: Arc<PathBuf>, workers: usize, queue: usize) {
    let (sender, receiver) = sync_channel::<TcpStream>(queue);
    let receiver = Arc::new(Mutex::new(receiver));
    for _ in 0..workers.max(1) {
        let (receiver, root) = (Arc::clone(&receiver), Arc::clone(&root));
        std::thread::spawn(move || worker(&receiver, &root));
    }
    let (overflow, turned_away) = sync_channel::<TcpStream>(queue);
    std::thread::spawn(move || {
        for mut stream in turned_away {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = read_head(&mut BufReader::new(&stream));
            let _ = respond_error(&mut stream, 503, "Service Unavailable", false);
        }
    });
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        match sender.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(stream)) => drop(overflow.try_send(stream)),
            Err(TrySendError::Disconnected(_)) => return,
        }
    }
}

fn worker(receiver: &Mutex<Receiver<TcpStream>>, root: &Path) {
    loop {
        // The lock is held only while waiting for the next connection, not while serving it.
        let next = match receiver.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        let Ok(stream) = next else { return };
        // A broken connection concerns only that client; the server keeps going.
        let _ = handle(stream, root);
    }
}

/// One request per connection (`Connection: close`): simple, and plenty for one user.
fn handle(stream: TcpStream, root: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    let head = match read_head(&mut reader)? {
        Head::Complete(h) => h,
        Head::TooLong => return respond_error(&mut out, 431, "Request Header Fields Too Large", false),
        Head::NotText => return respond_error(&mut out, 400, "Bad Request", false),
    };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return respond_error(&mut out, 405, "Method Not Allowed", false);
    }
    let file = match resolve(root, target) {
        Resolved::File(file) => file,
        Resolved::BadPath => return respond_error(&mut out, 400, "Bad Request", head_only),
        Resolved::NotFound => return respond_error(&mut out, 404, "Not Found", head_only),
    };
    let body = match std::fs::read(&file) {
        Ok(b) => b,
        Err(_) => return respond_error(&mut out, 404, "Not Found", head_only),
    };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let headers = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: {}\r\n{}\r\n",
        mime_type(name),
        body.len(),
        cache_control(&file, root),
        common_headers()
    );
    out.write_all(headers.as_bytes())?;
    if !head_only {
        out.write_all(&body)?;
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

/// Read up to the blank line ending the request head.
fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let mut head = Vec::new();
    loop {
        let mut line = Vec::new();
        let n = reader.by_ref().take(MAX_HEAD_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
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
        "Content-Security-Policy: {CONTENT_SECURITY_POLICY}\r\n\
         X-Content-Type-Options: nosniff\r\n\
         Referrer-Policy: no-referrer\r\n\
         Cross-Origin-Opener-Policy: same-origin\r\n\
         Cross-Origin-Embedder-Policy: require-corp\r\n\
         Cross-Origin-Resource-Policy: same-origin\r\n\
         Connection: close\r\n"
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
        assert!(headers.contains("content-security-policy: default-src 'self'; connect-src 'self';"));
        assert!(headers.contains("cache-control: no-cache"));
        assert!(headers.contains("cross-origin-embedder-policy: require-corp"));
        assert_eq!(body, [0u8, 0x61, 0x73, 0x6d]);
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

    #[test]
    fn connections_beyond_the_workers_and_the_queue_get_503_without_new_threads() {
        let dir = tempdir::Dir::new();
        std::fs::write(dir.0.join("index.html"), "hi").unwrap();
        // One worker, one queued connection: the worker waits on the first idle connection
        // (it sends nothing), the second waits in the queue, so the third is answered 503
        // by the overflow thread. Unbounded, each would have had a thread of its own.
        let addr = serve_in_background_with(&dir.0, 0, 1, 1).unwrap();
        let idle = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(300)); // the worker takes it off the queue
        let queued = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let (status, headers, body) = get(addr, "/");
        assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
        assert!(headers.contains("cross-origin-embedder-policy: require-corp"));
        assert_eq!(body, b"503 Service Unavailable\n");
        // Once the idle clients go, the worker serves again.
        drop(idle);
        drop(queued);
        std::thread::sleep(Duration::from_millis(300));
        let (_, body) = get_ok(addr, "/");
        assert_eq!(body, b"hi");
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
