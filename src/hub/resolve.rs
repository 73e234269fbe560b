//! A model option to a folder: a path that exists is that folder; `ORG/NAME[@REVISION]`
//! (or `hf://...`) is the model's snapshot in the Hugging Face cache, downloaded first when
//! it is not there (unless offline). The model's name becomes `hf://ORG/NAME@COMMIT`, so
//! the files' fingerprints in every report name the id, the commit and each file's sha256.

use super::cache::Cache;
use super::id::{HubId, SCHEME};
use super::listing::select_files;
use super::plan::loadable;
use super::settings::Settings;
use crate::model::ModelFiles;
use crate::{Error, Location, Result};
use std::path::{Path, PathBuf};

/// What a resolution reports as it goes (the CLI prints it).
#[derive(Debug)]
pub enum Event<'a> {
    /// Before any byte is downloaded: the model, its files and sizes, what is cached.
    Plan { model: &'a str, files: &'a [PlannedFile] },
    /// One file's bytes so far.
    Progress { file: &'a str, received: u64, size: u64 },
    /// Where the files come from when it is not the Hub (offline, the Hub unreachable).
    Note(String),
}

/// One file of a download plan.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    pub path: String,
    pub size: u64,
    /// Already in the cache (nothing to download).
    pub cached: bool,
}

/// Where a model option led.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The folder to read.
    pub dir: PathBuf,
    /// The model's name in messages and reports: the path, or `hf://ORG/NAME@COMMIT`.
    pub name: String,
    /// The Hub id and the commit it resolved to, for a Hub model.
    pub hub: Option<(HubId, String)>,
}

/// The model's files for the loader, named as [`Resolved::name`] says (so an error in them
/// names the Hub id and commit, not the cache's folder).
pub fn model_files(arg: &Path, events: &mut dyn FnMut(Event)) -> Result<ModelFiles> {
    let resolved = resolve(arg, events)?;
    if resolved.hub.is_none() {
        return ModelFiles::read_dir(&resolved.dir);
    }
    let folder = resolved.dir.display().to_string();
    let rename = |text: &str| match text.strip_prefix(&folder) {
        Some(rest) => format!("{}{rest}", resolved.name),
        None => text.to_string(),
    };
    let mut files = ModelFiles::read_dir(&resolved.dir).map_err(|e| match e {
        Error::Input { location, message } => {
            Error::Input { location: Location { file: rename(&location.file), ..location }, message }
        }
        Error::Io { path, source } => Error::Io { path: rename(&path), source },
        other => other,
    })?;
    files.name = resolved.name.clone();
    for source in [&mut files.weights_source, &mut files.tokenizer_source].into_iter().flatten() {
        source.name = rename(&source.name);
    }
    Ok(files)
}

/// The folder a model option names (see the module's documentation).
pub fn resolve(arg: &Path, events: &mut dyn FnMut(Event)) -> Result<Resolved> {
    let local = || Resolved { dir: arg.to_path_buf(), name: arg.display().to_string(), hub: None };
    // A path that exists always wins (a folder named like an id included).
    if std::fs::symlink_metadata(arg).is_ok() {
        return Ok(local());
    }
    let Some(id) = hub_id_of(arg)? else { return Ok(local()) };
    let name = format!("{SCHEME}{}", id.display());
    let settings = Settings::from_env().map_err(|why| Error::in_file(&name, why))?;
    let cache = Cache { root: settings.cache.clone() };
    if settings.offline {
        return from_cache(&id, &cache, "HF_HUB_OFFLINE is set", events);
    }
    online(&id, &settings, &cache, events)
}

#[cfg(feature = "hub")]
use fetch::download as online;

/// Without the `hub` feature there is no transport: the cache alone.
#[cfg(not(feature = "hub"))]
fn online(id: &HubId, _: &Settings, cache: &Cache, events: &mut dyn FnMut(Event)) -> Result<Resolved> {
    from_cache(id, cache, "this medrank was built without Hub downloads: no `hub` feature", events)
}

/// `hf://ORG/NAME[@REV]` is always a Hub id (an error if malformed); `ORG/NAME[@REV]` is one
/// unless `ORG` is a folder here (then it is a path that does not exist: the loader says
/// so, and nothing is asked of the Hub about a name that was meant as a path).
fn hub_id_of(arg: &Path) -> Result<Option<HubId>> {
    let Some(text) = arg.to_str() else { return Ok(None) };
    if text.starts_with(SCHEME) {
        return HubId::parse(text).map(Some).map_err(Error::invalid);
    }
    match HubId::parse(text) {
        Ok(id) if !Path::new(id.repo.split('/').next().unwrap_or("")).is_dir() => Ok(Some(id)),
        _ => Ok(None),
    }
}

/// The model from the cache alone: its revision's commit (a commit, or `refs/`), its
/// snapshot, and there the files the loader reads.
fn from_cache(id: &HubId, cache: &Cache, why: &str, events: &mut dyn FnMut(Event)) -> Result<Resolved> {
    let name = format!("{SCHEME}{}", id.display());
    let commit = cache.commit_of(id).ok_or_else(|| {
        Error::in_file(
            &name,
            format!("not in the Hugging Face cache ({}), and {why}: nothing is downloaded", cache.repo(id).display()),
        )
    })?;
    let resolved = id.resolved_name(&commit);
    let dir = cache.snapshot(id, &commit);
    let present = cache.snapshot_files(&dir);
    let names: Vec<&str> = present.iter().map(String::as_str).collect();
    let chosen = select_files(&names)
        .map_err(|why| Error::in_file(&resolved, format!("the cached snapshot ({}) has {why}", dir.display())))?;
    loadable(&resolved, &chosen, true)?;
    events(Event::Note(format!("{name}: from the cache, commit {commit} ({why})")));
    Ok(Resolved { dir, name: resolved, hub: Some((id.clone(), commit)) })
}

#[cfg(feature = "hub")]
mod fetch {
    use super::super::listing::Listing;
    use super::super::plan::{file_failure, listing_failure, Plan, Token};
    use super::super::transport::{HttpFailure, Transport};
    use super::*;

    /// Asks the Hub which commit the revision is and which files it has, downloads the
    /// missing ones into the cache (checked), then links the snapshot and writes the ref.
    pub(super) fn download(
        id: &HubId,
        settings: &Settings,
        cache: &Cache,
        events: &mut dyn FnMut(Event),
    ) -> Result<Resolved> {
        let name = format!("{SCHEME}{}", id.display());
        let transport = Transport::new(settings.endpoint.clone(), settings.token.clone());
        let url = settings.endpoint.revision_url(id);
        let token = if settings.token.is_some() { Token::Sent } else { Token::NotSet };
        let listing = match transport.listing(&url) {
            Ok(bytes) => Listing::parse(&bytes).map_err(|why| Error::in_file(&name, format!("{why} (from {url})")))?,
            // As huggingface_hub does: with no answer at all, a cached snapshot still serves.
            Err(HttpFailure::Unreachable(why)) if cache.commit_of(id).is_some() => {
                return from_cache(id, cache, &format!("the Hub could not be reached: {why}"), events)
            }
            Err(HttpFailure::Unreachable(why)) => {
                return Err(Error::in_file(
                    &name,
                    format!(
                    "the Hub ({}) could not be reached ({why}), and the model is not in the Hugging Face cache ({})",
                    settings.endpoint.url(),
                    cache.repo(id).display()
                ),
                ))
            }
            Err(HttpFailure::Status(status)) => {
                return Err(Error::in_file(&name, listing_failure(id, &status, token, &url)))
            }
            Err(e) => return Err(Error::in_file(&name, format!("{e} (asking {url})"))),
        };
        let plan = Plan::new(id, &listing, true)?;
        let (commit, resolved) = (&plan.commit, &plan.name);
        let planned: Vec<PlannedFile> = plan
            .files
            .iter()
            .map(|f| PlannedFile { path: f.path.clone(), size: f.size, cached: cache.has_blob(id, &f.digest, f.size) })
            .collect();
        events(Event::Plan { model: resolved, files: &planned });
        for (file, planned) in plan.files.iter().zip(&planned) {
            if planned.cached {
                continue;
            }
            let file_url = settings.endpoint.file_url(&id.repo, commit, &file.path);
            cache.write_blob(id, &file.digest, |out| {
                let mut progress = |received| events(Event::Progress { file: &file.path, received, size: file.size });
                transport.download(&file_url, commit, file, out, &mut progress).map_err(|e| {
                    let why = match &e {
                        HttpFailure::Status(status) => file_failure(status, plan.gated, token),
                        e => e.to_string(),
                    };
                    Error::in_file(&format!("{resolved}/{}", file.path), why)
                })
            })?;
        }
        for file in &plan.files {
            cache.link(id, commit, &file.path, &file.digest)?;
        }
        cache.set_ref(id, commit)?;
        Ok(Resolved {
            dir: cache.snapshot(id, commit),
            name: resolved.clone(),
            hub: Some((id.clone(), commit.clone())),
        })
    }
}
