//! Reading inputs and writing outputs for every subcommand, in one place: inputs are read
//! whole and fingerprinted; every output of a run is one [`Outputs`] transaction, checked
//! before any work and renamed into place only after the whole run succeeded, so a failure
//! never leaves a half or partial set of outputs.

use crate::jobs::NamedText;
use crate::report::Table;
use crate::{Error, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Reads a user file whole (jobs fingerprint the exact text they parse).
pub fn read_input(path: &Path) -> Result<NamedText> {
    let name = path.display().to_string();
    // A device or a pipe may never end (`/dev/zero` was read until the process was killed):
    // inputs are regular files (a link to one is fine), whose size is known.
    let meta = std::fs::metadata(path).map_err(|e| Error::io(&name, e))?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a folder" } else { "a device, pipe or socket" };
        return Err(Error::in_file(
            &name,
            format!("not a regular file ({what}): medrank reads its inputs from regular files; save the data to a file first"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(&name, e))?;
    let text = String::from_utf8(bytes).map_err(|e| not_utf8(&name, e.as_bytes(), e.utf8_error().valid_up_to()))?;
    Ok(NamedText { name, text })
}

/// An error at the line of the first byte that is not UTF-8 (and that byte's offset in the
/// file and column in the line, both 1-based, for a hex editor and a text editor).
fn not_utf8(name: &str, bytes: &[u8], valid_up_to: usize) -> Error {
    let before = &bytes[..valid_up_to];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    Error::Input {
        location: crate::error::Location { file: name.to_owned(), line: Some(line), field: None },
        message: format!("not valid UTF-8 at column {column} (byte {} of the file); save it as UTF-8", valid_up_to + 1),
    }
}

/// Where a subcommand writes its full report and its tables.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Write the full report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write every table as CSV into this folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Writes `--json` / `--csv` (staged into `outputs` with the run's other files), commits
/// every output of the run at once, then prints the tables. Called once the report is complete.
pub fn emit<R: Serialize>(report: &R, tables: &[Table], out: &OutputArgs, mut outputs: Outputs) -> Result<()> {
    if let Some(path) = &out.json {
        let json = serde_json::to_string_pretty(report).map_err(|e| Error::invalid(e.to_string()))?;
        outputs.file(path, json.as_bytes())?;
    }
    if let Some(dir) = &out.csv {
        for t in tables {
            outputs.file(&dir.join(format!("{}.csv", t.name)), t.to_csv().as_bytes())?;
        }
    }
    outputs.commit()?;
    if !out.quiet {
        for t in tables {
            print_table(t);
        }
    }
    Ok(())
}

fn tables_dir_name(output: &OutputArgs) -> String {
    output.csv.as_deref().map(|d| d.display().to_string()).unwrap_or_default()
}

/// Every file one run writes, as one transaction. [`Outputs::plan`] checks the output paths
/// before any work: an output that is also an input of the run, that exists but is not a
/// regular file (a folder, a link, a device such as /dev/null), or that is named twice is
/// refused. [`Outputs::file`] writes a file to a temporary beside its target (a new `--csv`
/// folder is staged whole as a temporary folder beside it); [`Outputs::commit`] renames
/// everything into place once the whole run succeeded. Dropped without a commit (an error
/// anywhere in the run), it removes what it staged and the folders it created, so a failed
/// run leaves nothing new behind.
#[derive(Debug)]
pub struct Outputs {
    /// The run's input files, canonical.
    inputs: Vec<PathBuf>,
    /// Output files and folders the user named, canonical: none may be named twice.
    planned: Vec<PathBuf>,
    /// (temporary, target) in staging order.
    staged: Vec<(PathBuf, PathBuf)>,
    /// The output folders (`--csv`, `train --out`) as given.
    out_dirs: Vec<PathBuf>,
    /// New folders that stand in for a target folder that does not exist yet:
    /// (target, temporary).
    new_dirs: Vec<(PathBuf, PathBuf)>,
    /// Parent folders created for outputs, in creation order (removed, if empty, on failure).
    created: Vec<PathBuf>,
    committed: bool,
}

impl Outputs {
    /// Checks the outputs of a run before any work. `inputs` are the files it reads (a folder
    /// stands for the files directly in it: a model folder), `files` the files it writes
    /// besides `--json` and `--csv`, `dirs` the folders it fills (`train --out`).
    pub fn plan(inputs: &[&Path], output: &OutputArgs, files: &[&Path], dirs: &[&Path]) -> Result<Outputs> {
        let mut canonical_inputs = Vec::new();
        let mut input_dirs = Vec::new();
        for input in inputs {
            if input.is_dir() {
                input_dirs.extend(input.canonicalize().ok());
                let entries = std::fs::read_dir(input).map_err(|e| Error::io(input.display().to_string(), e))?;
                canonical_inputs.extend(entries.flatten().filter_map(|e| e.path().canonicalize().ok()));
            } else if let Ok(c) = input.canonicalize() {
                canonical_inputs.push(c);
            }
        }
        let mut outputs = Outputs {
            inputs: canonical_inputs,
            planned: Vec::new(),
            out_dirs: Vec::new(),
            staged: Vec::new(),
            new_dirs: Vec::new(),
            created: Vec::new(),
            committed: false,
        };
        for file in output.json.iter().map(PathBuf::as_path).chain(files.iter().copied()) {
            outputs.check_file(file)?;
            outputs.planned_once(file)?;
        }
        // The tables go into the --csv folder as NAME.csv, names known only once the run is
        // done: a .csv file there among the other outputs could be one of them (the report
        // then met a table's file: "File exists (os error 17)").
        if let Some(tables) = &output.csv {
            let in_tables = |file: &Path| {
                file.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"))
                    && split_path(file).is_ok_and(|(parent, _)| canonical_target(&parent) == canonical_target(tables))
            };
            let json = output.json.iter().map(|j| ("--json", j.as_path()));
            if let Some((flag, file)) =
                json.chain(files.iter().map(|f| ("this run's output", *f))).find(|(_, f)| in_tables(f))
            {
                return Err(Error::invalid(format!(
                    "{flag} {} is a .csv file in the --csv folder {}, where every table is written as NAME.csv: one of them could take its place; name it otherwise or put it elsewhere (e.g. {})",
                    file.display(),
                    tables.display(),
                    tables.join("report.json").display()
                )));
            }
        }
        // A table's NAME.csv that exists in the --csv folder as a folder, a link or a
        // device would be refused when the table is written, after all the work: refused
        // now, whichever table it would be.
        if let Some(Ok(entries)) = output.csv.as_deref().map(std::fs::read_dir) {
            for entry in entries.flatten() {
                let path = entry.path();
                let regular = entry.file_type().is_ok_and(|t| t.is_file());
                if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) && !regular {
                    return Err(Error::invalid(format!(
                        "{}: refused as the --csv folder: its {} exists and is not a regular file (a folder, \
                         a link or a device), where a table NAME.csv may be written; move it or name another folder",
                        tables_dir_name(output),
                        path.display()
                    )));
                }
            }
        }
        for dir in output.csv.iter().map(PathBuf::as_path).chain(dirs.iter().copied()) {
            match std::fs::symlink_metadata(dir) {
                Ok(m) if !m.is_dir() => {
                    return Err(Error::invalid(format!(
                        "{}: refused as an output folder: it exists and is not a folder (a file or a link)",
                        dir.display()
                    )))
                }
                _ => {}
            }
            if input_dirs.contains(&canonical_target(dir)) {
                return Err(Error::invalid(format!(
                    "{}: refused as an output folder: it is an input folder of this run",
                    dir.display()
                )));
            }
            outputs.planned_once(dir)?;
            outputs.out_dirs.push(dir.to_path_buf());
        }
        Ok(outputs)
    }

    /// An output file must not be an input of the run, and if it exists it must be a
    /// regular file (never a folder, a link or a device, which a rename would replace).
    fn check_file(&self, path: &Path) -> Result<()> {
        let name = path.display().to_string();
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_file() => {
                let what = if m.is_dir() {
                    "a folder"
                } else if m.file_type().is_symlink() {
                    "a link"
                } else {
                    "not a regular file (a device, pipe or socket)"
                };
                return Err(Error::invalid(format!(
                    "{name}: refused as an output: it exists and is {what}; name a new or regular file"
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(name, e)),
        }
        if self.inputs.contains(&canonical_target(path)) {
            return Err(Error::invalid(format!(
                "{name}: refused as an output: it is an input of this run and would be overwritten"
            )));
        }
        Ok(())
    }

    fn planned_once(&mut self, path: &Path) -> Result<()> {
        let target = canonical_target(path);
        if self.planned.contains(&target) {
            return Err(Error::invalid(format!("{}: named as two outputs of this run", path.display())));
        }
        self.planned.push(target);
        Ok(())
    }

    /// Stages `bytes` for `path`: written now to a temporary beside it, renamed at commit.
    pub fn file(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.check_file(path)?;
        let name = path.display().to_string();
        let (parent, file_name) = split_path(path)?;
        if self.staged.iter().any(|(_, t)| t == path) {
            return Err(Error::invalid(format!("{name}: written twice by this run")));
        }
        // Inside an output folder that does not exist yet, stage into the folder's stand-in
        // (its sub-folders too: a model folder's `1_Pooling/config.json`); other missing
        // folders above an output are created (and removed again should the run fail).
        let new_out_dir = self.out_dirs.iter().find(|dir| parent.starts_with(dir) && !dir.is_dir()).cloned();
        let folder = match new_out_dir {
            Some(dir) => {
                let stand_in = self.stand_in(&dir)?;
                let inside = stand_in.join(parent.strip_prefix(&dir).expect("checked by starts_with"));
                std::fs::create_dir_all(&inside).map_err(|e| Error::io(parent.display().to_string(), e))?;
                inside
            }
            None if parent.is_dir() => parent.clone(),
            None => {
                self.create_parents(&parent)?;
                parent.clone()
            }
        };
        let in_new_dir = folder != parent;
        let temp = folder.join(if in_new_dir { file_name.clone() } else { temporary_name(&file_name) });
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, bytes).and_then(|()| f.sync_all()));
        match written {
            Ok(()) => {}
            // Staged before by this run (under another spelling of the path): not a raw
            // "File exists", and the first one's file is left for the rollback.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::invalid(format!("{name}: written twice by this run")));
            }
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                return Err(Error::io(name, e));
            }
        }
        if !in_new_dir {
            self.staged.push((temp, path.to_path_buf()));
        }
        Ok(())
    }

    /// The temporary folder that stands in for the new output folder `dir` until the
    /// commit renames it into place (made at its first file).
    fn stand_in(&mut self, dir: &Path) -> Result<PathBuf> {
        if let Some((_, temp)) = self.new_dirs.iter().find(|(target, _)| target == dir) {
            return Ok(temp.clone());
        }
        let (grand, dir_name) = split_path(dir)?;
        self.create_parents(&grand)?;
        let temp = grand.join(temporary_name(&dir_name));
        std::fs::create_dir(&temp).map_err(|e| Error::io(dir.display().to_string(), e))?;
        self.new_dirs.push((dir.to_path_buf(), temp.clone()));
        Ok(temp)
    }

    /// Creates the missing folders above an output, remembering them for a rollback.
    fn create_parents(&mut self, dir: &Path) -> Result<()> {
        let mut missing = Vec::new();
        let mut d = dir.to_path_buf();
        while !d.as_os_str().is_empty() && !d.exists() {
            missing.push(d.clone());
            d = d.parent().map(Path::to_path_buf).unwrap_or_default();
        }
        for d in missing.into_iter().rev() {
            std::fs::create_dir(&d).map_err(|e| Error::io(d.display().to_string(), e))?;
            self.created.push(d);
        }
        Ok(())
    }

    /// Renames every staged file (and new folder) into place. Should a rename fail (the
    /// disk went away), the error is returned and what was not renamed yet is removed.
    pub fn commit(mut self) -> Result<()> {
        while let Some((target, temp)) = self.new_dirs.first() {
            std::fs::rename(temp, target).map_err(|e| Error::io(target.display().to_string(), e))?;
            self.new_dirs.remove(0);
        }
        while let Some((temp, target)) = self.staged.first() {
            std::fs::rename(temp, target).map_err(|e| Error::io(target.display().to_string(), e))?;
            self.staged.remove(0);
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Outputs {
    /// Without a commit (the run failed), nothing it staged or created remains.
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // After a failed commit, `staged` and `new_dirs` hold only what was not renamed.
        for (temp, _) in &self.staged {
            let _ = std::fs::remove_file(temp);
        }
        for (_, temp) in &self.new_dirs {
            let _ = std::fs::remove_dir_all(temp);
        }
        // Only empty folders go: one that received a committed output stays.
        for dir in self.created.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// (parent folder, file name) of an output path; the parent of `x` is `.`.
fn split_path(path: &Path) -> Result<(PathBuf, std::ffi::OsString)> {
    let file_name =
        path.file_name().ok_or_else(|| Error::invalid(format!("{}: not a file name", path.display())))?.to_os_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, file_name))
}

/// `.NAME.PID.medrank-tmp`: hidden, beside its target, and never the name of a real output.
fn temporary_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(".{}.medrank-tmp", std::process::id()));
    temp
}

/// The canonical path an output would have: its own once it exists, else its parent's
/// canonical path joined with its name (so `./a.json`, `a.json` and a link to the folder
/// compare equal to an input).
fn canonical_target(path: &Path) -> PathBuf {
    if let Ok(c) = path.canonicalize() {
        return c;
    }
    match split_path(path) {
        Ok((parent, name)) => match parent.canonicalize() {
            Ok(p) => p.join(name),
            Err(_) => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        },
        Err(_) => path.to_path_buf(),
    }
}

pub fn print_table(t: &Table) {
    use comfy_table::{presets::UTF8_FULL_CONDENSED, Table as Pretty};
    let mut pretty = Pretty::new();
    pretty.load_preset(UTF8_FULL_CONDENSED).set_header(&t.headers);
    for r in &t.rows {
        pretty.add_row(r);
    }
    println!("{}\n{pretty}\n", t.title);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system temp dir, removed on drop.
    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            let p = std::env::temp_dir().join(format!("medrank-outputs-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Every entry under `dir`, relative, sorted: what a run left behind.
    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        out.sort();
        out
    }

    fn args(json: Option<PathBuf>, csv: Option<PathBuf>) -> OutputArgs {
        OutputArgs { json, csv, quiet: true }
    }

    #[test]
    fn nothing_is_renamed_before_commit_and_a_dropped_run_leaves_nothing() {
        let d = Dir::new("drop");
        std::fs::write(d.0.join("old.json"), "old").unwrap();
        let out = args(Some(d.0.join("old.json")), Some(d.0.join("new/tables")));
        let mut outputs = Outputs::plan(&[], &out, &[&d.0.join("x/bundle.jsonl")], &[]).unwrap();
        outputs.file(&d.0.join("old.json"), b"new").unwrap();
        outputs.file(&d.0.join("new/tables/a.csv"), b"a").unwrap();
        outputs.file(&d.0.join("new/tables/b.csv"), b"b").unwrap();
        outputs.file(&d.0.join("new/tables/deeper/c.csv"), b"c").unwrap();
        outputs.file(&d.0.join("x/bundle.jsonl"), b"{}").unwrap();
        // Staged: the old report is untouched, the targets do not exist yet.
        assert_eq!(std::fs::read_to_string(d.0.join("old.json")).unwrap(), "old");
        assert!(!d.0.join("new/tables").exists() && !d.0.join("x/bundle.jsonl").exists());
        drop(outputs); // the run failed after staging
        assert_eq!(tree(&d.0), ["old.json"], "temporaries and created folders are gone");
        assert_eq!(std::fs::read_to_string(d.0.join("old.json")).unwrap(), "old");
    }

    #[test]
    fn a_folder_named_like_a_table_in_the_csv_folder_is_refused_before_any_work() {
        // It used to be met when the table was written, at the end of the run.
        let d = Dir::new("csv-folder");
        std::fs::create_dir_all(d.0.join("tables/grade_criteria.csv")).unwrap();
        std::fs::write(d.0.join("tables/notes.csv"), "a regular file is fine").unwrap();
        let e = Outputs::plan(&[], &args(None, Some(d.0.join("tables"))), &[], &[]).unwrap_err().to_string();
        assert!(e.contains("grade_criteria.csv exists and is not a regular file"), "{e}");
        std::fs::remove_dir(d.0.join("tables/grade_criteria.csv")).unwrap();
        assert!(Outputs::plan(&[], &args(None, Some(d.0.join("tables"))), &[], &[]).is_ok());
    }

    #[test]
    fn commit_renames_everything_into_place() {
        let d = Dir::new("commit");
        std::fs::create_dir(d.0.join("tables")).unwrap();
        std::fs::write(d.0.join("tables/a.csv"), "old a").unwrap();
        let out = args(Some(d.0.join("r.json")), Some(d.0.join("tables")));
        let mut outputs = Outputs::plan(&[], &out, &[], &[&d.0.join("model")]).unwrap();
        outputs.file(&d.0.join("r.json"), b"{}").unwrap();
        outputs.file(&d.0.join("tables/a.csv"), b"new a").unwrap();
        outputs.file(&d.0.join("model/config.json"), b"c").unwrap();
        // A sub-folder of a new folder is made inside its stand-in (a model's 1_Pooling/).
        outputs.file(&d.0.join("model/sub/w.bin"), b"w").unwrap();
        assert!(!d.0.join("model").exists(), "nothing in place before the commit");
        outputs.commit().unwrap();
        assert_eq!(
            tree(&d.0),
            ["model", "model/config.json", "model/sub", "model/sub/w.bin", "r.json", "tables", "tables/a.csv"]
        );
        assert_eq!(std::fs::read_to_string(d.0.join("tables/a.csv")).unwrap(), "new a");
    }

    #[test]
    fn outputs_that_are_inputs_folders_links_or_devices_are_refused_before_any_work() {
        let d = Dir::new("refuse");
        let input = d.0.join("bundle.jsonl");
        std::fs::write(&input, "in").unwrap();
        let message = |r: Result<Outputs>| r.unwrap_err().to_string();
        // The same file by another spelling is still the input.
        let other_spelling = d.0.join(".").join("bundle.jsonl");
        let m = message(Outputs::plan(&[&input], &args(Some(other_spelling), None), &[], &[]));
        assert!(m.ends_with("refused as an output: it is an input of this run and would be overwritten"), "{m}");
        let m = message(Outputs::plan(&[&input], &OutputArgs::default(), &[&input], &[]));
        assert!(m.contains("it is an input of this run"), "{m}");
        // An existing folder as --json (it used to leave `DIR.tmp` behind).
        let m = message(Outputs::plan(&[], &args(Some(d.0.clone()), None), &[], &[]));
        assert!(m.ends_with("it exists and is a folder; name a new or regular file"), "{m}");
        // A file where --csv wants a folder.
        let m = message(Outputs::plan(&[], &args(None, Some(input.clone())), &[], &[]));
        assert!(m.ends_with("refused as an output folder: it exists and is not a folder (a file or a link)"), "{m}");
        // The same path twice.
        let m = message(Outputs::plan(&[], &args(Some(d.0.join("r.json")), None), &[&d.0.join("r.json")], &[]));
        assert!(m.ends_with("named as two outputs of this run"), "{m}");
        #[cfg(unix)]
        {
            let link = d.0.join("link.json");
            std::os::unix::fs::symlink(d.0.join("elsewhere.json"), &link).unwrap();
            let m = message(Outputs::plan(&[], &args(Some(link.clone()), None), &[], &[]));
            assert!(m.ends_with("it exists and is a link; name a new or regular file"), "{m}");
            assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
            let m = message(Outputs::plan(&[], &args(Some(PathBuf::from("/dev/null")), None), &[], &[]));
            assert_eq!(m, "/dev/null: refused as an output: it exists and is not a regular file (a device, pipe or socket); name a new or regular file");
        }
        // A model folder is an input folder: neither its files nor the folder are outputs.
        let model = d.0.join("model");
        std::fs::create_dir(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        let m = message(Outputs::plan(&[&model], &args(Some(model.join("config.json")), None), &[], &[]));
        assert!(m.contains("it is an input of this run"), "{m}");
        let m = message(Outputs::plan(&[&model], &OutputArgs::default(), &[], &[&model]));
        assert!(m.ends_with("refused as an output folder: it is an input folder of this run"), "{m}");
        assert_eq!(std::fs::read_to_string(&input).unwrap(), "in");
        assert!(!tree(&d.0).iter().any(|p| p.contains("medrank-tmp")));
    }

    #[test]
    fn invalid_utf8_is_reported_at_its_line_and_column() {
        let d = Dir::new("utf8");
        let path = d.0.join("t.csv");
        // Line 3 starts at byte 9 ("a,b\nc,d\n" is 8 bytes); "é," is 2 characters, so the
        // bad byte 0xff is in column 3 and is byte 9 + 3 = 12 of the file (1-based).
        std::fs::write(&path, b"a,b\nc,d\n\xc3\xa9,\xff\n").unwrap();
        let err = read_input(&path).unwrap_err();
        assert_eq!(err.location().unwrap().line, Some(3));
        assert_eq!(
            err.to_string(),
            format!("{}:3: not valid UTF-8 at column 3 (byte 12 of the file); save it as UTF-8", path.display())
        );
    }
}
