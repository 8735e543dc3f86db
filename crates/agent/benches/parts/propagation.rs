//! Commit-to-rename propagation through one in-process agent: isolated changes (the
//! target's case), back-to-back changes (held by the coalescing window), and isolated
//! changes while `/metrics` is scraped nonstop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// How `propagation` spaces its writes.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Spacing {
    /// Each write waits out the agent's coalescing window after the previous
    /// publication: every write is the first change after a quiet spell (a drain), the
    /// case the target is about.
    Isolated,
    /// Each write is sent as soon as the previous one is published: every write falls
    /// inside the window and waits for its end (`--coalesce-window`, 10 ms by default).
    BackToBack,
    /// As `Isolated`, while another thread scrapes the agent's `/metrics` back to back
    /// (each scrape a new connection): what rendering the metrics costs publication.
    Scraped,
}

/// How long a bench waits after a publication so that its next write is an isolated
/// change: the agent's coalescing window, and 2 ms more.
pub(crate) fn quiet_spell(config: &Config) -> Duration {
    config.timing.coalesce_window + Duration::from_millis(2)
}

/// GET /metrics from `addr` back to back, one connection each, until `stop` is set; the
/// scrapes answered 200. Blocking, on a thread of its own (not the agent's runtime).
fn scrape_until(addr: std::net::SocketAddr, stop: &AtomicBool) -> u64 {
    use std::io::{Read, Write};
    let mut answered = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut body = Vec::new();
        let request = b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
        if stream.write_all(request).is_ok()
            && stream.read_to_end(&mut body).is_ok()
            && body.starts_with(b"HTTP/1.1 200")
        {
            answered += 1;
        }
    }
    answered
}

/// One agent; sequential writes; time from sending each put until its revision's file
/// was renamed into place.
pub(crate) async fn propagation(
    cluster: &Cluster,
    dir: &std::path::Path,
    keys: usize,
    writes: usize,
    spacing: Spacing,
) -> Row {
    let mut client = emptied(cluster).await;
    load_regions(&mut client, keys).await;
    let snapshot = dir.join(format!("propagation-{keys}.json"));
    let mut config = bench_config(cluster.endpoints(), &snapshot);
    let quiet = quiet_spell(&config);
    let window = config.timing.coalesce_window;
    let scraped = (spacing == Spacing::Scraped)
        .then(|| std::net::SocketAddr::from(([127, 0, 0, 1], free_port())));
    config.metrics_addr = scraped;
    let mut agent = RunningAgent::start(config).await;
    let (now, _) = etcd_state(&mut client, 0).await;
    agent.published(now).await;
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = scraped.map(|addr| {
        let stop = stop.clone();
        std::thread::spawn(move || scrape_until(addr, &stop))
    });

    let mut latencies = Vec::with_capacity(writes);
    let mut acks = Vec::with_capacity(writes);
    for i in 0..writes + 50 {
        let key = format!("{PREFIX}region/G{:04}", i % keys.max(1));
        let sent = Instant::now();
        let revision = put(&mut client, &key, region(i + 10_000)).await;
        let acked = sent.elapsed();
        let publication = agent.published(revision).await;
        if i >= 50 {
            latencies.push(publication.renamed_at.saturating_duration_since(sent));
            acks.push(acked);
        }
        if spacing != Spacing::BackToBack {
            tokio::time::sleep(quiet).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let scrapes = scraper.map(|thread| thread.join().unwrap_or(0));
    agent.stop().await;
    latencies.sort();
    acks.sort();
    let (label, raw) = match spacing {
        Spacing::Isolated => (
            format!("each after a quiet spell of {} ms", quiet.as_millis()),
            "",
        ),
        Spacing::BackToBack => (
            format!(
                "back to back, each inside the {} ms coalescing window",
                window.as_millis()
            ),
            "-back-to-back",
        ),
        Spacing::Scraped => (
            format!(
                "each after a quiet spell of {} ms, while /metrics was scraped back to back: \
                 {} scrapes answered",
                quiet.as_millis(),
                thousands(scrapes.unwrap_or(0) as usize)
            ),
            "-scraped",
        ),
    };
    save_raw(&format!("propagation-{keys}-keys{raw}-us"), &latencies);
    let target = match spacing {
        Spacing::Isolated | Spacing::Scraped => {
            Some(percentile(&latencies, 0.99) <= Duration::from_millis(5))
        }
        Spacing::BackToBack => None,
    };
    Row {
        name: format!(
            "Propagation, put sent → snapshot renamed, {} region keys ({} writes, {label})",
            thousands(keys),
            thousands(writes)
        ),
        result: format!(
            "p50 {}, p99 {}, max {} (put ack p50 {})",
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
            ms(*latencies.last().unwrap()),
            ms(percentile(&acks, 0.5)),
        ),
        target: if target.is_some() {
            "p99 ≤ 5 ms"
        } else {
            "- (held to the window's end by design)"
        },
        met: target,
    }
}
