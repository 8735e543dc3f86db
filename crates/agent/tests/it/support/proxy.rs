//! A TCP proxy between the agent and etcd that can freeze or cut the traffic.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A TCP proxy in front of one etcd member that can freeze traffic (connections stay
/// open, nothing moves) or cut it (every connection is dropped, new ones are refused).
pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    Freeze,
    Cut,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Proxy {
        let upstream: SocketAddr = upstream.trim_start_matches("http://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let modes = mode.clone();
        tokio::spawn(async move {
            loop {
                let Ok((downstream, _)) = listener.accept().await else {
                    continue;
                };
                if *modes.borrow() == Mode::Cut {
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let _ = downstream.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let (down_read, down_write) = downstream.into_split();
                let (up_read, up_write) = upstream.into_split();
                tokio::spawn(pump(down_read, up_write, modes.subscribe()));
                tokio::spawn(pump(up_read, down_write, modes.subscribe()));
            }
        });
        Proxy { addr, mode }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pass(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    pub fn freeze(&self) {
        self.mode.send_replace(Mode::Freeze);
    }

    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Hold still while frozen; give up when cut.
        if !passing(&mut mode).await {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.changed() => {
                if changed.is_err() { return; }
                continue;
            }
        };
        if !passing(&mut mode).await {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits while traffic is frozen: true once it passes, false when it is cut (or the proxy
/// is gone).
async fn passing(mode: &mut watch::Receiver<Mode>) -> bool {
    loop {
        let current = *mode.borrow_and_update();
        match current {
            Mode::Pass => return true,
            Mode::Cut => return false,
            Mode::Freeze => {
                if mode.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}
