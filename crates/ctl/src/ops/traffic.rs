//! `traffic`'s etcd read: the routing state and the origins' listing, each at one
//! revision, for the report beside Prometheus' counts.

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{State, read_state};
use crate::ops::origin::{OriginListing, list_origins};

/// The routing state and the origins as etcd knows them.
pub async fn read_etcd(context: &Context) -> Result<(State, OriginListing), Error> {
    let mut client = context.etcd.connect().await?;
    let state = read_state(&mut client, &context.layout).await?;
    let listing = list_origins(&mut client, &context.layout).await?;
    Ok((state, listing))
}
