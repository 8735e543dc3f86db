//! Who listens on the purge endpoint's port (docs/agent.md, "Who may receive the secret"):
//! the agent sends its bearer secret on a connection only when the socket that took the
//! connection is a *listening* socket root created, and that socket listened throughout
//! the connect.
//!
//! The owner the kernel lists for a listening socket is the uid of the process that
//! created it, and it never changes. LiteSpeed and nginx create their listeners as root
//! before their workers drop to an unprivileged user. The owner of an *accepted* socket is
//! no help: Linux gives it the uid of the process that accepted it (an nginx worker runs as
//! `nobody`), so it says nothing about whose listener the connection came through.
//!
//! Which listener takes a connection to `D:P`: the kernel lets no two sockets of different
//! owners listen on overlapping addresses of one port (bind() fails with `EADDRINUSE`;
//! `SO_REUSEPORT` groups only sockets of one owner). For an IPv4 `D`, `D:P`, `0.0.0.0:P`,
//! `[::ffff:D]:P` and a dual-stack `[::]:P` all overlap; for an IPv6 `D`, `[D]:P` and
//! `[::]:P`. So if one root listener that surely takes `D:P` ([`covers`]) is in the kernel's
//! table before connect() and still there, the same socket (inode), after it, no socket of
//! anyone else could listen for `D:P` in between, and the connection went to root's
//! listener. A process of another user holding the port (before the web server started,
//! while it was down, on the wildcard or on `D`) is then the only listener for `D:P`: it
//! gets a TCP connection and no byte. A `[::]:P` listener alone is not enough for an IPv4
//! `D`: the table does not say whether it is dual-stack, so a user could listen on
//! `0.0.0.0:P` beside a v6-only one. Connect to the address the web server names.
//!
//! ```text
//!   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//!    0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 60138 ...
//! ```
//!
//! The parser and [`judge`] read bytes and do no I/O; [`listeners`] reads the files.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The only owner whose listening socket may receive the secret.
pub(crate) const TRUSTED_OWNER: u32 = 0;
/// The most bytes of one socket table read; a larger table is an error (not cut: a cut
/// table could miss the listener). A busy node's table is far smaller.
pub(crate) const MAX_TABLE_BYTES: u64 = 64 * 1024 * 1024;
/// The state of a listening socket in the kernel's tables (`TCP_LISTEN`).
const LISTEN: &str = "0A";

/// A listening socket of the kernel's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listener {
    /// Its local address (an IPv4-mapped IPv6 address stays IPv6 here).
    pub(crate) address: SocketAddr,
    /// The uid of the process that created it.
    pub(crate) uid: u32,
    /// Its inode: the same socket has the same inode.
    pub(crate) inode: u64,
}

/// Whether a socket listening on `listener` takes connections to `server`: `Some(true)`
/// surely, `Some(false)` never, `None` when the table cannot tell (`[::]` for an IPv4
/// `server`: dual-stack or v6-only).
pub(crate) fn covers(listener: SocketAddr, server: SocketAddr) -> Option<bool> {
    if listener.port() != server.port() {
        return Some(false);
    }
    match (listener.ip(), canonical(server.ip())) {
        (IpAddr::V4(l), IpAddr::V4(s)) => Some(l == s || l.is_unspecified()),
        (IpAddr::V6(l), IpAddr::V4(s)) => {
            if l.to_ipv4_mapped() == Some(s) {
                Some(true)
            } else if l.is_unspecified() {
                None
            } else {
                Some(false)
            }
        }
        (IpAddr::V6(l), IpAddr::V6(s)) => Some(l == s || l.is_unspecified()),
        (IpAddr::V4(_), IpAddr::V6(_)) => Some(false),
    }
}

/// Ok when a connection made to `server` between reading `before` and `after` (the
/// listening sockets of its port) went to a listener of [`TRUSTED_OWNER`]; otherwise why
/// the secret must not be sent on it.
pub(crate) fn judge(
    server: SocketAddr,
    before: &[Listener],
    after: &[Listener],
) -> Result<(), String> {
    let sure = |listeners: &[Listener]| -> Vec<Listener> {
        listeners
            .iter()
            .filter(|l| covers(l.address, server) == Some(true))
            .copied()
            .collect()
    };
    let (sure_before, sure_after) = (sure(before), sure(after));
    if let Some(other) = sure_before
        .iter()
        .chain(&sure_after)
        .find(|l| l.uid != TRUSTED_OWNER)
    {
        return Err(format!(
            "the socket listening on {} for {server} belongs to uid {}, not root: not sending the \
             secret (another process holds the web server's port?)",
            other.address, other.uid
        ));
    }
    if sure_before
        .iter()
        .any(|b| sure_after.iter().any(|a| a.inode == b.inode))
    {
        return Ok(());
    }
    if sure_before.is_empty() && sure_after.is_empty() {
        let ambiguous = before
            .iter()
            .chain(after)
            .find(|l| covers(l.address, server).is_none());
        return Err(match ambiguous {
            Some(wildcard) => format!(
                "only {} (uid {}) listens for {server}, and the kernel's table does not say \
                 whether it takes IPv4: not sending the secret (give the purge URL as \
                 http://[::1]:{}/..., or have the web server listen on {})",
                wildcard.address,
                wildcard.uid,
                server.port(),
                server.ip()
            ),
            None => format!(
                "no socket listens for {server} in the kernel's socket table (another network \
                 namespace?): not sending the secret"
            ),
        });
    }
    Err(format!(
        "the socket listening for {server} changed while the agent connected (the web server \
         restarting?): not sending the secret"
    ))
}

/// The listening sockets of `port` in this network namespace (`/proc/net/tcp` and
/// `/proc/net/tcp6`; a missing table, as tcp6 without IPv6, lists none).
pub(crate) fn listeners(port: u16) -> std::io::Result<Vec<Listener>> {
    use std::io::Read;
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let mut bytes = Vec::new();
        match std::fs::File::open(table) {
            Ok(file) => {
                file.take(MAX_TABLE_BYTES + 1).read_to_end(&mut bytes)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
        if bytes.len() as u64 > MAX_TABLE_BYTES {
            return Err(std::io::Error::other(format!(
                "{table} is over {MAX_TABLE_BYTES} bytes"
            )));
        }
        found.extend(parse_listeners(&bytes, port));
    }
    Ok(found)
}

/// The listening sockets (state `0A`) of `port` in a table's bytes. Lines that do not
/// parse are skipped.
pub(crate) fn parse_listeners(table: &[u8], port: u16) -> Vec<Listener> {
    let text = String::from_utf8_lossy(table);
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let _slot = fields.next()?;
            let local = parse_address(fields.next()?)?;
            let _remote = fields.next()?;
            if fields.next()? != LISTEN || local.port() != port {
                return None;
            }
            // tx:rx, tr:when, retrnsmt, then uid, timeout, inode
            let uid = fields.nth(3)?.parse::<u32>().ok()?;
            let inode = fields.nth(1)?.parse::<u64>().ok()?;
            Some(Listener {
                address: local,
                uid,
                inode,
            })
        })
        .collect()
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `0100007F:1F90` (IPv4) or 32 hex digits `:PORT` (IPv6): each 32-bit word in the
/// kernel's (little-endian) byte order, the port big-endian hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::swap_bytes);
    let ip = match address.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(address)?)),
        32 => {
            let mut octets = [0u8; 16];
            for i in 0..4 {
                let bytes = word(address.get(i * 8..i * 8 + 8)?)?.to_be_bytes();
                octets[i * 4..i * 4 + 4].copy_from_slice(&bytes);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000 65534        0 102 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000 65534        0 2 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000    33        0 201 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 202 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 203 1 0000000000000000 100 0 0 10 0
";

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    fn listener(address: &str, uid: u32, inode: u64) -> Listener {
        Listener {
            address: addr(address),
            uid,
            inode,
        }
    }

    #[test]
    fn listening_sockets_of_the_port_are_read_connections_are_not() {
        assert_eq!(
            parse_listeners(TCP.as_bytes(), 8080),
            [listener("127.0.0.1:8080", 0, 101)]
        );
        assert_eq!(
            parse_listeners(TCP.as_bytes(), 8081),
            [listener("0.0.0.0:8081", 65534, 102)]
        );
        assert_eq!(
            parse_listeners(TCP6.as_bytes(), 8080),
            [listener("[::]:8080", 33, 201)]
        );
        assert_eq!(
            parse_listeners(TCP6.as_bytes(), 8081),
            [listener("[::1]:8081", 0, 202)]
        );
        assert_eq!(
            parse_listeners(TCP6.as_bytes(), 8082),
            [listener("[::ffff:127.0.0.1]:8082", 0, 203)]
        );
        assert!(parse_listeners(TCP.as_bytes(), 41668).is_empty());
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let table = b"header\n junk\n 0: zz:1F90 00000000:0000 0A 0 0 0 0 0 1\n 1: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 notanumber 0 1\n 2: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 x\n 3: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0\n";
        assert!(parse_listeners(table, 8080).is_empty());
        assert!(parse_listeners(b"", 8080).is_empty());
    }

    #[test]
    fn which_listeners_take_a_connection() {
        let v4 = addr("127.0.0.1:80");
        let v6 = addr("[::1]:80");
        assert_eq!(covers(addr("127.0.0.1:80"), v4), Some(true));
        assert_eq!(covers(addr("0.0.0.0:80"), v4), Some(true));
        assert_eq!(covers(addr("[::ffff:127.0.0.1]:80"), v4), Some(true));
        assert_eq!(covers(addr("[::]:80"), v4), None, "dual-stack or not");
        assert_eq!(covers(addr("127.0.0.2:80"), v4), Some(false));
        assert_eq!(covers(addr("127.0.0.1:81"), v4), Some(false));
        assert_eq!(covers(addr("[::1]:80"), v4), Some(false));
        assert_eq!(covers(addr("[::1]:80"), v6), Some(true));
        assert_eq!(covers(addr("[::]:80"), v6), Some(true));
        assert_eq!(covers(addr("127.0.0.1:80"), v6), Some(false));
        assert_eq!(covers(addr("0.0.0.0:80"), v6), Some(false));
        // an IPv4-mapped server address is the IPv4 one
        assert_eq!(
            covers(addr("127.0.0.1:80"), addr("[::ffff:127.0.0.1]:80")),
            Some(true)
        );
    }

    #[test]
    fn root_listening_throughout_is_the_only_pass() {
        let server = addr("127.0.0.1:8080");
        let root = [listener("127.0.0.1:8080", 0, 7)];
        assert_eq!(judge(server, &root, &root), Ok(()));
        let wildcard = [listener("0.0.0.0:8080", 0, 8)];
        assert_eq!(judge(server, &wildcard, &wildcard), Ok(()));
        // a v6-only [::] of another user beside root's IPv4 listener takes nothing of ours
        let beside = [
            listener("127.0.0.1:8080", 0, 7),
            listener("[::]:8080", 65534, 9),
        ];
        assert_eq!(judge(server, &beside, &beside), Ok(()));
        // another port's squatter is not ours
        let other_port = [
            listener("127.0.0.1:8080", 0, 7),
            listener("0.0.0.0:8081", 65534, 9),
        ];
        assert_eq!(judge(server, &other_port, &other_port), Ok(()));
    }

    #[test]
    fn another_users_listener_is_refused_however_it_binds() {
        let v4 = addr("127.0.0.1:8080");
        let v6 = addr("[::1]:8080");
        for (server, squatter) in [
            (v4, "127.0.0.1:8080"),
            (v4, "0.0.0.0:8080"),
            (v4, "[::ffff:127.0.0.1]:8080"),
            (v6, "[::1]:8080"),
            (v6, "[::]:8080"),
        ] {
            let held = [listener(squatter, 65534, 9)];
            let error = judge(server, &held, &held).unwrap_err();
            assert!(error.contains("uid 65534, not root"), "{squatter}: {error}");
            // there before the connect, gone after (it accepted, closed, root came back)
            let root = [
                listener("127.0.0.1:8080", 0, 7),
                listener("[::1]:8080", 0, 8),
            ];
            assert!(judge(server, &held, &root).is_err(), "{squatter}");
            assert!(judge(server, &root, &held).is_err(), "{squatter}");
        }
    }

    #[test]
    fn a_listener_that_changed_during_the_connect_is_refused() {
        let server = addr("127.0.0.1:8080");
        let before = [listener("127.0.0.1:8080", 0, 7)];
        let after = [listener("127.0.0.1:8080", 0, 8)];
        let error = judge(server, &before, &after).unwrap_err();
        assert!(error.contains("changed while"), "{error}");
        assert!(
            judge(server, &before, &[])
                .unwrap_err()
                .contains("changed while")
        );
        assert!(
            judge(server, &[], &before)
                .unwrap_err()
                .contains("changed while")
        );
        // a reuseport group: one socket of it there throughout is enough
        let group = [
            listener("127.0.0.1:8080", 0, 7),
            listener("127.0.0.1:8080", 0, 8),
        ];
        assert_eq!(judge(server, &group, &after), Ok(()));
    }

    #[test]
    fn nothing_or_only_an_ambiguous_wildcard_is_refused_with_the_way_out() {
        let server = addr("127.0.0.1:8080");
        let error = judge(server, &[], &[]).unwrap_err();
        assert!(error.contains("no socket listens"), "{error}");
        let dual = [listener("[::]:8080", 0, 7)];
        let error = judge(server, &dual, &dual).unwrap_err();
        assert!(error.contains("http://[::1]:8080/"), "{error}");
        let squatter = [listener("[::]:8080", 65534, 7)];
        let error = judge(server, &squatter, &squatter).unwrap_err();
        assert!(error.contains("[::]:8080 (uid 65534)"), "{error}");
        assert!(judge(addr("[::1]:8080"), &squatter, &squatter).is_err());
        // the same wildcard surely takes IPv6
        assert_eq!(judge(addr("[::1]:8080"), &dual, &dual), Ok(()));
    }

    #[test]
    fn this_processs_listener_is_found_in_the_real_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let uid = unsafe { libc::geteuid() };
        let found = listeners(address.port()).unwrap();
        let ours: Vec<_> = found.iter().filter(|l| l.address == address).collect();
        assert_eq!(ours.len(), 1, "{found:?}");
        assert_eq!(ours[0].uid, uid);
        assert_ne!(ours[0].inode, 0);
        assert_eq!(
            listeners(address.port()).unwrap(),
            found,
            "stable between reads"
        );
    }
}
