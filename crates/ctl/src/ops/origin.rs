//! Origins as etcd knows them (`origin list`, `traffic`, `rebalance`): live keys on their
//! leases, registration markers, drain records and capacities, read at one revision.

use std::collections::{BTreeMap, BTreeSet};

use etcd_client::Client;

use crate::context::Context;
use crate::error::Error;
use crate::ops::lease::lease_ttl;
use crate::plan::capacity::{Capacity, DEFAULT_HEADROOM, Headroom};
use crate::plan::drain_record::DrainRecord;
use crate::plan::keys::{Layout, strip};

/// Origins as etcd knows them at one revision.
#[derive(Debug, Clone)]
pub struct OriginListing {
    /// The revision of the listing.
    pub revision: i64,
    /// id → (value, lease).
    pub live: BTreeMap<String, (Vec<u8>, i64)>,
    /// Ids with a registration marker.
    pub registered: BTreeSet<String>,
    /// Ids with a drain record (records that do not parse are in `malformed_drains`).
    pub drains: BTreeMap<String, DrainRecord>,
    /// Ids whose drain record does not parse, with why (`dwctl drain --repair ID`).
    pub malformed_drains: BTreeMap<String, String>,
    /// id → capacity, answers per second (`dwctl origin capacity`).
    pub capacities: BTreeMap<String, f64>,
    /// Ids whose capacity record does not parse, with why.
    pub malformed_capacities: BTreeMap<String, String>,
    /// The guard's headroom (its default when none is set).
    pub headroom: f64,
    /// Why the capacities could not be read (a role without the grant), when so.
    pub capacities_unreadable: Option<String>,
}

impl Default for OriginListing {
    /// Nothing listed, the default headroom.
    fn default() -> Self {
        OriginListing {
            revision: 0,
            live: BTreeMap::new(),
            registered: BTreeSet::new(),
            drains: BTreeMap::new(),
            malformed_drains: BTreeMap::new(),
            capacities: BTreeMap::new(),
            malformed_capacities: BTreeMap::new(),
            headroom: DEFAULT_HEADROOM,
            capacities_unreadable: None,
        }
    }
}

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
