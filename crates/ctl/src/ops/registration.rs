//! `origin forget` through the one write path: the registration record read, then deleted
//! in a guarded transaction with its audit record (`--dry-run` previews it), exempt from
//! the capacity guard as a write that moves no load.

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{Entry, State};
use crate::ops::run::{PredictInputs, Predictor, Ran, StatesGuard, run_checked};
use crate::plan::registration::{ForgetRequest, plan_forget};

/// Forgets `request.origin` (or previews it with `dry_run`): its registration record is
/// deleted, guarded on the revision it was read at, with an audit record.
pub async fn forget(
    context: &Context,
    request: &ForgetRequest,
    dry_run: bool,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
) -> Result<Ran, Error> {
    let mut client = context.etcd.connect().await?;
    let key = context.layout.registration(&request.origin);
    let registration = dw_etcd::kv_client(&client)
        .get(key.as_str(), None)
        .await?
        .kvs()
        .first()
        .map(|kv| Entry {
            raw: kv.value().to_vec(),
            mod_revision: kv.mod_revision(),
        });
    let title = format!("origin forget {}", request.origin);
    let predictor = Predictor::new(context, &title, guard).await?;
    let layout = context.layout.clone();
    let plan = |_: &State, _: Result<&dw_capacity::Traffic, String>| {
        Ok(plan_forget(&layout, registration.as_ref(), request)?)
    };
    run_checked(context, &mut client, predictor, dry_run, plan).await
}
