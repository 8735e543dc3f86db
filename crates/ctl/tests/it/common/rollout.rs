//! Scaffolding of the `rollout` tests: the file every rollout stages, a rollout's command
//! line, its JSON events, and what etcd holds of a rollout afterwards.

use serde_json::{Value, json};

use super::fleet::nodes;
use super::{CONTROL, DE, Etcd, PREFIX, Run, seed};

/// Writes the file every rollout here stages (DE moves to fra-a and ams-a): its path.
pub fn de_file(etcd: &Etcd) -> String {
    let path = etcd.data_dir.join("de.json");
    let body = json!({"regions": {"DE": {"shard": "eu-9", "origins": ["fra-a", "ams-a"],
        "weight": {"fra-a": 60, "ams-a": 40}}}});
    std::fs::write(&path, body.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// An etcd with DE at its `DE` value, `count` node ids, and the file of [`de_file`].
pub async fn setup(count: usize) -> (Etcd, Vec<String>, String) {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let file = de_file(&etcd);
    (etcd, nodes(count), file)
}

/// `rollout FILE --steps STEPS --bake BAKE --id ID EXTRA...`.
pub fn rollout_argv<'a>(
    file: &'a str,
    id: &'a str,
    steps: &'a str,
    bake: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut argv = vec![
        "rollout", file, "--steps", steps, "--bake", bake, "--id", id,
    ];
    argv.extend_from_slice(extra);
    argv
}

/// Runs [`rollout_argv`] with dwctl's text output.
pub fn rollout(etcd: &Etcd, file: &str, id: &str, steps: &str, bake: &str, extra: &[&str]) -> Run {
    etcd.dwctl(&rollout_argv(file, id, steps, bake, extra))
}

/// Runs [`rollout_argv`] with `--output json` (one event a line).
pub fn rollout_json(
    etcd: &Etcd,
    file: &str,
    id: &str,
    steps: &str,
    bake: &str,
    extra: &[&str],
) -> Run {
    let mut argv = vec!["--output", "json"];
    argv.extend(rollout_argv(file, id, steps, bake, extra));
    etcd.dwctl(&argv)
}

/// The JSON events (one object a line) a run printed.
pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The events called `name`.
pub fn named<'e>(events: &'e [Value], name: &str) -> Vec<&'e Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

/// The steps (1-based) of the run's `step` events, in order.
pub fn steps(events: &[Value]) -> Vec<i64> {
    named(events, "step")
        .iter()
        .map(|e| e["step"].as_i64().unwrap())
        .collect()
}

/// The rollout's progress record.
pub async fn record(etcd: &Etcd, id: &str) -> Option<Value> {
    etcd.get_json(&format!("{CONTROL}rollouts/{id}")).await
}

/// The stage key's value, while the stage is open.
pub async fn stage_of(etcd: &Etcd, id: &str) -> Option<Value> {
    etcd.get_json(&format!("{PREFIX}stage/{id}")).await
}

/// The stage's last audit record (`<control>stages/<id>`).
pub async fn audit_of(etcd: &Etcd, id: &str) -> Option<Value> {
    etcd.get_json(&format!("{CONTROL}stages/{id}")).await
}
