//! The Hugging Face cache on disk, laid out as Python's `huggingface_hub` lays it out, so a
//! model either of them downloaded is found by the other:
//!
//! ```text
//! HF_HUB_CACHE/models--ORG--NAME/
//!   blobs/{etag}                      each file once, named by its sha256 (LFS) or git blob id
//!   snapshots/{commit}/{path}         links to ../../blobs/{etag} (one ../ more per folder)
//!   refs/{revision}                   the commit a branch or tag pointed at when last asked
//! HF_HUB_CACHE/.locks/models--ORG--NAME/{etag}.lock
//! ```
//!
//! A blob is written to a name of its own (`{etag}.{unique}.incomplete`), checked, and only
//! then renamed to `blobs/{etag}`; on any failure the partial file is removed. Snapshot links
//! and the ref are written after every file of the model is in `blobs/`, so a failed run
//! leaves only whole, checked blobs (reused by the next run), never a snapshot that lacks a
//! file or a ref to one.

use super::id::{is_commit, HubId};
use super::verify::Digest;
use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The cache folder (`HF_HUB_CACHE`).
#[derive(Debug, Clone)]
pub struct Cache {
    pub root: PathBuf,
}

impl Cache {
    /// `models--ORG--NAME`.
    pub fn repo(&self, id: &HubId) -> PathBuf {
        self.root.join(id.cache_folder())
    }

    pub fn snapshot(&self, id: &HubId, commit: &str) -> PathBuf {
        self.repo(id).join("snapshots").join(commit)
    }

    pub fn blob(&self, id: &HubId, digest: &Digest) -> PathBuf {
        self.repo(id).join("blobs").join(digest.hex())
    }

    /// The commit the id's revision means here without asking the Hub: a commit itself when
    /// its snapshot is cached, else what `refs/{revision}` holds.
    pub fn commit_of(&self, id: &HubId) -> Option<String> {
        let revision = id.revision();
        if is_commit(revision) {
            return self.snapshot(id, revision).is_dir().then(|| revision.to_string());
        }
        let text = std::fs::read_to_string(self.repo(id).join("refs").join(revision)).ok()?;
        let commit = text.trim();
        is_commit(commit).then(|| commit.to_string())
    }

    /// Whether a file's blob is here whole (its announced size; its digest was checked
    /// when it was written, by medrank or by Python).
    pub fn has_blob(&self, id: &HubId, digest: &Digest, size: u64) -> bool {
        std::fs::metadata(self.blob(id, digest)).is_ok_and(|m| m.is_file() && m.len() == size)
    }

    /// The files of a cached snapshot (paths with `/`, links to blobs that exist), in sorted
    /// order; folders whose name starts with `.` are skipped.
    pub fn snapshot_files(&self, dir: &Path) -> Vec<String> {
        fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                let rel = format!("{prefix}{name}");
                if path.is_dir() {
                    if depth < 4 && !name.starts_with('.') {
                        walk(&path, &format!("{rel}/"), depth + 1, out);
                    }
                } else if path.is_file() {
                    out.push(rel);
                }
            }
        }
        let mut out = Vec::new();
        walk(dir, "", 0, &mut out);
        out.sort();
        out
    }

    /// Writes one blob: `fill` writes its bytes (checking them as they come) into a file of
    /// this process's own, which is renamed to `blobs/{etag}` only when `fill` succeeded
    /// and removed otherwise. Downloads of the same blob by several processes (medrank or
    /// Python) wait on the same lock file, and the later one keeps the blob the first wrote.
    pub fn write_blob(
        &self,
        id: &HubId,
        digest: &Digest,
        fill: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let blob = self.blob(id, digest);
        let blobs = blob.parent().expect("a blob is in blobs/");
        std::fs::create_dir_all(blobs).map_err(|e| Error::io(blobs.display().to_string(), e))?;
        let _lock = self.lock(id, digest);
        if blob.is_file() {
            return Ok(()); // another process finished it while this one waited for the lock
        }
        let partial = blobs.join(format!("{}.{}.incomplete", digest.hex(), unique_suffix()));
        let written = (|| {
            let mut file = std::fs::File::create(&partial).map_err(|e| Error::io(partial.display().to_string(), e))?;
            {
                let mut out = std::io::BufWriter::with_capacity(1 << 20, &mut file);
                fill(&mut out)?;
                out.flush().map_err(|e| Error::io(partial.display().to_string(), e))?;
            }
            file.sync_all().map_err(|e| Error::io(partial.display().to_string(), e))?;
            std::fs::rename(&partial, &blob).map_err(|e| Error::io(blob.display().to_string(), e))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written
    }

    /// A best-effort lock shared with `huggingface_hub` (`.locks/models--ORG--NAME/{etag}.lock`,
    /// flock on Unix); held until dropped. Correctness does not depend on it: every writer
    /// has its own partial file and renames a whole, checked blob.
    fn lock(&self, id: &HubId, digest: &Digest) -> Option<std::fs::File> {
        let dir = self.root.join(".locks").join(id.cache_folder());
        std::fs::create_dir_all(&dir).ok()?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("{}.lock", digest.hex())))
            .ok()?;
        file.lock().ok()?;
        Some(file)
    }

    /// `snapshots/{commit}/{path}` -> the blob, as a relative link (as Python makes it); a
    /// copy where links cannot be made. An entry already there is kept (a commit's files
    /// never change); a dangling link is replaced.
    pub fn link(&self, id: &HubId, commit: &str, path: &str, digest: &Digest) -> Result<()> {
        let pointer = self.snapshot(id, commit).join(path);
        if pointer.exists() {
            return Ok(());
        }
        let named = |e| Error::io(pointer.display().to_string(), e);
        if std::fs::symlink_metadata(&pointer).is_ok() {
            std::fs::remove_file(&pointer).map_err(named)?;
        }
        std::fs::create_dir_all(pointer.parent().expect("inside the snapshot")).map_err(named)?;
        let ups = path.split('/').count() + 1;
        let target = PathBuf::from(format!("{}blobs/{}", "../".repeat(ups), digest.hex()));
        #[cfg(unix)]
        let linked = std::os::unix::fs::symlink(&target, &pointer);
        #[cfg(not(unix))]
        let linked = std::fs::copy(self.blob(id, digest), &pointer).map(|_| ());
        linked.map_err(named)
    }

    /// `refs/{revision}` = the commit (no newline, as Python writes it); nothing for a
    /// revision that is itself a commit.
    pub fn set_ref(&self, id: &HubId, commit: &str) -> Result<()> {
        let revision = id.revision();
        if revision == commit {
            return Ok(());
        }
        let path = self.repo(id).join("refs").join(revision);
        let named = |e| Error::io(path.display().to_string(), e);
        std::fs::create_dir_all(path.parent().expect("inside refs/")).map_err(named)?;
        let partial = path.with_file_name(format!(".{}.{}.incomplete", revision.replace('/', "_"), unique_suffix()));
        std::fs::write(&partial, commit).map_err(named)?;
        std::fs::rename(&partial, &path).map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            named(e)
        })
    }
}

/// A suffix no other writer uses at the same time: this process and a counter.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("medrank{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("medrank-hub-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn blobs_are_whole_or_absent_and_snapshots_link_to_them() {
        let cache = Cache { root: scratch("blobs") };
        let id = HubId::parse("org/name").unwrap();
        let digest = Digest::GitBlob("ce013625030ba8dba906f756967f9e9ca394464a".into());
        let failed = cache.write_blob(&id, &digest, |out: &mut dyn Write| {
            out.write_all(b"hel").unwrap();
            Err(Error::invalid("transfer broke"))
        });
        assert!(failed.is_err());
        let blobs = cache.repo(&id).join("blobs");
        assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 0, "nothing partial is left");
        cache
            .write_blob(&id, &digest, |out: &mut dyn Write| out.write_all(b"hello\n").map_err(|e| Error::io("blob", e)))
            .unwrap();
        assert!(cache.has_blob(&id, &digest, 6) && !cache.has_blob(&id, &digest, 7));

        let commit = "0123456789abcdef0123456789abcdef01234567";
        cache.link(&id, commit, "1_Pooling/config.json", &digest).unwrap();
        cache.link(&id, commit, "config.json", &digest).unwrap();
        let snapshot = cache.snapshot(&id, commit);
        assert_eq!(std::fs::read(snapshot.join("1_Pooling/config.json")).unwrap(), b"hello\n");
        #[cfg(unix)]
        assert_eq!(
            std::fs::read_link(snapshot.join("1_Pooling/config.json")).unwrap(),
            PathBuf::from(format!("../../../blobs/{}", digest.hex()))
        );
        assert_eq!(cache.snapshot_files(&snapshot), ["1_Pooling/config.json", "config.json"]);

        assert_eq!(cache.commit_of(&id), None);
        cache.set_ref(&id, commit).unwrap();
        assert_eq!(std::fs::read_to_string(cache.repo(&id).join("refs/main")).unwrap(), commit);
        assert_eq!(cache.commit_of(&id).as_deref(), Some(commit));
        let pinned = HubId::parse(&format!("org/name@{commit}")).unwrap();
        assert_eq!(cache.commit_of(&pinned).as_deref(), Some(commit));
        let _ = std::fs::remove_dir_all(&cache.root);
    }
}
