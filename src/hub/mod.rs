//! Models named by their Hugging Face Hub id (`ORG/NAME`, `ORG/NAME@REVISION`), wherever a
//! model folder is taken.
//!
//! Model files come from the Hub; nothing of the user's goes there: the only requests are
//! the revision's file listing and the model's own files, with the user's token (for gated
//! models) sent to the Hub's own host only.
//!
//! What the CLI and the page share compiles for wasm32 too (no file system, no network):
//! - `id.rs`      [`HubId`]: parsing `ORG/NAME[@REVISION]`, the cache folder's name, the
//!   `hf://ORG/NAME@COMMIT` name a resolved model carries in reports and messages;
//! - `listing.rs` the Hub's URL layout ([`Endpoint`]), its revision listing
//!   (`/api/models/{id}/revision/{rev}?blobs=true`: commit, files, sizes, LFS sha256),
//!   which files a model needs ([`select_files`]), the size bounds, which hosts a download
//!   may be redirected to;
//! - `plan.rs`    [`Plan`]: from the listing, what to download (the files, their sizes and
//!   digests, the bounds) before any byte, and the Hub's error answers in words;
//! - `verify.rs`  [`Check`]: a file checked as its bytes arrive (never more than announced,
//!   exactly the announced size, the LFS sha256 or the git blob id).
//!
//! Native only:
//! - `settings.rs` the Hugging Face variables (`HF_HOME`, `HF_HUB_CACHE`, `HF_ENDPOINT`,
//!   `HF_HUB_OFFLINE`, `HF_TOKEN`), read as Python's `huggingface_hub` reads them;
//! - `cache.rs`    the standard cache layout (`models--ORG--NAME/{blobs,refs,snapshots}`),
//!   shared with Python: blobs named by their etag, written whole or not at all;
//! - `transport.rs` HTTP through `ureq` (rustls), behind the `hub` build feature: without
//!   it the binary holds no network code and reads the cache only;
//! - `resolve.rs`  a model option (a folder, or an id) to the folder and its files.

pub mod id;
pub mod listing;
pub mod plan;
pub mod verify;

#[cfg(not(target_arch = "wasm32"))]
pub mod cache;
#[cfg(not(target_arch = "wasm32"))]
mod resolve;
#[cfg(not(target_arch = "wasm32"))]
pub mod settings;
#[cfg(all(feature = "hub", not(target_arch = "wasm32")))]
mod transport;

pub use id::HubId;
pub use listing::{select_files, Endpoint, Listing, RemoteFile};
pub use plan::Plan;
pub use verify::{Check, Digest};

#[cfg(not(target_arch = "wasm32"))]
pub use resolve::{model_files, resolve, Event, PlannedFile, Resolved};
