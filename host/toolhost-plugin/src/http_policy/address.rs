//! Which addresses plugins never reach unless the operator allows their network:
//! [`forbidden_address`] (loopback, private, link-local, ...), IPv4 inside IPv6 unwrapped
//! first ([`unmap`]), and the networks an operator allows ([`parse_allowed_net`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(super) use ipnet::IpNet;

/// Parses a network the operator allows plugins to reach although it is private:
/// `10.0.0.0/8`, `127.0.0.1` (one address), `fd00::/8`.
///
/// # Errors
/// A message saying what to give instead.
pub fn parse_allowed_net(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(IpNet::from(ip));
    }
    text.parse::<IpNet>().map(|net| net.trunc()).map_err(|_| {
        format!(
            "\"{}\" is not an IP address or network; give e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8",
            text.escape_debug()
        )
    })
}

/// IPv4 carried in IPv6 (`::ffff:a.b.c.d`, `::a.b.c.d`) as that IPv4 address; anything
/// else unchanged.
pub fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                // Deprecated IPv4-compatible ::a.b.c.d (not :: or ::1).
                if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
                    IpAddr::V4(Ipv4Addr::new(
                        (s[6] >> 8) as u8,
                        s[6] as u8,
                        (s[7] >> 8) as u8,
                        s[7] as u8,
                    ))
                } else {
                    ip
                }
            }
        },
        v4 => v4,
    }
}

/// Why plugins may not connect to `ip` unless the operator allows its network; `None`
/// for an ordinary public address.
///
/// ```
/// use toolhost_plugin::http_policy::forbidden_address;
///
/// assert_eq!(forbidden_address("169.254.169.254".parse()?), Some("link-local (cloud metadata)"));
/// assert_eq!(forbidden_address("::ffff:10.1.2.3".parse()?), Some("private"));
/// assert_eq!(forbidden_address("93.184.216.34".parse()?), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match unmap(ip) {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "unspecified (\"this network\", 0.0.0.0/8)",
        (127, ..) => "loopback",
        (10, ..) | (192, 168, _) | (172, 16..=31, _) => "private",
        (169, 254, _) => "link-local (cloud metadata)",
        (100, 64..=127, _) => "shared address space (carrier-grade NAT, 100.64.0.0/10)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved or broadcast",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    Some(match s[0] {
        0xfc00..=0xfdff => "unique local (private, fc00::/7)",
        0xfe80..=0xfebf => "link-local",
        0xfec0..=0xfeff => "site-local (deprecated, fec0::/10)",
        0xff00..=0xffff => "multicast",
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48) embed an IPv4 address.
        0x0064 if s[1] == 0xff9b => {
            let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
            return forbidden_v4(v4).map(|_| "NAT64 to a forbidden IPv4 address");
        }
        // 6to4 embeds an IPv4 address in 2002:AABB:CCDD::.
        0x2002 => {
            let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
            return forbidden_v4(v4).map(|_| "6to4 to a forbidden IPv4 address");
        }
        // Teredo (2001:0::/32) tunnels to an obfuscated IPv4 address; documentation
        // (2001:db8::/32).
        0x2001 if s[1] == 0 => "Teredo tunnel",
        0x2001 if s[1] == 0x0db8 => "documentation",
        // Discard-only 100::/64.
        0x0100 if s[1..4] == [0, 0, 0] => "discard-only",
        // Anything else under ::/8 (IPv4-compatible addresses were unwrapped above).
        0x0000 => "reserved (::/8)",
        _ => return None,
    })
}
