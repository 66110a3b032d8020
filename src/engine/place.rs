//! Where a target really is, and whether memloop may touch it there: every component of the path
//! is resolved (a folder link two levels up counts as much as a link at the end), and the real
//! path must stay in the place the file belongs to: the repository (outside its `.git/`) for
//! repository files, the agent's own folder for user files. Anything at the end that is not a
//! regular file (a folder, a FIFO, a device, a socket) is refused too, so nothing ever blocks on it.

use std::path::{Path, PathBuf};

use crate::edit::Refusal;
use crate::files::{RealPathError, describe_kind, real_path};
use crate::target::Scope;

/// The folder a file must really stay in, and how to name it in a refusal.
struct Home {
    real: PathBuf,
    name: String,
}

/// The place `path` belongs to. For the repository, its real path (the repository itself may be
/// reached through a link: that is where the user works). For a user file, the agent's folder
/// (the file's parent) where it is written, with the folders above it resolved but not the
/// folder itself: `~/.kimi-code -> elsewhere` leaves the place, and is refused.
fn home_of(root: &Path, path: &Path, scope: Scope) -> Result<Home, RealPathError> {
    match scope {
        Scope::Project => Ok(Home {
            real: real_path(root)?,
            name: "the repository".into(),
        }),
        Scope::User => {
            let folder = path.parent().unwrap_or(path);
            let above = folder.parent().map(real_path).transpose()?;
            let real = match (above, folder.file_name()) {
                (Some(above), Some(name)) => above.join(name),
                _ => folder.to_path_buf(),
            };
            Ok(Home {
                name: format!("the agent's folder {}", folder.display()),
                real,
            })
        }
    }
}

/// The real path of `path` for writing, or the refusal. With `is_link`, `path` itself is the
/// symlink memloop manages (AGENTS.md -> CLAUDE.md): only the folders on its way are resolved.
pub fn confine(
    root: &Path,
    path: &Path,
    scope: Scope,
    display: &str,
    is_link: bool,
) -> Result<PathBuf, Refusal> {
    let refuse_unresolvable = |err: RealPathError| {
        Refusal::whole(
            display,
            format!("cannot be resolved: {err}"),
            "fix or remove the broken link; memloop writes only where every link on the way resolves",
        )
    };
    let home = home_of(root, path, scope).map_err(refuse_unresolvable)?;
    let real = if is_link {
        let parent = path.parent().unwrap_or(path);
        let real_parent = real_path(parent).map_err(refuse_unresolvable)?;
        match path.file_name() {
            Some(name) => real_parent.join(name),
            None => real_parent,
        }
    } else {
        real_path(path).map_err(refuse_unresolvable)?
    };
    let moved = real != path;
    let points = |real: &Path| {
        if moved {
            format!(" (it really points to {})", real.display())
        } else {
            String::new()
        }
    };
    if !real.starts_with(&home.real) {
        return Err(Refusal::whole(
            display,
            format!(
                "leaves {} through a symlink: it really points to {}",
                home.name,
                real.display()
            ),
            match scope {
                Scope::Project => {
                    "memloop never writes outside the repository through a link; replace the link with a real folder or file, or remove the agent from memloop.toml"
                }
                Scope::User => {
                    "memloop never writes the agent's user config through a link out of its folder; make the folder a real one, or point the agent's home variable (KIMI_CODE_HOME, KIMI_SHARE_DIR) at the real folder"
                }
            },
        ));
    }
    if scope == Scope::Project && real.starts_with(home.real.join(".git")) {
        return Err(Refusal::whole(
            display,
            format!("points into the repository's .git folder{}", points(&real)),
            "memloop never writes into .git; replace the link with a real folder or file",
        ));
    }
    if !is_link
        && let Ok(meta) = std::fs::symlink_metadata(&real)
        && !meta.is_file()
    {
        return Err(Refusal::whole(
            display,
            format!(
                "is {}, not a regular file{}",
                describe_kind(&meta.file_type()),
                points(&real)
            ),
            "memloop reads and writes only regular files; remove it or replace it with a file",
        ));
    }
    Ok(real)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = real_path(dir.path()).unwrap();
        let (repo, outside) = (base.join("repo"), base.join("outside"));
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (dir, repo, outside)
    }

    fn refused(root: &Path, path: &Path, scope: Scope) -> String {
        confine(root, path, scope, "the file", false)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_folder_link_anywhere_on_the_way_out_is_refused() {
        let (_dir, repo, outside) = tree();
        std::fs::create_dir_all(repo.join("a")).unwrap();
        symlink(&outside, repo.join("a/b")).unwrap();
        let message = refused(&repo, &repo.join("a/b/c/settings.json"), Scope::Project);
        assert!(message.contains("leaves the repository"), "{message}");
        assert!(
            message.contains(&outside.display().to_string()),
            "{message}"
        );
        // A relative link that climbs out counts the same.
        symlink("../outside", repo.join(".claude")).unwrap();
        let message = refused(&repo, &repo.join(".claude/settings.json"), Scope::Project);
        assert!(message.contains("leaves the repository"), "{message}");
    }

    #[test]
    fn links_that_stay_inside_resolve_to_their_real_path() {
        let (_dir, repo, _) = tree();
        std::fs::create_dir_all(repo.join("shared/config")).unwrap();
        symlink("shared/config", repo.join(".claude")).unwrap();
        let real = confine(
            &repo,
            &repo.join(".claude/settings.json"),
            Scope::Project,
            "x",
            false,
        )
        .unwrap();
        assert_eq!(real, repo.join("shared/config/settings.json"));
    }

    #[test]
    fn loops_git_and_non_regular_files_are_refused() {
        let (_dir, repo, _) = tree();
        symlink("b", repo.join("a")).unwrap();
        symlink("a", repo.join("b")).unwrap();
        assert!(refused(&repo, &repo.join("a"), Scope::Project).contains("loop"));
        symlink(".git", repo.join(".claude")).unwrap();
        let message = refused(&repo, &repo.join(".claude/settings.json"), Scope::Project);
        assert!(message.contains(".git"), "{message}");
        symlink("/dev/null", repo.join(".mcp.json")).unwrap();
        let message = refused(&repo, &repo.join(".mcp.json"), Scope::Project);
        assert!(message.contains("leaves the repository"), "{message}");
        std::fs::create_dir(repo.join("opencode.json")).unwrap();
        let message = refused(&repo, &repo.join("opencode.json"), Scope::Project);
        assert!(
            message.contains("a folder, not a regular file"),
            "{message}"
        );
    }

    #[test]
    fn a_user_file_stays_in_its_agent_folder() {
        let (_dir, home, outside) = tree();
        let kimi = home.join(".kimi-code");
        symlink(&outside, &kimi).unwrap();
        let message = refused(&home, &kimi.join("config.toml"), Scope::User);
        assert!(message.contains("leaves the agent's folder"), "{message}");
        std::fs::remove_file(&kimi).unwrap();
        std::fs::create_dir(&kimi).unwrap();
        symlink(outside.join("config.toml"), kimi.join("config.toml")).unwrap();
        assert!(refused(&home, &kimi.join("config.toml"), Scope::User).contains("leaves"));
        std::fs::remove_file(kimi.join("config.toml")).unwrap();
        assert_eq!(
            confine(&home, &kimi.join("config.toml"), Scope::User, "x", false).unwrap(),
            kimi.join("config.toml")
        );
        // A home (or a repository) reached through a link is where the user lives: accepted.
        let linked_home = outside.join("home-link");
        symlink(&home, &linked_home).unwrap();
        let via = linked_home.join(".kimi-code/config.toml");
        assert_eq!(
            confine(&linked_home, &via, Scope::User, "x", false).unwrap(),
            kimi.join("config.toml")
        );
        let via = linked_home.join(".kimi-code/config.toml");
        assert_eq!(
            confine(&linked_home, &via, Scope::Project, "x", false).unwrap(),
            kimi.join("config.toml")
        );
    }
}
