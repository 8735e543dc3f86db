//! What the leading autopilot holds, as `dwctl traffic` and `dwctl origin list` show it:
//! the leader key and the status the leader publishes on its lease
//! (`plan::autopilot::status`, written by `daemons/autopilot.rs`), read at one revision.

use etcd_client::{Client, GetOptions};

use crate::context::Context;
use crate::error::Error;
use crate::plan::autopilot::status::AutopilotView;
use crate::plan::keys::Layout;

/// The leader key's and the status key's values at one revision.
pub async fn read_view(client: &mut Client, layout: &Layout) -> Result<AutopilotView, Error> {
    let leader_key = layout.autopilot_leader();
    let leader = client.get(leader_key.as_str(), None).await?;
    let revision = leader.header().map_or(0, |header| header.revision());
    let status = client
        .get(
            layout.autopilot_status(),
            Some(GetOptions::new().with_revision(revision)),
        )
        .await?;
    let text = |response: &etcd_client::GetResponse| {
        response
            .kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
    };
    Ok(AutopilotView::from_values(
        text(&leader).as_deref(),
        text(&status).as_deref(),
    ))
}

/// [`read_view`] on a connection of its own; a failure (a role without the grant, etcd's
/// error) is the view's `Unreadable`, never the command's: what the autopilot holds is one
/// line of the report.
pub async fn read(context: &Context) -> AutopilotView {
    let read = async {
        let mut client = context.etcd.connect().await?;
        read_view(&mut client, &context.layout).await
    };
    read.await
        .unwrap_or_else(|error: Error| AutopilotView::Unreadable {
            why: error.to_string(),
        })
}
