//! Running the PyTorch peer scripts of tests/reference (`bench --parts gpu` and `train`).

use std::path::Path;

/// Runs a PyTorch peer script (`python3 SCRIPT MODEL_DIR ARGS...`) and reads the JSON it
/// prints; `Err` is the script's last line on stderr (its reason to skip: no CUDA, no
/// PyTorch) or why it could not start.
pub(super) fn run_peer_script(
    script: &Path,
    model_dir: &Path,
    args: &[&str],
) -> std::result::Result<serde_json::Value, String> {
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(model_dir)
        .args(args)
        .output()
        .map_err(|e| format!("python3 could not start: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("no message").to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{} printed no JSON: {e}", script.display()))
}
