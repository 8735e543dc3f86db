//! Who this node says it is in its report: the node id (`--node-id`, the host name by
//! default) and its labels (`--labels`), checked at start.

use std::collections::BTreeMap;

/// A node id: 1 to 128 characters of letters, digits, `.`, `_`, `-` (host names fit).
pub fn check_node_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 128 {
        return Err(format!("--node-id {id:?} must be 1 to 128 characters long"));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "--node-id {id:?} contains {bad:?}: use letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// One label: a name of 1 to 63 of `[A-Za-z0-9._/-]`, a value of at most 128 of `[A-Za-z0-9._:/-]`.
pub(crate) fn check_label(key: &str, value: &str) -> Result<(), String> {
    let key_ok = !key.is_empty()
        && key.len() <= 63
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    if !key_ok {
        return Err(format!(
            "--labels: label name {key:?} must be 1 to 63 letters, digits, '.', '_', '-' or '/'"
        ));
    }
    let value_ok = value.len() <= 128
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/'));
    if !value_ok {
        return Err(format!(
            "--labels: the value of {key} ({value:?}) must be at most 128 letters, digits, \
             '.', '_', '-', ':' or '/'"
        ));
    }
    Ok(())
}

/// Parses `k=v,k2=v2` (empty text: no labels). Names must be unique.
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("--labels: {item:?} is not key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        check_label(key, value)?;
        if labels.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(format!("--labels: {key} is given twice"));
        }
    }
    Ok(labels)
}

/// The host name (`/proc/sys/kernel/hostname`), the default node id.
pub fn host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}
