//! `dwctl auth --apply` against etcd: the roles, grants and users as they are, the steps
//! that make them match the wanted ones (planned by `crate::plan::roles`) applied in
//! order, and the password files of new users.
//!
//! A new user's password is random (from the kernel), written to `<dir>/<user>.password`
//! (created 0600, fsynced) before the user is added, so that a password is never lost and
//! never printed; a file left by an interrupted run is reused. The directory must be a
//! real directory that only its owner (this user or root) can write.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use etcd_client::{Client, Permission, PermissionType, RoleRevokePermissionOptions};

use crate::context::Context;
use crate::error::Error;
use crate::plan::roles::{Access, Current, Grant, RoleSpec, Step, plan, replaced_prefixes};

/// Bytes of randomness in a new password (shown as twice as many hex digits).
pub const PASSWORD_BYTES: usize = 24;

/// What `auth --apply` did (or, dry, would do).
pub struct Applied {
    /// The steps, in order (none: everything is in place).
    pub steps: Vec<Step>,
    /// Each new user with the file holding its password.
    pub files: Vec<(String, PathBuf)>,
}

/// Makes etcd's roles and users match `wanted`: reads them, plans the steps and (unless
/// `dry_run`) applies them in order. New users need `password_dir` (checked: a directory
/// only its owner, this user or root, can write), except on a dry run.
pub async fn apply(
    context: &Context,
    wanted: &[RoleSpec],
    password_dir: Option<&Path>,
    dry_run: bool,
) -> Result<Applied, Error> {
    let mut client = context.etcd.connect().await?;
    let current = read_current(&mut client, wanted).await?;
    let steps = plan(wanted, &current, &replaced_prefixes(&context.layout));
    let new_users: Vec<&str> = steps
        .iter()
        .filter_map(|step| match step {
            Step::AddUser(user) => Some(user.as_str()),
            _ => None,
        })
        .collect();
    let dir = match (password_dir, new_users.is_empty()) {
        (Some(dir), _) => Some(check_password_dir(dir)?),
        (None, true) => None,
        (None, false) if dry_run => None,
        (None, false) => {
            return Err(Error::Usage(format!(
                "{} new user(s) to create ({}...): give --password-dir DIR for their passwords",
                new_users.len(),
                new_users[0]
            )));
        }
    };
    let mut files = Vec::new();
    if !dry_run {
        for step in &steps {
            apply_step(&mut client, step, dir.as_deref(), &mut files).await?;
        }
    }
    Ok(Applied { steps, files })
}

/// Every role with its grants, and the managed users with their roles.
async fn read_current(client: &mut Client, wanted: &[RoleSpec]) -> Result<Current, Error> {
    let mut current = Current::default();
    let roles = client.role_list().await?.roles().to_vec();
    for role in roles {
        let grants = client
            .role_get(role.as_str())
            .await?
            .permissions()
            .iter()
            .map(|permission| Grant {
                key: permission.key().to_vec(),
                range_end: permission.range_end().to_vec(),
                access: Access::from_code(permission.get_type()),
            })
            .collect();
        current.roles.insert(role, grants);
    }
    let users = client.user_list().await?.users().to_vec();
    for role in wanted {
        if users.contains(&role.name) {
            let roles = client.user_get(role.name.as_str()).await?.roles().to_vec();
            current.users.insert(role.name.clone(), roles);
        }
    }
    Ok(current)
}

fn permission(grant: &Grant) -> Permission {
    let access = match grant.access {
        Access::Read => PermissionType::Read,
        Access::Write => PermissionType::Write,
        Access::ReadWrite => PermissionType::Readwrite,
    };
    let permission = Permission::new(access, grant.key.clone());
    if grant.range_end.is_empty() {
        permission
    } else {
        permission.with_range_end(grant.range_end.clone())
    }
}

async fn apply_step(
    client: &mut Client,
    step: &Step,
    dir: Option<&Path>,
    files: &mut Vec<(String, PathBuf)>,
) -> Result<(), Error> {
    match step {
        Step::AddRole(role) => {
            client.role_add(role.as_str()).await?;
        }
        Step::Grant(role, grant) => {
            client
                .role_grant_permission(role.as_str(), permission(grant))
                .await?;
        }
        Step::Revoke(role, grant, _) => {
            let options = (!grant.range_end.is_empty()).then(|| {
                RoleRevokePermissionOptions::new().with_range_end(grant.range_end.clone())
            });
            client
                .role_revoke_permission(role.as_str(), grant.key.clone(), options)
                .await?;
        }
        Step::AddUser(user) => {
            let Some(dir) = dir else {
                return Err(Error::Usage("--password-dir is needed".into()));
            };
            let path = dir.join(format!("{user}.password"));
            let password = password_file(&path)?;
            client.user_add(user.as_str(), password, None).await?;
            files.push((user.clone(), path));
        }
        Step::GrantRole(user, role) => {
            client.user_grant_role(user.as_str(), role.as_str()).await?;
        }
        Step::RevokeRole(user, role) => {
            client
                .user_revoke_role(user.as_str(), role.as_str())
                .await?;
        }
    }
    Ok(())
}

/// The effective uid of this process: the owner of `/proc/self`.
fn effective_uid() -> Result<u32, Error> {
    std::fs::metadata("/proc/self")
        .map(|meta| meta.uid())
        .map_err(|error| Error::Failed(format!("cannot tell who runs dwctl (/proc/self): {error}")))
}

/// `--password-dir`: a directory (not a symlink) owned by this user or root that no one
/// else can write.
fn check_password_dir(dir: &Path) -> Result<PathBuf, Error> {
    let shown = dir.display();
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|error| Error::Usage(format!("--password-dir {shown}: {error}")))?;
    if !meta.file_type().is_dir() {
        return Err(Error::Usage(format!(
            "--password-dir {shown} is not a directory (a symlink is refused)"
        )));
    }
    let uid = effective_uid()?;
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(Error::Usage(format!(
            "--password-dir {shown} belongs to uid {}: it must be yours or root's",
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(Error::Usage(format!(
            "--password-dir {shown} is writable by others (mode {:o}): chmod go-w it, or use \
             a directory only you can write",
            meta.permissions().mode() & 0o7777
        )));
    }
    Ok(dir.to_path_buf())
}

/// The password in `path`: a new random one written to a new file (mode 0600), or the
/// one an earlier, interrupted run left there (a regular file of ours, mode 0600).
fn password_file(path: &Path) -> Result<String, Error> {
    let shown = path.display();
    let failed = |what: &str, error: std::io::Error| {
        Error::Failed(format!("cannot {what} {shown}: {error}"))
    };
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut file) => {
            let password = random_password()?;
            file.write_all(format!("{password}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|error| failed("write", error))?;
            Ok(password)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(path).map_err(|error| failed("read", error))?;
            if !meta.file_type().is_file()
                || meta.uid() != effective_uid()?
                || meta.permissions().mode() & 0o077 != 0
            {
                return Err(Error::Failed(format!(
                    "{shown} exists and is not a password file of yours with mode 0600: \
                     remove it, or choose another --password-dir"
                )));
            }
            // `--password-dir` is checked: only its owner (us or root) can write it.
            Ok(dw_etcd::read_secret_file("--password-dir", path)?)
        }
        Err(error) => Err(failed("create", error)),
    }
}

/// [`PASSWORD_BYTES`] bytes from the kernel's generator, in hex.
fn random_password() -> Result<String, Error> {
    let mut bytes = [0u8; PASSWORD_BYTES];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|error| Error::Failed(format!("cannot read /dev/urandom: {error}")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_files_are_new_0600_or_reused_and_dirs_others_write_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("u.password");
        let first = password_file(&path).unwrap();
        assert_eq!(first.len(), 2 * PASSWORD_BYTES);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            password_file(&path).unwrap(),
            first,
            "an existing file is reused"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(password_file(&path).is_err(), "a readable file is refused");

        let link = dir.path().join("link.password");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(password_file(&link).is_err(), "a symlink is refused");

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(check_password_dir(dir.path()).is_ok());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o770)).unwrap();
        let refused = check_password_dir(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("writable by others"), "{refused}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o702)).unwrap();
        assert!(check_password_dir(dir.path()).is_err());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            check_password_dir(&path).is_err(),
            "a file is not a directory"
        );
    }
}
