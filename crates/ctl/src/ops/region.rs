//! `region get|list|set|delete` against etcd: one region's key read on its own, every
//! region at one revision, and a region written or deleted through the one write path.

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{Changes, Entry, State, read_state};
use crate::ops::key::read_entry;
use crate::ops::run::{WriteGuard, run_plan};
use crate::output::Outcome;
use crate::plan::value::RegionValue;

/// The stored value of region `geo` (one key, not the whole prefix); `None` when it does
/// not exist.
pub async fn get(context: &Context, geo: &str) -> Result<Option<Entry>, Error> {
    let mut client = context.etcd.connect().await?;
    read_entry(&mut client, &context.layout.region(geo)).await
}

/// Every region (with the rest of the routing state) at one revision.
pub async fn list(context: &Context) -> Result<State, Error> {
    let mut client = context.etcd.connect().await?;
    read_state(&mut client, &context.layout).await
}

/// `region set`: writes `value` as region `geo`.
pub async fn set(
    context: &Context,
    geo: &str,
    value: &RegionValue,
    guard: &WriteGuard,
) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let title = format!("region {geo} set");
    run_plan(context, &mut client, &title, false, guard, |_| {
        Ok(Changes {
            regions: [(geo.to_owned(), Some(value.clone()))].into(),
            ..Changes::default()
        })
    })
    .await
}

/// `region delete`: deletes region `geo`; not found when there is none.
pub async fn delete(context: &Context, geo: &str, guard: &WriteGuard) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let title = format!("region {geo} deleted");
    run_plan(context, &mut client, &title, false, guard, |state| {
        if !state.regions.contains_key(geo) {
            return Err(Error::NotFound(format!("region `{geo}`")));
        }
        Ok(Changes {
            regions: [(geo.to_owned(), None)].into(),
            ..Changes::default()
        })
    })
    .await
}
