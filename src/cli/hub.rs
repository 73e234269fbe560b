//! Model options (`--model`, `--grader`, `--nli`, `--bertscore`, the NRP rankers): a folder,
//! or a Hub id resolved through `crate::hub`, with what is downloaded said on stderr
//! before the download (the files and their sizes) and as it goes.

use crate::hub::{Event, Resolved};
use crate::model::{ModelFiles, TextModel};
use crate::Result;
use std::path::Path;

/// The model's files (a folder's, or a Hub model's from the cache).
pub(super) fn model_files(arg: &Path, quiet: bool) -> Result<ModelFiles> {
    crate::hub::model_files(arg, &mut printer(quiet))
}

/// The model loaded for the CPU.
pub(super) fn text_model(arg: &Path, quiet: bool) -> Result<TextModel> {
    TextModel::from_files(&model_files(arg, quiet)?)
}

/// The folder itself (for what reads the folder's files by path: the bench's peers).
pub(super) fn model_folder(arg: &Path, quiet: bool) -> Result<Resolved> {
    crate::hub::resolve(arg, &mut printer(quiet))
}

/// Prints the plan, then each file's progress at most once a second and when it ends.
fn printer(quiet: bool) -> impl FnMut(Event) {
    let mut last = std::time::Instant::now();
    move |event| {
        if quiet {
            return;
        }
        match event {
            Event::Plan { model, files } => {
                let total: u64 = files.iter().map(|f| f.size).sum();
                let fetch: u64 = files.iter().filter(|f| !f.cached).map(|f| f.size).sum();
                let what = if fetch == 0 {
                    "all in the cache".to_string()
                } else {
                    format!("{} to download from the Hub", bytes(fetch))
                };
                eprintln!("{model}: {} files, {} ({what})", files.len(), bytes(total));
                for f in files {
                    eprintln!("  {} {}{}", f.path, bytes(f.size), if f.cached { " (cached)" } else { "" });
                }
            }
            Event::Progress { file, received, size } => {
                if received == size || last.elapsed().as_secs_f64() >= 1.0 {
                    last = std::time::Instant::now();
                    eprintln!("  downloading {file}: {} of {}", bytes(received), bytes(size));
                }
            }
            Event::Note(note) => eprintln!("{note}"),
        }
    }
}

/// `612 B`, `90.9 MB`: decimal units, as the Hub's pages show sizes.
fn bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.2} GB", n as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_the_hub_writes_them() {
        assert_eq!(
            [super::bytes(612), super::bytes(711_649), super::bytes(90_868_376), super::bytes(1_340_000_000)],
            ["612 B", "711.6 kB", "90.9 MB", "1.34 GB"]
        );
    }
}
