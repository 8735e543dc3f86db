//! Origins as etcd knows them (`origin list`, `traffic`, `rebalance`): live keys on their
//! leases, registration markers, drain records and capacities, read at one revision.

use std::collections::BTreeMap;

use etcd_client::Client;

use crate::context::Context;
use crate::error::Error;
use crate::ops::lease::lease_ttl;
use crate::plan::capacity::{Capacity, Headroom};
use crate::plan::drain_record::DrainRecord;
use crate::plan::keys::{Layout, strip};
pub use crate::plan::origin_listing::OriginListing;

/// Lists live, registered and drained origins at one revision.
pub async fn list_origins(client: &mut Client, layout: &Layout) -> Result<OriginListing, Error> {
    let mut kv = dw_etcd::kv_client(client);
    let page = dw_etcd::DEFAULT_PAGE_KEYS;
    let origins =
        dw_etcd::read_prefix_pages(&mut kv, layout.origins().as_bytes(), None, page).await?;
    let revision = Some(origins.revision);
    let registrations =
        dw_etcd::read_prefix_pages(&mut kv, layout.registrations().as_bytes(), revision, page)
            .await?;
    let drains =
        dw_etcd::read_prefix_pages(&mut kv, layout.drains().as_bytes(), revision, page).await?;
    let capacities = crate::ops::commit::read_capacities(&mut kv, layout, revision).await?;
    let mut listing = OriginListing {
        revision: origins.revision,
        ..OriginListing::default()
    };
    match capacities {
        Ok((records, headroom)) => {
            for kv in &records {
                let Some(id) = strip(kv.key(), &layout.capacities()).filter(|id| !id.is_empty())
                else {
                    continue;
                };
                match Capacity::parse(id, kv.value()) {
                    Ok(capacity) => {
                        listing
                            .capacities
                            .insert(id.to_string(), capacity.answers_per_s);
                        if !capacity.home.is_empty() {
                            listing.homes.insert(id.to_string(), capacity.home);
                        }
                    }
                    Err(error) => {
                        listing
                            .malformed_capacities
                            .insert(id.to_string(), error.to_string());
                    }
                }
            }
            if let Some(Ok(record)) = headroom.map(|kv| Headroom::parse(kv.value())) {
                listing.headroom = record.headroom;
            }
        }
        Err(why) => listing.capacities_unreadable = Some(why),
    }
    let named = |kvs: &[etcd_client::KeyValue], prefix: String| {
        kvs.iter()
            .filter_map(move |kv| {
                strip(kv.key(), &prefix)
                    .filter(|id| !id.is_empty())
                    .map(|id| (id.to_string(), kv.clone()))
            })
            .collect::<Vec<_>>()
    };
    for (id, kv) in named(&origins.kvs, layout.origins()) {
        listing.live.insert(id, (kv.value().to_vec(), kv.lease()));
    }
    listing.registered = named(&registrations.kvs, layout.registrations())
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    for (id, kv) in named(&drains.kvs, layout.drains()) {
        match DrainRecord::parse(&id, kv.value()) {
            Ok(record) => {
                listing.drains.insert(id, record);
            }
            Err(error) => {
                listing.malformed_drains.insert(id, error.to_string());
            }
        }
    }
    Ok(listing)
}

/// `origin list`'s read: the listing, and the remaining time-to-live (seconds) of each live
/// origin's lease (`None`: on no lease, or etcd did not say).
pub async fn list_with_ttls(
    context: &Context,
) -> Result<(OriginListing, BTreeMap<String, Option<i64>>), Error> {
    let mut client = context.etcd.connect().await?;
    let listing = list_origins(&mut client, &context.layout).await?;
    let mut ttls = BTreeMap::new();
    for (id, (_, lease)) in &listing.live {
        let ttl = match *lease {
            0 => None,
            lease => lease_ttl(&mut client, lease).await,
        };
        ttls.insert(id.clone(), ttl);
    }
    Ok((listing, ttls))
}
