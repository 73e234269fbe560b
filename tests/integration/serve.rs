//! `medrank serve` against hostile clients, run as a process of its own so that its memory
//! can be read from /proc (issue 23): forty clients that send their request a byte at a
//! time do not keep a normal client out and are cut off at the whole-request deadline
//! (they used to hold every worker and the queue, and every other request got 503); eight
//! slow readers of a 100 MiB file cost the server little memory (each worker used to read
//! the file whole: 769 MB); eight slow readers, all from 127.0.0.1 as every client of this
//! server is, do not keep a normal request waiting (issue 39: they held the workers of
//! that one address, and other requests waited about 30 s).

use crate::common;
use common::cli::tmp;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `medrank serve` (stopped when dropped) and its address.
struct Server {
    child: Child,
    addr: String,
    /// Kept open: the server prints on, and a closed pipe would end it.
    _stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `medrank serve DIR --port 0 extra..`, once it says where it listens.
    fn start(dir: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_medrank"))
            .arg("serve")
            .arg(dir)
            .args(["--port", "0"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("run medrank serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // "medrank: serving DIR at http://127.0.0.1:PORT/"
        let addr = line.trim().rsplit("http://").next().unwrap().trim_end_matches('/').to_owned();
        assert!(addr.starts_with("127.0.0.1:"), "{line}");
        Server { child, addr, _stdout: stdout }
    }

    /// The most resident memory the server process has had, in KiB (`VmHWM`).
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

/// GET `path`: (status line, body).
fn get(addr: &str, path: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete head");
    let status = String::from_utf8_lossy(&all[..split]).lines().next().unwrap().to_owned();
    (status, all[split + 4..].to_vec())
}

fn site(name: &str) -> std::path::PathBuf {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.html"), "<!doctype html><title>medrank</title>").unwrap();
    dir
}

#[test]
fn slow_clients_do_not_keep_others_out_and_are_cut_at_the_deadline() {
    let dir = site("slow-clients");
    // 4 s for a whole request head, counted from the connection (the default is 10).
    let server = Server::start(&dir, &["--request-timeout", "4"]);
    // Forty clients start a request and send it on a byte at a time, never finishing.
    let mut slow: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(&server.addr).unwrap()).collect();
    for s in &mut slow {
        s.write_all(b"G").unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    // A normal client meanwhile: served (with 8 workers and 32 queued places, these forty
    // used to leave it a 503).
    let (status, body) = get(&server.addr, "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, b"<!doctype html><title>medrank</title>");
    // ...while every slow client was still connected and waiting: none has an answer yet.
    for s in &slow {
        s.set_nonblocking(true).unwrap();
        let mut byte = [0u8];
        let pending = matches!((&*s).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        assert!(pending, "a slow client was answered before its deadline");
        s.set_nonblocking(false).unwrap();
    }
    // They go on, a byte a second: the deadline is for the whole head, not per read, so
    // each is answered 408 and disconnected at about 4 s however it trickles.
    let started = Instant::now();
    let answers: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = slow
            .iter_mut()
            .map(|s| {
                scope.spawn(move || {
                    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                    let mut answer = Vec::new();
                    for byte in b"ET / HTTP/1.1\r\nX-Slow: ".iter().chain(std::iter::repeat(&b'a')) {
                        let _ = s.write_all(&[*byte]);
                        let mut buf = [0u8; 512];
                        match s.read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => answer.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                            Err(_) => break,
                        }
                        if answer.ends_with(b"\n408 Request Timeout\n") || started.elapsed() > Duration::from_secs(30) {
                            break;
                        }
                    }
                    String::from_utf8_lossy(&answer).into_owned()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for answer in &answers {
        assert!(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer:?}");
        assert!(
            answer.to_ascii_lowercase().contains("\r\ncross-origin-embedder-policy: require-corp\r\n"),
            "{answer:?}"
        );
    }
    eprintln!("forty slow clients answered 408 within {:.1} s of their last check", started.elapsed().as_secs_f64());
    // And the server serves on.
    assert_eq!(get(&server.addr, "/").0, "HTTP/1.1 200 OK");
}

#[test]
fn slow_readers_of_a_large_file_cost_the_server_little_memory() {
    let dir = site("large-file");
    // 100 MiB in a pattern that shows a misplaced piece: 1 MiB blocks, each starting with
    // its number.
    const MIB: usize = 1024 * 1024;
    const BLOCKS: usize = 100;
    let block = |k: usize| -> Vec<u8> {
        let mut b: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
        b[..8].copy_from_slice(&(k as u64).to_le_bytes());
        b
    };
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("big.bin")).unwrap());
        for k in 0..BLOCKS {
            f.write_all(&block(k)).unwrap();
        }
    }
    let server = Server::start(&dir, &[]);
    let before = server.peak_kib();
    // Eight clients ask for the file at once and read it slowly: 64 KiB each, ten times,
    // with pauses (each answer is sent from a thread of its own).
    let mut readers: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            s
        })
        .collect();
    let mut first = Vec::new();
    for _ in 0..10 {
        for (i, r) in readers.iter_mut().enumerate() {
            let mut buf = vec![0u8; 64 * 1024];
            if let Ok(n) = r.read(&mut buf) {
                if i == 0 {
                    first.extend_from_slice(&buf[..n]);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let during = server.peak_kib();
    // Read whole by one of them: exactly the file. The others hang up first.
    readers.truncate(1);
    readers[0].set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    readers[0].read_to_end(&mut first).unwrap();
    let peak = server.peak_kib();
    eprintln!(
        "server peak resident memory: {} MiB at the start, {} MiB with 8 slow readers, {} MiB after one read it all",
        before / 1024,
        during / 1024,
        peak / 1024
    );
    let split = first.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&first[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", BLOCKS * MIB)), "{head}");
    let body = &first[split + 4..];
    assert_eq!(body.len(), BLOCKS * MIB);
    for k in [0, 1, 37, BLOCKS - 1] {
        assert!(body[k * MIB..(k + 1) * MIB] == block(k)[..], "block {k} differs");
    }
    // Read whole per worker, the file cost 100 MiB for each of the 4 to 8 requests being
    // answered (769 MB measured for 8); streamed, the server holds a few buffers. 200 MiB
    // is a generous bound that the old behaviour exceeds with its second reader.
    assert!(peak < 200 * 1024, "the server's peak resident memory was {} MiB", peak / 1024);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn slow_readers_from_the_one_address_do_not_keep_a_normal_request_waiting() {
    // The server listens on 127.0.0.1 only: every client, the slow ones included, shares
    // one address, so a cap per address protects nobody. Eight slow readers of a 100 MiB
    // file (they read a little, then nothing) used to hold the four workers that address
    // may have, and every other request waited about 30 s; a worker now only decides an
    // answer, and a file is sent by a thread of its own.
    let dir = site("slow-readers-one-address");
    {
        let piece = vec![7u8; 1024 * 1024];
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("big.bin")).unwrap());
        for _ in 0..100 {
            f.write_all(&piece).unwrap();
        }
    }
    let server = Server::start(&dir, &[]);
    let readers: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            assert!(s.local_addr().unwrap().ip().is_loopback() && s.peer_addr().unwrap().ip().is_loopback());
            s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut first = [0u8; 2048];
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let n = s.read(&mut first).unwrap();
            assert!(first[..n].starts_with(b"HTTP/1.1 200 OK\r\n"));
            s
        })
        .collect();
    // Let every answer fill its socket's buffers, so each sender is stalled on its reader.
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (status, body) = get(&server.addr, "/");
    let took = started.elapsed();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, b"<!doctype html><title>medrank</title>");
    // A bound on the server's availability (the issue's): an answer within 2 s, not 30.
    assert!(took < Duration::from_secs(2), "a normal request beside 8 slow readers took {took:?}");
    eprintln!("a normal request beside 8 stalled readers answered in {:.0} ms", took.as_secs_f64() * 1e3);
    drop(readers);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}
