//! `health --probe ORIGIN=URL ...`: the flags checked and turned into a
//! [`HealthConfig`], then the daemon (`crate::daemons::health`) runs until stopped.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use crate::cli::HealthArgs;
use crate::context::Context;
use crate::daemons::health::{HealthConfig, run};
use crate::error::{Error, FieldError};
use crate::ops::probe::ProbeTarget;
use crate::output::Outcome;
use crate::plan::clock::operator;
use crate::plan::drain::check_origin_name;
use crate::shutdown::Shutdown;

/// Runs `dwctl health`: every malformed flag named at once (exit 2), then the daemon.
pub async fn command(
    context: &Context,
    args: HealthArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let mut errors = Vec::new();
    let mut probes = BTreeMap::new();
    for (index, entry) in args.probes.iter().enumerate() {
        let field = format!("probe[{index}]");
        let Some((origin, url)) = entry.split_once('=') else {
            errors.push(FieldError::new(
                field,
                format!("`{entry}`: expected ORIGIN=URL"),
            ));
            continue;
        };
        if let Err(crate::plan::Error::Invalid(found)) = check_origin_name(&field, origin) {
            errors.extend(found);
            continue;
        }
        match ProbeTarget::parse(url) {
            Ok(target) => {
                if probes.insert(origin.to_string(), target).is_some() {
                    errors.push(FieldError::new(
                        field,
                        format!("`{origin}` is probed twice"),
                    ));
                }
            }
            Err(reason) => errors.push(FieldError::new(field, reason)),
        }
    }
    let seconds = |field: &str, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(Duration::from_secs_f64(value))
        } else {
            Err(FieldError::new(
                field,
                "must be a positive number of seconds",
            ))
        }
    };
    let interval = seconds("interval", args.interval)
        .map_err(|error| errors.push(error))
        .ok();
    let timeout = seconds("probe-timeout", args.probe_timeout)
        .map_err(|error| errors.push(error))
        .ok();
    if !(0.0..=1.0).contains(&args.max_drained_fraction) {
        errors.push(FieldError::new(
            "max-drained-fraction",
            "must be between 0 and 1",
        ));
    }
    let (Some(interval), Some(timeout), true) = (interval, timeout, errors.is_empty()) else {
        // Every one of these is a malformed flag: a usage error (exit 2), all named at once.
        let flags: Vec<String> = errors
            .iter()
            .map(|error| format!("--{}: {}", error.field, error.reason))
            .collect();
        return Err(Error::Usage(flags.join("; ")));
    };
    let config = HealthConfig {
        etcd: context.etcd.clone(),
        layout: context.layout.clone(),
        retry: context.retry.clone(),
        by: format!("health:{}", operator()),
        probes,
        interval,
        timeout,
        fail_after: args.fail_after,
        recover_after: args.recover_after,
        max_drained_fraction: args.max_drained_fraction,
        traffic: args.traffic.to_source(),
        on_fail: args.on_fail,
    };
    run(&config, context.reporter(), shutdown).await?;
    Ok(Outcome {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
