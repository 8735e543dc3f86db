//! `dw-agent`: flags, logging and signals around [`dw_agent::run`].

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use dw_agent::{Cli, LogFormat};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format, &cli.log);
    if cli.prepare_dirs {
        return match cli.prepare_answers_dirs() {
            Ok(done) => {
                done.iter().for_each(|line| println!("{line}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    match serve(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(cli: Cli) -> anyhow::Result<()> {
    let config = cli.into_config()?;
    // One thread is plenty for one watch stream, and keeps the resident size small.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let shutdown = shutdown_signal().context("cannot install signal handlers")?;
        dw_agent::run(config, shutdown)
            .await
            .map_err(anyhow::Error::from)
    });
    // Do not wait for a stuck DNS lookup or the like: the snapshot is already safe.
    runtime.shutdown_timeout(Duration::from_millis(200));
    result
}

/// Completes on SIGTERM or SIGINT. Installed before the agent starts, so an early signal
/// is not lost. SIGHUP (a closed terminal, or a reflexive `kill -HUP`) would otherwise kill
/// the agent silently: it is logged and ignored, since the agent has no configuration file
/// to re-read and logs to stderr, with nothing to reopen.
fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    Ok(async move {
        loop {
            tokio::select! {
                _ = terminate.recv() => return tracing::info!("SIGTERM received"),
                _ = interrupt.recv() => return tracing::info!("SIGINT received"),
                _ = hangup.recv() => tracing::info!(
                    "SIGHUP received and ignored: there is no configuration to reload and \
                     no log file to reopen (logs go to stderr); restart to change flags"
                ),
            }
        }
    })
}

fn init_logging(format: LogFormat, filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}
