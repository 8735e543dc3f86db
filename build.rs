//! Records which commit the extension was built from, for `php --ri dw_router` and
//! phpinfo(): on a fleet, "which build does this node run" must have an answer.
//!
//! Reads `.git` directly (HEAD, then the branch's ref file or `packed-refs`) instead of
//! running git, which the build environment may not have. In a linked worktree (`git
//! worktree add`) `.git` is a file, `gitdir: PATH`: HEAD is in PATH and the refs in the
//! directory PATH/commondir names. Outside a git checkout (a source tarball) the build is
//! "unknown". The working tree's cleanliness is not checked: that needs git itself, and a
//! build id only has to name the commit.
//!
//! Only files that exist are given to cargo as `rerun-if-changed`: cargo counts a missing
//! one as changed, so a missing `packed-refs` (a repository that never packed its refs) or
//! a worktree's `.git/HEAD` would rerun this script, and recompile the extension, on every
//! build.

use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let dirs = git_dirs(Path::new(".git"));
    let commit = dirs
        .as_ref()
        .and_then(head_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=DW_ROUTER_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    if Path::new(".git").is_file() {
        println!("cargo:rerun-if-changed=.git");
    }
    let Some(dirs) = dirs else { return };
    // Rebuild when HEAD moves: a checkout changes HEAD, a commit changes the ref it names.
    watch(&dirs.head.join("HEAD"));
    if let Some(reference) = head_reference(&dirs.head) {
        let loose = dirs.refs.join(&reference);
        if loose.is_file() {
            watch(&loose);
        } else if let Some(parent) = loose.parent() {
            // Packed (or not yet born): a commit writes the loose file into this directory.
            watch(parent);
        }
    }
    watch(&dirs.refs.join("packed-refs"));
}

/// `rerun-if-changed` for PATH if it exists (a missing path would rerun every build).
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// Where HEAD is, and where the refs are: both `.git` in a clone; in a linked worktree the
/// `gitdir:` directory and its `commondir`.
struct GitDirs {
    head: PathBuf,
    refs: PathBuf,
}

fn git_dirs(dot_git: &Path) -> Option<GitDirs> {
    if dot_git.is_dir() {
        return Some(GitDirs {
            head: dot_git.to_owned(),
            refs: dot_git.to_owned(),
        });
    }
    let pointer = fs::read_to_string(dot_git).ok()?;
    let gitdir = Path::new(pointer.trim().strip_prefix("gitdir: ")?);
    // A relative gitdir is relative to the directory holding the `.git` file.
    let head = dot_git.parent().unwrap_or(Path::new(".")).join(gitdir);
    let refs = match fs::read_to_string(head.join("commondir")) {
        Ok(common) => head.join(common.trim()),
        Err(_) => head.clone(),
    };
    Some(GitDirs { head, refs })
}

/// The ref HEAD names (`refs/heads/main`), or `None` for a detached HEAD.
fn head_reference(head_dir: &Path) -> Option<String> {
    let head = fs::read_to_string(head_dir.join("HEAD")).ok()?;
    head.trim().strip_prefix("ref: ").map(str::to_owned)
}

/// The first 12 hex digits of the commit HEAD points at.
fn head_commit(dirs: &GitDirs) -> Option<String> {
    let head = fs::read_to_string(dirs.head.join("HEAD")).ok()?;
    let head = head.trim();
    let full = match head.strip_prefix("ref: ") {
        None => head.to_owned(),
        Some(reference) => fs::read_to_string(dirs.refs.join(reference))
            .ok()
            .map(|id| id.trim().to_owned())
            .or_else(|| packed_ref(&dirs.refs, reference))?,
    };
    let is_id = full.len() >= 12 && full.bytes().all(|b| b.is_ascii_hexdigit());
    is_id.then(|| full[..12].to_owned())
}

/// `reference`'s commit from `packed-refs` (lines `<id> <ref>`).
fn packed_ref(refs_dir: &Path, reference: &str) -> Option<String> {
    let packed = fs::read_to_string(refs_dir.join("packed-refs")).ok()?;
    packed.lines().find_map(|line| {
        let (id, name) = line.split_once(' ')?;
        (name == reference).then(|| id.to_owned())
    })
}
