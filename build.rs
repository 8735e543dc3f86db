//! Records which commit the extension was built from, for `php --ri dw_router` and
//! phpinfo(): on a fleet, "which build does this node run" must have an answer.
//!
//! Reads `.git` directly (HEAD, then the branch's ref file or `packed-refs`) instead of
//! running git, which the build environment may not have. Outside a git checkout (a source
//! tarball) the build is "unknown". The working tree's cleanliness is not checked: that
//! needs git itself, and a build id only has to name the commit.

use std::fs;
use std::path::Path;

fn main() {
    let git = Path::new(".git");
    let commit = head_commit(git).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DW_ROUTER_COMMIT={commit}");
    // Rebuild when HEAD moves: a checkout changes HEAD, a commit changes the ref it names.
    println!("cargo:rerun-if-changed=.git/HEAD");
    if let Some(reference) = head_reference(git) {
        println!("cargo:rerun-if-changed=.git/{reference}");
    }
    println!("cargo:rerun-if-changed=.git/packed-refs");
}

/// The ref HEAD names (`refs/heads/main`), or `None` for a detached HEAD.
fn head_reference(git: &Path) -> Option<String> {
    let head = fs::read_to_string(git.join("HEAD")).ok()?;
    head.trim().strip_prefix("ref: ").map(str::to_owned)
}

/// The first 12 hex digits of the commit HEAD points at.
fn head_commit(git: &Path) -> Option<String> {
    let head = fs::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    let full = match head.strip_prefix("ref: ") {
        None => head.to_owned(),
        Some(reference) => fs::read_to_string(git.join(reference))
            .ok()
            .map(|id| id.trim().to_owned())
            .or_else(|| packed_ref(git, reference))?,
    };
    let is_id = full.len() >= 12 && full.bytes().all(|b| b.is_ascii_hexdigit());
    is_id.then(|| full[..12].to_owned())
}

/// `reference`'s commit from `packed-refs` (lines `<id> <ref>`).
fn packed_ref(git: &Path, reference: &str) -> Option<String> {
    let packed = fs::read_to_string(git.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (id, name) = line.split_once(' ')?;
        (name == reference).then(|| id.to_owned())
    })
}
