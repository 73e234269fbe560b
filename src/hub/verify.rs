//! A file from the Hub checked as its bytes arrive, against what the Hub's listing
//! announced: never more bytes than its size (the transfer stops at the first byte over),
//! exactly that size at the end, and the digest the Hub publishes for it: the LFS object's
//! sha256 (weights and other large files), or the git blob id (small files kept in git:
//! the sha1 of `blob {size}\0` and the bytes). Pure Rust, for the CLI and the page alike.

use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// What the Hub publishes to check a file by, in lowercase hex. It is also the file's name
/// under the cache's `blobs/` (its etag), as Python's `huggingface_hub` names blobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Digest {
    /// An LFS file: the sha256 of its bytes (the LFS oid).
    Sha256(String),
    /// A file stored in git: its blob id.
    GitBlob(String),
}

impl Digest {
    /// The hex digest: the blob's name in the cache.
    pub fn hex(&self) -> &str {
        match self {
            Digest::Sha256(h) | Digest::GitBlob(h) => h,
        }
    }

    /// Whether `hex` has this kind's form (64 or 40 lowercase hex digits): it becomes a
    /// file name, so nothing else is accepted.
    pub fn well_formed(&self) -> bool {
        let (h, len) = match self {
            Digest::Sha256(h) => (h, 64),
            Digest::GitBlob(h) => (h, 40),
        };
        h.len() == len && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }

    fn describe(&self) -> &'static str {
        match self {
            Digest::Sha256(_) => "sha256 (the Hub's LFS oid)",
            Digest::GitBlob(_) => "git blob id",
        }
    }
}

/// Why a file's bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// More bytes came than the listing announced.
    LargerThanAnnounced { announced: u64 },
    /// The transfer ended before the announced size.
    Truncated { received: u64, announced: u64 },
    /// The bytes do not hash to the published digest.
    WrongDigest { kind: &'static str, expected: String, found: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::LargerThanAnnounced { announced } => write!(
                f,
                "the server sent more than the {announced} bytes the Hub's listing announces for this file; the transfer was stopped and nothing was kept"
            ),
            Failure::Truncated { received, announced } => write!(
                f,
                "the transfer ended after {received} of the {announced} bytes the Hub's listing announces (truncated); nothing was kept"
            ),
            Failure::WrongDigest { kind, expected, found } => write!(
                f,
                "the bytes received do not match the Hub's published {kind}: expected {expected}, received {found}; nothing was kept"
            ),
        }
    }
}

enum Hasher {
    Sha256(Sha256),
    GitBlob(Sha1),
}

/// One file's bytes checked as they arrive: [`Check::update`] with each chunk (refused at
/// once past the announced size), then [`Check::finish`].
pub struct Check {
    announced: u64,
    received: u64,
    expected: Digest,
    hasher: Hasher,
}

impl Check {
    pub fn new(announced: u64, expected: Digest) -> Check {
        let hasher = match &expected {
            Digest::Sha256(_) => Hasher::Sha256(Sha256::new()),
            Digest::GitBlob(_) => {
                let mut h = Sha1::new();
                h.update(format!("blob {announced}\0").as_bytes());
                Hasher::GitBlob(h)
            }
        };
        Check { announced, received: 0, expected, hasher }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The next chunk; an error as soon as the file is longer than announced.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), Failure> {
        self.received += chunk.len() as u64;
        if self.received > self.announced {
            return Err(Failure::LargerThanAnnounced { announced: self.announced });
        }
        match &mut self.hasher {
            Hasher::Sha256(h) => h.update(chunk),
            Hasher::GitBlob(h) => h.update(chunk),
        }
        Ok(())
    }

    /// The transfer is over: the size and the digest must be the announced ones.
    pub fn finish(self) -> Result<(), Failure> {
        if self.received < self.announced {
            return Err(Failure::Truncated { received: self.received, announced: self.announced });
        }
        let found = match self.hasher {
            Hasher::Sha256(h) => hex(&h.finalize()),
            Hasher::GitBlob(h) => hex(&h.finalize()),
        };
        if found != self.expected.hex() {
            return Err(Failure::WrongDigest {
                kind: self.expected.describe(),
                expected: self.expected.hex().to_string(),
                found,
            });
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The git blob id of `bytes` (what the Hub lists as a small file's `blobId`).
pub fn git_blob_id(bytes: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_blob_id_is_gits_own() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(git_blob_id(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
        // The empty blob, well known: `git hash-object /dev/null`.
        assert_eq!(git_blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    }

    #[test]
    fn the_announced_size_and_digest_hold_or_the_bytes_are_refused() {
        // FIPS 180-2, Appendix B.1: SHA-256("abc").
        let abc = Digest::Sha256("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad".into());
        assert!(abc.well_formed() && !Digest::Sha256("ABC".into()).well_formed());
        let mut ok = Check::new(3, abc.clone());
        ok.update(b"a").unwrap();
        ok.update(b"bc").unwrap();
        assert_eq!(ok.finish(), Ok(()));

        let mut long = Check::new(3, abc.clone());
        assert_eq!(long.update(b"abcd"), Err(Failure::LargerThanAnnounced { announced: 3 }));

        let mut short = Check::new(3, abc.clone());
        short.update(b"ab").unwrap();
        assert_eq!(short.finish(), Err(Failure::Truncated { received: 2, announced: 3 }));

        let mut wrong = Check::new(3, abc);
        wrong.update(b"abd").unwrap();
        let e = wrong.finish().unwrap_err().to_string();
        assert!(e.contains("sha256") && e.contains("expected ba7816bf"), "{e}");

        let mut blob = Check::new(6, Digest::GitBlob("ce013625030ba8dba906f756967f9e9ca394464a".into()));
        blob.update(b"hello\n").unwrap();
        assert_eq!(blob.finish(), Ok(()));
    }
}
