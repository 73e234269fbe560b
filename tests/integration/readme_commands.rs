//! Every `medrank` command the README shows runs from a clone with nothing beside it: the
//! test reads README.md's ```sh blocks, and runs each `$M ...` command (continuation lines
//! joined) with the built binary, in a scratch folder that holds only what a clone has
//! (`examples/`, `data/`) plus the default model that `scripts/setup.sh` puts in `models/`.
//!
//! Not run here, and why:
//! - `scripts/...` (the README's two commands): CI runs them.
//! - `cargo ...`: developer commands (a release build of the benchmarks).
//! - training on the whole vendored CasiMedicos set: minutes in a release build, far more in
//!   this debug build; its input files are checked to exist instead.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shell commands of the README's ```sh blocks, one per logical line.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut current = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_sh = !in_sh && line.trim() == "```sh";
            continue;
        }
        if !in_sh || line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        // A trailing comment ("   # ...") is not part of the command.
        let line = match line.find("  #") {
            Some(at) => &line[..at],
            None => line,
        };
        match line.trim_end().strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                commands.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
                current.clear();
            }
        }
    }
    commands
}

fn slow(command: &str) -> bool {
    command.contains("--train data/casimedicos/train.jsonl")
}

/// A folder with what a clone has and what setup adds, nothing else (made anew).
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("medrank-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("models")).unwrap();
    for shared in ["examples", "data"] {
        std::os::unix::fs::symlink(root().join(shared), dir.join(shared)).unwrap();
    }
    let model = root().join("models/all-MiniLM-L6-v2");
    assert!(model.join("model.safetensors").exists(), "run scripts/setup.sh first (the default model)");
    std::os::unix::fs::symlink(model, dir.join("models/all-MiniLM-L6-v2")).unwrap();
    dir
}

/// The arguments that name a file or folder of the clone.
fn input_paths(command: &str) -> Vec<&str> {
    command
        .split([' ', ',', '='])
        .filter(|a| ["examples/", "data/", "models/all-MiniLM-L6-v2"].iter().any(|p| a.starts_with(p)))
        .collect()
}

#[test]
fn every_readme_command_runs_from_a_clone() {
    let commands: Vec<String> = readme_commands().into_iter().filter(|c| c.starts_with("$M ")).collect();
    assert!(commands.len() >= 15, "found only {} commands: {commands:#?}", commands.len());
    let dir = scratch();
    let bin = env!("CARGO_BIN_EXE_medrank");
    for command in &commands {
        for path in input_paths(command) {
            assert!(Path::new(&root()).join(path).exists(), "`{command}` names {path}, which a clone lacks");
        }
        if slow(command) {
            eprintln!("not run (slow in a debug build): {command}");
            continue;
        }
        eprintln!("running: {command}");
        let out = Command::new("sh").arg("-c").arg(command.replacen("$M", bin, 1)).current_dir(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "`{command}` failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_reader_joins_continuation_lines_and_drops_comments() {
    let commands = readme_commands();
    // The first tour command spans two lines and ends with a comment in the README.
    let evaluate = commands.iter().find(|c| c.starts_with("$M evaluate --bundle examples/bundle.jsonl")).unwrap();
    assert!(evaluate.ends_with("--rankings examples/rankings.csv --json report.json"), "{evaluate}");
    assert!(commands.iter().all(|c| !c.contains('\\') && !c.contains("  ")), "{commands:#?}");
}
