//! The page keeps no job list and no option default of its own: it learns the jobs, which
//! of them need a model, the kinds of file each reads, their tabs and their options'
//! defaults from the engine when it is ready (`page::describe`, the `ready` message). This
//! test reads the engine's description natively and greps the page's files (`index.html`
//! and every `*.js` of `www/`) for what only the engine may say: a job's name, or a value
//! an option starts at.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// The engine's description, as the page receives it.
fn engine() -> Value {
    serde_json::from_str(&medrank::page::describe().unwrap()).unwrap()
}

/// `index.html` and every script of `www/`, by name.
fn page_files() -> BTreeMap<String, String> {
    let www = Path::new(env!("CARGO_MANIFEST_DIR")).join("www");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&www).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "index.html" || name.ends_with(".js") {
            out.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    assert!(out.contains_key("app.js") && out.contains_key("worker.js"), "{:?}", out.keys());
    out
}

/// Every job's options at their defaults, merged: the page's Options form holds one field
/// per name, so two jobs reading an option must start it at the same value.
fn option_defaults(engine: &Value) -> BTreeMap<String, Value> {
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    for job in engine["jobs"].as_array().unwrap() {
        for (key, value) in job["defaults"].as_object().unwrap() {
            if let Some(before) = out.insert(key.clone(), value.clone()) {
                assert_eq!(&before, value, "option `{key}` starts at two values ({})", job["name"]);
            }
        }
    }
    out
}

/// The opening tags of `html` that carry `attribute`.
fn tags_with<'a>(html: &'a str, attribute: &str) -> Vec<&'a str> {
    html.split('<').filter(|t| t.contains(attribute)).map(|t| t.split('>').next().unwrap_or(t)).collect()
}

/// The value of `attribute` in an opening tag.
fn attribute<'a>(tag: &'a str, attribute: &str) -> Option<&'a str> {
    let at = tag.find(&format!("{attribute}=\""))? + attribute.len() + 2;
    tag[at..].split('"').next()
}

/// `text` without the values of `attribute="..."`.
fn without_attribute(text: &str, attribute: &str) -> String {
    let marker = format!("{attribute}=\"");
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&marker) {
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        rest = rest.find('"').map_or("", |end| &rest[end..]);
    }
    out.push_str(rest);
    out
}

#[test]
fn the_page_names_no_job_the_engine_does_not_give_it() {
    let engine = engine();
    let jobs: Vec<&str> = engine["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert!(jobs.len() >= 7, "{jobs:?}");
    for (file, text) in page_files() {
        // An option's name may be a job's too (`controls`): the fields' names are not jobs.
        let text = without_attribute(&without_attribute(&text, "data-option"), "data-train");
        for job in &jobs {
            for quoted in [format!("'{job}'"), format!("\"{job}\""), format!("`{job}`")] {
                assert!(
                    !text.contains(&quoted),
                    "{file} names the job {quoted}: the page learns its jobs from the engine"
                );
            }
        }
        assert!(tags_with(&text, "data-job=").is_empty(), "{file} has a Run button of its own");
    }
}

#[test]
fn the_page_starts_no_option_at_a_value_of_its_own() {
    let engine = engine();
    let options = option_defaults(&engine);
    let training = engine["training"]["defaults"].as_object().unwrap().clone();
    let files = page_files();
    let html = &files["index.html"];
    // Every field of the Options and of the training form is one the engine fills, and
    // carries no value, no checked and no selected choice of its own.
    for (marker, defaults) in [("data-option", options.clone()), ("data-train", training.clone().into_iter().collect())]
    {
        let tags = tags_with(html, &format!("{marker}="));
        assert!(!tags.is_empty(), "no field with {marker}");
        for tag in tags {
            let key = attribute(tag, marker).unwrap();
            assert!(defaults.contains_key(key), "index.html: {marker}=\"{key}\" is no option of the engine's");
            for own in [" value=", " checked", " selected"] {
                assert!(!tag.contains(own), "index.html: the field {key} has a{own} of its own: {tag}");
            }
        }
    }
    assert!(!html.contains(" selected"), "index.html picks a choice of its own");
    // No script types a default the engine gives: its words (a tie policy, a backend, a
    // task) quoted, or its fractions (a confidence, a learning rate, a dev split).
    let mut values: Vec<Value> = options.values().chain(training.values()).cloned().collect();
    values.extend(values.clone().iter().filter_map(Value::as_array).flatten().cloned().collect::<Vec<_>>());
    for value in values {
        let (words, number) = match &value {
            // `none` stays a keyword of CSS, SVG and the reports' Content-Security-Policy.
            Value::String(s) if s.len() >= 3 && s != "none" => {
                (vec![format!("'{s}'"), format!("\"{s}\""), format!("`{s}`")], None)
            }
            Value::Number(n) if n.to_string().contains('.') => (Vec::new(), Some(n.to_string())),
            _ => continue,
        };
        // The main page's scripts (the bench page's, bench*.js, hold no job and no option).
        let scripts = files.iter().filter(|(name, _)| name.ends_with(".js") && !name.starts_with("bench"));
        for (file, text) in scripts {
            for w in &words {
                assert!(!text.contains(w.as_str()), "{file} types the default {w}");
            }
            if let Some(n) = &number {
                let typed = text.match_indices(n.as_str()).any(|(at, _)| {
                    let before = text[..at].chars().next_back();
                    let after = text[at + n.len()..].chars().next();
                    !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
                        && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.')
                });
                assert!(!typed, "{file} types the default {n}");
            }
        }
    }
}

#[test]
fn every_job_says_what_it_reads_and_how_it_uses_the_model() {
    let engine = engine();
    let kinds: Vec<&str> = engine["kinds"].as_array().unwrap().iter().map(|k| k["key"].as_str().unwrap()).collect();
    for job in engine["jobs"].as_array().unwrap() {
        let name = job["name"].as_str().unwrap();
        for kind in job["accepts"].as_array().unwrap() {
            assert!(kinds.contains(&kind.as_str().unwrap()), "{name}: unknown kind {kind}");
        }
        let model = job["model"].as_str().unwrap();
        assert!(["none", "optional", "required"].contains(&model), "{name}: {model}");
        // A job that cannot run without a model says so in a sentence the page shows.
        assert_eq!(
            model == "required",
            job.get("needs_model").is_some_and(|t| !t.as_str().unwrap().is_empty()),
            "{name}"
        );
        assert!(job["label"].as_str().is_some_and(|l| !l.is_empty()) && job["title"].as_str().is_some(), "{name}");
    }
}
