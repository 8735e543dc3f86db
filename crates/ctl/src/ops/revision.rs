//! The routing prefix's revision: what `dwctl status` and `--wait` compare each node with.

use std::time::Duration;

use etcd_client::{Client, WatchOptions};

use crate::error::Error;

fn range_end(prefix: &str) -> Vec<u8> {
    dw_etcd::prefix_range_end(prefix.as_bytes())
}

/// The revision of the routing prefix: its last change. The newest `mod_revision` under it
/// is that change unless a delete came later (a delete leaves no key); deletes after it are
/// found by replaying the history from there to the current revision. If that history is
/// compacted or the replay takes more than 2 s, the newest `mod_revision` is used.
///
/// The replay needs to know when it has reached the current revision. A member says so in
/// answer to a progress request; etcd's grpc-proxy never answers them. So the replay
/// watches the smallest range holding both the routing prefix and `nodes_prefix` (`/dw/` by
/// default): the newest write is usually a node report, and its event ends the replay as a
/// progress notification would. Where that range cannot be watched (permissions), the
/// routing prefix alone is.
pub async fn routing_revision(
    client: &mut Client,
    prefix: &str,
    nodes_prefix: &str,
) -> Result<i64, Error> {
    let read = dw_etcd::read_prefix_head(&mut client.kv_client(), prefix).await?;
    let head = i64::try_from(read.revision).unwrap_or(i64::MAX);
    let newest_put = i64::try_from(read.newest_mod_revision).unwrap_or(i64::MAX);
    if newest_put >= head {
        return Ok(newest_put);
    }
    let parent = common_prefix(prefix, nodes_prefix);
    let replay = async {
        if parent.len() > 1
            && parent != prefix
            && let Ok(found) = last_event(client, parent, prefix, newest_put + 1, head).await
        {
            return Ok(found);
        }
        last_event(client, prefix, prefix, newest_put + 1, head).await
    };
    match tokio::time::timeout(Duration::from_secs(2), replay).await {
        Ok(Ok(Some(deleted))) => Ok(deleted.max(newest_put)),
        _ => Ok(newest_put),
    }
}

/// The longest common leading part of two key prefixes, cut after its last `/`.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let same = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    a[..same].rfind('/').map_or("", |slash| &a[..=slash])
}

/// The revision of the last event under `prefix` in `from..=head`, if any, replaying the
/// history of `watched` (which holds `prefix`) until an event or a progress notification
/// at `head` or later.
async fn last_event(
    client: &mut Client,
    watched: &str,
    prefix: &str,
    from: i64,
    head: i64,
) -> Result<Option<i64>, Error> {
    let options = WatchOptions::new()
        .with_range(range_end(watched))
        .with_start_revision(from)
        .with_progress_notify();
    let mut stream = dw_etcd::watch_client(client)
        .watch(watched, Some(options))
        .await?;
    let mut last = None;
    let mut ticker = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            message = stream.message() => {
                let Some(response) = message? else { return Ok(last) };
                if response.canceled() {
                    return Err(Error::Failed(format!(
                        "replaying {watched}: {}",
                        if response.compact_revision() > 0 {
                            "its history is compacted".to_owned()
                        } else {
                            response.cancel_reason().to_owned()
                        }
                    )));
                }
                let mut reached = false;
                for event in response.events() {
                    let Some(kv) = event.kv() else { continue };
                    reached |= kv.mod_revision() >= head;
                    if kv.mod_revision() <= head && kv.key().starts_with(prefix.as_bytes()) {
                        last = Some(kv.mod_revision());
                    }
                }
                let progress = response.events().is_empty() && !response.created();
                if reached || progress && response.header().is_some_and(|h| h.revision() >= head) {
                    return Ok(last);
                }
            }
            _ = ticker.tick() => stream.request_progress().await?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replayed_range_holds_both_prefixes() {
        assert_eq!(common_prefix("/dw/routing/", "/dw/nodes/"), "/dw/");
        assert_eq!(common_prefix("/dw/routing/", "/dw/routing-nodes/"), "/dw/");
        assert_eq!(common_prefix("/a/routing/", "/b/nodes/"), "/");
        assert_eq!(common_prefix("routing/", "nodes/"), "");
        assert_eq!(
            common_prefix("/dw/routing/", "/dw/routing/x/"),
            "/dw/routing/"
        );
    }
}
