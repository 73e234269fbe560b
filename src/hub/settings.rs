//! The Hugging Face variables, read as Python's `huggingface_hub` reads them (its
//! `constants.py`), so both use one cache and one endpoint:
//! - `HF_HUB_CACHE` (or the older `HUGGINGFACE_HUB_CACHE`): the cache; default
//!   `$HF_HOME/hub`, `HF_HOME` defaulting to `$XDG_CACHE_HOME/huggingface`, then
//!   `~/.cache/huggingface`;
//! - `HF_ENDPOINT`: the Hub's base URL (a mirror; the tests' stand-in);
//! - `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`): `1`, `ON`, `YES` or `TRUE` (any case): the
//!   cache only, no request;
//! - `HF_TOKEN`, else the file `HF_TOKEN_PATH` (default `$HF_HOME/token`, what `hf auth login`
//!   writes): the token sent to the Hub (never elsewhere) for gated and private models.

use super::listing::{Endpoint, DEFAULT_ENDPOINT};
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct Settings {
    pub endpoint: Endpoint,
    /// The hub cache folder (holding `models--ORG--NAME/`).
    pub cache: PathBuf,
    pub offline: bool,
    pub token: Option<String>,
}

impl Settings {
    /// From the process's environment.
    pub fn from_env() -> Result<Settings, String> {
        Settings::from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// From `var` (a variable's non-empty value), for tests.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let home = || var("HOME").or_else(|| var("USERPROFILE")).map(PathBuf::from);
        let hf_home = match var("HF_HOME") {
            Some(h) => PathBuf::from(h),
            None => match var("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| home().map(|h| h.join(".cache"))) {
                Some(cache) => cache.join("huggingface"),
                None => {
                    return Err(
                        "no HF_HOME, HF_HUB_CACHE or home folder: set HF_HUB_CACHE to the Hugging Face cache".into()
                    )
                }
            },
        };
        let cache = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map_or_else(|| hf_home.join("hub"), PathBuf::from);
        let endpoint = Endpoint::new(&var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_ENDPOINT.to_string()))?;
        let offline = var("HF_HUB_OFFLINE")
            .or_else(|| var("TRANSFORMERS_OFFLINE"))
            .is_some_and(|v| ["1", "ON", "YES", "TRUE"].contains(&v.to_ascii_uppercase().as_str()));
        let token_file = var("HF_TOKEN_PATH").map_or_else(|| hf_home.join("token"), PathBuf::from);
        let token = var("HF_TOKEN")
            .or_else(|| std::fs::read_to_string(token_file).ok())
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        Ok(Settings { endpoint, cache, offline, token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, String> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_vars(|name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn the_cache_and_endpoint_follow_huggingface_hubs_precedence() {
        let s = settings(&[("HOME", "/home/u")]).unwrap();
        assert_eq!(s.cache, PathBuf::from("/home/u/.cache/huggingface/hub"));
        assert_eq!(s.endpoint.url(), "https://huggingface.co");
        assert!(!s.offline && s.token.is_none());
        let s = settings(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/x")]).unwrap();
        assert_eq!(s.cache, PathBuf::from("/x/huggingface/hub"));
        let s = settings(&[("HOME", "/home/u"), ("HF_HOME", "/hf")]).unwrap();
        assert_eq!(s.cache, PathBuf::from("/hf/hub"));
        let s = settings(&[("HF_HOME", "/hf"), ("HUGGINGFACE_HUB_CACHE", "/old")]).unwrap();
        assert_eq!(s.cache, PathBuf::from("/old"));
        let s = settings(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c"), ("HUGGINGFACE_HUB_CACHE", "/old")]).unwrap();
        assert_eq!(s.cache, PathBuf::from("/c"));
        let s = settings(&[("HF_HOME", "/hf"), ("HF_ENDPOINT", "http://127.0.0.1:9/"), ("HF_TOKEN", " t \n")]).unwrap();
        assert_eq!((s.endpoint.url().as_str(), s.token.as_deref()), ("http://127.0.0.1:9", Some("t")));
        assert!(settings(&[("HF_HOME", "/hf"), ("HF_ENDPOINT", "hub.example")]).unwrap_err().contains("HF_ENDPOINT"));
    }

    #[test]
    fn offline_takes_the_values_python_takes() {
        for (value, offline) in [("1", true), ("on", true), ("Yes", true), ("TRUE", true), ("0", false), ("no", false)]
        {
            assert_eq!(settings(&[("HF_HOME", "/hf"), ("HF_HUB_OFFLINE", value)]).unwrap().offline, offline, "{value}");
        }
    }
}
