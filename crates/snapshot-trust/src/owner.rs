//! Whose files are trusted: the readers' `dw_router.trusted_owner`, the agent's
//! `--trusted-owner`.

use crate::names::uid_of_user;

/// Whose snapshot files are trusted, besides root's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustedOwner {
    /// Not set: the owner of the file's directory. A sticky shared directory on the way
    /// then only admits root's entries.
    Default,
    /// This uid.
    Uid(u32),
    /// Set to a name that names no user: every file is refused, with this message.
    Unknown(String),
}

impl TrustedOwner {
    /// Reads a setting: empty, a numeric uid, or a user name (looked up with
    /// `getpwnam_r`, through NSS; a numeric uid needs no lookup).
    pub fn parse(setting: &str) -> TrustedOwner {
        let setting = setting.trim();
        if setting.is_empty() {
            return TrustedOwner::Default;
        }
        if let Ok(uid) = setting.parse::<u32>() {
            return TrustedOwner::Uid(uid);
        }
        match uid_of_user(setting) {
            Some(uid) => TrustedOwner::Uid(uid),
            None => TrustedOwner::Unknown(format!("the trusted owner {setting:?} names no user")),
        }
    }

    /// The rule in force, in words (phpinfo, the agent's start-up line).
    pub fn describe(&self) -> String {
        match self {
            TrustedOwner::Default => "root or the directory's owner".into(),
            TrustedOwner::Uid(uid) => format!("root or uid {uid}"),
            TrustedOwner::Unknown(message) => format!("nobody ({message})"),
        }
    }

    /// Whether `uid` owns trusted files and directories; `directory_uid` is the owner of
    /// the file's directory (trusted by default).
    pub(crate) fn trusts(&self, uid: u32, directory_uid: u32) -> bool {
        uid == 0
            || match self {
                TrustedOwner::Default => uid == directory_uid,
                TrustedOwner::Uid(trusted) => uid == *trusted,
                TrustedOwner::Unknown(_) => false,
            }
    }

    /// Whether `uid` may own an entry of a sticky directory others can write: root, or a
    /// set trusted owner (by default whoever got there first would be trusted).
    pub(crate) fn trusts_in_shared(&self, uid: u32) -> bool {
        uid == 0 || matches!(self, TrustedOwner::Uid(trusted) if uid == *trusted)
    }

    /// "root or …", for messages.
    pub(crate) fn whom(&self, directory_uid: u32) -> String {
        match self {
            TrustedOwner::Default => format!("root or the directory's owner {directory_uid}"),
            TrustedOwner::Uid(uid) => format!("root or the trusted owner {uid}"),
            TrustedOwner::Unknown(message) => message.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_parses() {
        assert_eq!(TrustedOwner::parse(""), TrustedOwner::Default);
        assert_eq!(TrustedOwner::parse(" 65534 "), TrustedOwner::Uid(65534));
        assert_eq!(TrustedOwner::parse("root"), TrustedOwner::Uid(0));
        assert!(matches!(
            TrustedOwner::parse("no-such-user-dw"),
            TrustedOwner::Unknown(_)
        ));
    }
}
