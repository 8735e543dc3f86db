//! Names to ids through NSS (`getpwnam_r`, `getgrnam_r`), for the settings that name a
//! user or a group: the readers' `dw_router.trusted_owner`, the agent's `--trusted-owner`
//! and `--answers-group`.

use std::ffi::CString;

/// The uid of user `name` (`getpwnam_r`); `None` when no user has that name.
pub fn uid_of_user(name: &str) -> Option<u32> {
    id_by_name(name, libc::getpwnam_r, |entry: &libc::passwd| entry.pw_uid)
}

/// The gid of group `name`, or `name` itself when it is a number (`getgrnam_r`); `None`
/// when no group has that name.
pub fn gid_of_group(name: &str) -> Option<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Some(gid);
    }
    id_by_name(name, libc::getgrnam_r, |entry: &libc::group| entry.gr_gid)
}

/// getpwnam_r(3)'s and getgrnam_r(3)'s shape: name, entry, buffer, its length, result.
type Lookup<T> = unsafe extern "C" fn(
    *const libc::c_char,
    *mut T,
    *mut libc::c_char,
    libc::size_t,
    *mut *mut T,
) -> libc::c_int;

/// One `*nam_r` lookup, its buffer grown from 4 KiB while the entry does not fit (at most
/// 1 MiB: past that, not found).
fn id_by_name<T>(name: &str, lookup: Lookup<T>, id: fn(&T) -> u32) -> Option<u32> {
    let name = CString::new(name).ok()?;
    let mut buffer = vec![0 as libc::c_char; 4096];
    loop {
        // SAFETY: `T` is a plain C struct (passwd, group), for which zero is a valid bit
        // pattern; the lookup writes into the buffer we own and points `found` at `entry`
        // or sets it to null.
        let mut entry: T = unsafe { std::mem::zeroed() };
        let mut found: *mut T = std::ptr::null_mut();
        let rc = unsafe {
            lookup(
                name.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buffer.len() < 1 << 20 {
            buffer.resize(buffer.len() * 4, 0);
            continue;
        }
        return (rc == 0 && !found.is_null()).then(|| id(&entry));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_looked_up() {
        assert_eq!(uid_of_user("root"), Some(0));
        assert_eq!(uid_of_user("no-such-user-dw"), None);
        assert_eq!(uid_of_user("ro\0ot"), None, "a NUL names nobody");
        assert_eq!(gid_of_group("root"), Some(0));
        assert_eq!(gid_of_group("4242"), Some(4242), "a number needs no lookup");
        assert_eq!(gid_of_group("no-such-group-dw"), None);
    }
}
