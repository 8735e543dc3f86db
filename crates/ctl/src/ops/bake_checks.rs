//! The bake's gates that leave dwctl: a round of HTTP probes of the staged origins, and
//! one run of the `--check` command.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::ops::probe::{ProbeTarget, probe};
use crate::plan::rollout::MAX_CHECK_OUTPUT;

/// Probes every origin once, all at once: origin → the health checker's verdict.
pub async fn probe_round(
    probes: &BTreeMap<String, String>,
    timeout: Duration,
) -> Vec<(String, Result<u16, String>)> {
    let mut round = tokio::task::JoinSet::new();
    for (origin, url) in probes {
        let origin = origin.clone();
        let target = ProbeTarget::parse(url);
        round.spawn(async move {
            let result = match target {
                Ok(target) => probe(&target, timeout).await,
                Err(reason) => Err(reason),
            };
            (origin, result)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = round.join_next().await {
        if let Ok(result) = joined {
            results.push(result);
        }
    }
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

/// Runs `sh -c COMMAND` with `env` added, stdin closed, its output kept (the tail, at most
/// [`MAX_CHECK_OUTPUT`] bytes) and never printed; killed after `timeout`. `Err` says why it
/// failed: its exit status (or signal, or the time-out) and the end of its output.
pub async fn run_check(
    command: &str,
    env: &[(&str, String)],
    timeout: Duration,
) -> Result<(), String> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("cannot run sh: {error}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let collect = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            if let Some(pipe) = stdout.as_mut() {
                let _ = read_tail(pipe, &mut out).await;
            }
        };
        let read_err = async {
            if let Some(pipe) = stderr.as_mut() {
                let _ = read_tail(pipe, &mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, out, err)
    };
    match tokio::time::timeout(timeout, collect).await {
        Err(_) => Err(format!(
            "the check did not finish within {timeout:?} (killed)"
        )),
        Ok((Err(error), _, _)) => Err(format!("cannot wait for the check: {error}")),
        Ok((Ok(status), out, err)) if status.success() => {
            let _ = (out, err);
            Ok(())
        }
        Ok((Ok(status), out, err)) => {
            let output = if err.is_empty() { out } else { err };
            let text = String::from_utf8_lossy(&output);
            let text = text.trim();
            let verdict = match status.code() {
                Some(code) => format!("the check exited {code}"),
                None => "the check was killed by a signal".to_owned(),
            };
            Err(if text.is_empty() {
                verdict
            } else {
                format!("{verdict}: {text}")
            })
        }
    }
}

/// Reads `pipe` to its end, keeping the last [`MAX_CHECK_OUTPUT`] bytes in `kept`.
async fn read_tail(
    pipe: &mut (impl AsyncReadExt + Unpin),
    kept: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut buffer = [0u8; 4096];
    loop {
        let read = pipe.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        kept.extend_from_slice(&buffer[..read]);
        if kept.len() > MAX_CHECK_OUTPUT {
            let cut = kept.len() - MAX_CHECK_OUTPUT;
            kept.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_check_passes_on_exit_0_and_fails_with_its_status_and_output() {
        let second = Duration::from_secs(5);
        assert_eq!(run_check("exit 0", &[], second).await, Ok(()));
        let failed = run_check("echo 'p99 too high' >&2; exit 3", &[], second)
            .await
            .unwrap_err();
        assert_eq!(failed, "the check exited 3: p99 too high");
        let env = [("DW_ROLLOUT_STEP", "2".to_string())];
        assert_eq!(
            run_check("test \"$DW_ROLLOUT_STEP\" = 2", &env, second).await,
            Ok(())
        );
        let slow = run_check("sleep 5", &[], Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(slow.contains("did not finish"), "{slow}");
        let long = run_check("head -c 5000 /dev/zero | tr '\\0' x; exit 1", &[], second)
            .await
            .unwrap_err();
        assert!(long.len() < MAX_CHECK_OUTPUT + 40, "{}", long.len());
    }
}
