//! Who holds the purge endpoint's port (docs/agent.md, "Who may receive the secret"):
//! before the agent sends its bearer secret on a connection, it looks the connection's
//! server side up in the kernel's socket table (`/proc/net/tcp`, `/proc/net/tcp6`) and
//! sends only when that socket belongs to root (uid 0). LiteSpeed and nginx create their
//! listeners as root before their workers drop to an unprivileged user, and an accepted
//! connection keeps its listener's owner; a process of any other user that bound the
//! port while the web server was down (PHP code running as `nobody`, a suEXEC tenant) owns
//! its socket, so it gets a connection and nothing else, and the purge counts as failed
//! and is retried. The check runs after the connection is made, so a squatter that binds
//! between a check and the connect is caught too.
//!
//! ```text
//!   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid ...
//!    0: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000     0 ...
//! ```
//!
//! The parser reads the table's bytes and does no I/O; [`owner_of`] reads the files.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The only owner whose socket may receive the secret.
pub(crate) const TRUSTED_OWNER: u32 = 0;
/// The most bytes of one socket table read (a busy node's table is far smaller).
pub(crate) const MAX_TABLE_BYTES: u64 = 64 * 1024 * 1024;

/// Ok when the server side of `stream` belongs to [`TRUSTED_OWNER`]; otherwise why the
/// secret must not be sent on it. The server's socket can show up in the table a moment
/// after connect() returns (loopback hands the last ACK over asynchronously): it is looked
/// for up to 20 times, 1 ms apart.
pub(crate) async fn check(stream: &tokio::net::TcpStream) -> Result<(), String> {
    let (server, client) = match (stream.peer_addr(), stream.local_addr()) {
        (Ok(server), Ok(client)) => (server, client),
        (Err(e), _) | (_, Err(e)) => {
            return Err(format!("cannot read the connection's addresses: {e}"));
        }
    };
    for _ in 0..20 {
        match owner_of(server, client) {
            Ok(Some(TRUSTED_OWNER)) => return Ok(()),
            Ok(Some(uid)) => {
                return Err(format!(
                    "the socket answering on {server} belongs to uid {uid}, not root: not sending \
                     the secret (another process holds the web server's port?)"
                ));
            }
            Ok(None) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            Err(e) => {
                return Err(format!(
                    "cannot read the kernel's socket table: {e}; not sending the secret"
                ));
            }
        }
    }
    Err(format!(
        "the socket answering on {server} is not in the kernel's socket table (another network \
         namespace?): not sending the secret"
    ))
}

/// The owner (uid) of the socket whose local address is `server` and remote address is
/// `client` (the server's side of our connection), from the kernel's tables; `None` when
/// neither table lists it.
pub(crate) fn owner_of(server: SocketAddr, client: SocketAddr) -> std::io::Result<Option<u32>> {
    use std::io::Read;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let mut bytes = Vec::new();
        match std::fs::File::open(table) {
            Ok(file) => {
                file.take(MAX_TABLE_BYTES).read_to_end(&mut bytes)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
        if let Some(uid) = parse_owner(&bytes, server, client) {
            return Ok(Some(uid));
        }
    }
    Ok(None)
}

/// The uid of the table line whose local address is `server` and remote `client`
/// (IPv4 addresses also as IPv4-mapped IPv6 ones, as a dual-stack listener's accepted
/// connections are listed in tcp6). Lines that do not parse are skipped.
pub(crate) fn parse_owner(table: &[u8], server: SocketAddr, client: SocketAddr) -> Option<u32> {
    let text = String::from_utf8_lossy(table);
    text.lines().skip(1).find_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let _slot = fields.next()?;
        let local = parse_address(fields.next()?)?;
        let remote = parse_address(fields.next()?)?;
        // st, tx:rx, tr:when, retrnsmt, then uid
        let uid = fields.nth(4)?.parse::<u32>().ok()?;
        (same(local, server) && same(remote, client)).then_some(uid)
    })
}

fn same(listed: SocketAddr, wanted: SocketAddr) -> bool {
    listed.port() == wanted.port() && canonical(listed.ip()) == canonical(wanted.ip())
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
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000 65534        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:A2C5 01 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 20 4 30 10 -1
   1: 00000000000000000000000001000000:1F91 00000000000000000000000001000000:B000 01 00000000:00000000 00:00000000 00000000    33        0 5 1 0000000000000000 20 4 30 10 -1
";

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_server_side_of_a_connection_names_its_owner() {
        let table = TCP.as_bytes();
        assert_eq!(
            parse_owner(table, addr("127.0.0.1:8080"), addr("127.0.0.1:41668")),
            Some(65534)
        );
        // our own side is not the server's
        assert_eq!(
            parse_owner(table, addr("127.0.0.1:41668"), addr("127.0.0.1:8080")),
            Some(1000)
        );
        // the listener line (remote 0.0.0.0:0) is not a connection
        assert_eq!(
            parse_owner(table, addr("127.0.0.1:8080"), addr("127.0.0.1:41669")),
            None
        );
    }

    #[test]
    fn ipv6_and_ipv4_mapped_lines_are_read() {
        let table = TCP6.as_bytes();
        assert_eq!(
            parse_owner(table, addr("127.0.0.1:8080"), addr("127.0.0.1:41669")),
            Some(0)
        );
        assert_eq!(
            parse_owner(table, addr("[::1]:8081"), addr("[::1]:45056")),
            Some(33)
        );
        assert_eq!(
            parse_owner(table, addr("[::1]:8081"), addr("[::1]:45057")),
            None
        );
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let table = b"header\n junk\n 0: zz:1F90 0100007F:A2C4 01 0 0 0 7\n 1: 0100007F:1F90 0100007F:A2C4 01 0:0 0:0 0 notanumber\n";
        assert_eq!(
            parse_owner(table, addr("127.0.0.1:8080"), addr("127.0.0.1:41668")),
            None
        );
        assert_eq!(
            parse_owner(b"", addr("127.0.0.1:8080"), addr("127.0.0.1:41668")),
            None
        );
    }

    #[test]
    fn this_processs_own_connection_is_found_in_the_real_table() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, _) = listener.accept().unwrap();
        let uid = unsafe { libc::geteuid() };
        assert_eq!(
            owner_of(client.peer_addr().unwrap(), client.local_addr().unwrap()).unwrap(),
            Some(uid)
        );
    }
}
