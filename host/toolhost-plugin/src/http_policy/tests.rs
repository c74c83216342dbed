//! Tests of host patterns, operator coverage and forbidden addresses.

use super::*;
use std::net::IpAddr;

fn p(text: &str) -> HostPattern {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn patterns_parse_with_scheme_and_port_defaults() {
    assert_eq!(p("api.github.com").to_string(), "api.github.com");
    assert_eq!(
        p("https://API.GitHub.com.:443/").to_string(),
        "api.github.com"
    );
    assert_eq!(p("http://localhost").to_string(), "http://localhost");
    assert_eq!(p("*.example.org:8443").to_string(), "*.example.org:8443");
    assert_eq!(
        p("http://127.0.0.1:8080").to_string(),
        "http://127.0.0.1:8080"
    );
    assert_eq!(p("[::1]:8443").to_string(), "[::1]:8443");
    assert_eq!(p("*").to_string(), "*");
    assert!(p("http://localhost").is_plain_http());
    assert!(!p("localhost").is_plain_http());
}

#[test]
fn bad_patterns_say_why() {
    for (text, reason) in [
            ("ftp://x.org", "only the http and https schemes exist"),
            ("x.org/path", "give a host, not a URL with a path or query"),
            ("user:pw@x.org", "user names and passwords do not belong in a host pattern"),
            ("x.org:0", "the port is not a number from 1 to 65535"),
            ("x.org:http", "the port is not a number from 1 to 65535"),
            ("a*.x.org", "a wildcard may only be a whole leading label (*.example.org) or the whole host (*)"),
            ("*.org", "a wildcard covers the sub-domains of a domain with at least two labels (*.example.org)"),
            ("::1", "write an IPv6 address in brackets, e.g. [2001:db8::1]:443"),
            ("bücher.de", "the host name is not ASCII; write an internationalised name in its xn-- (punycode) form"),
            ("", "the host name is empty or longer than 253 characters"),
            ("a..b", "\"\" is not a valid host name label"),
        ] {
            let err = text.parse::<HostPattern>().unwrap_err();
            assert_eq!(err.reason, reason, "{text}");
        }
    let err = "x.org/a".parse::<HostPattern>().unwrap_err();
    assert_eq!(err.to_string(), "\"x.org/a\" is not a host pattern: give a host, not a URL with a path or query; write [http://]host[:port], e.g. api.github.com, *.example.org:8443 or http://localhost:8080");
}

#[test]
fn requests_match_exactly_scheme_host_and_port() {
    let exact = p("api.github.com");
    assert!(exact.matches("https", "api.github.com", 443));
    assert!(exact.matches("HTTPS", "Api.GitHub.com.", 443));
    assert!(!exact.matches("http", "api.github.com", 443));
    assert!(!exact.matches("https", "api.github.com", 8443));
    assert!(!exact.matches("https", "evil.api.github.com", 443));
    assert!(!exact.matches("https", "api.github.com.evil.test", 443));
    let wild = p("*.example.org");
    assert!(wild.matches("https", "a.example.org", 443));
    assert!(wild.matches("https", "a.b.example.org", 443));
    assert!(!wild.matches("https", "example.org", 443));
    assert!(!wild.matches("https", "badexample.org", 443));
    let v6 = p("[::1]:8443");
    assert!(v6.matches("https", "[::1]", 8443));
    assert!(v6.matches("https", "0:0::1", 8443));
    assert!(p("*").matches("https", "anything.test", 443));
    assert!(!p("*").matches("http", "anything.test", 443));
}

#[test]
fn operator_patterns_cover_manifest_patterns() {
    assert!(p("*.example.org").covers(&p("api.example.org")));
    assert!(p("*.example.org").covers(&p("*.api.example.org")));
    assert!(p("*.example.org").covers(&p("*.example.org")));
    assert!(!p("*.example.org").covers(&p("example.org")));
    assert!(!p("api.example.org").covers(&p("*.example.org")));
    assert!(!p("*.example.org").covers(&p("*")));
    assert!(p("*").covers(&p("*")));
    assert!(p("*").covers(&p("x.test")));
    assert!(!p("x.test").covers(&p("http://x.test")));
    assert!(!p("x.test").covers(&p("x.test:8443")));
    let policy = HttpPolicy {
        allow: vec![p("*.example.org"), p("http://127.0.0.1:8080")],
        ..HttpPolicy::default()
    };
    let asked = [
        p("a.example.org"),
        p("http://127.0.0.1:8080"),
        p("127.0.0.1:8080"),
    ];
    assert_eq!(policy.first_denied(&asked[..2]), None);
    assert_eq!(policy.first_denied(&asked), Some(&asked[2]));
}

#[test]
fn private_and_special_addresses_are_forbidden() {
    for (ip, why) in [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        (
            "100.100.100.200",
            "shared address space (carrier-grade NAT, 100.64.0.0/10)",
        ),
        ("0.0.0.0", "unspecified (\"this network\", 0.0.0.0/8)"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "reserved or broadcast"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00:ec2::254", "unique local (private, fc00::/7)"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local (cloud metadata)"),
        ("::127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "NAT64 to a forbidden IPv4 address"),
        ("2002:7f00:1::", "6to4 to a forbidden IPv4 address"),
        ("2001:0:4136:e378::1", "Teredo tunnel"),
    ] {
        let parsed: IpAddr = ip.parse().unwrap();
        assert_eq!(forbidden_address(parsed), Some(why), "{ip}");
    }
    for ip in [
        "93.184.216.34",
        "1.1.1.1",
        "172.32.0.1",
        "2606:4700::1111",
        "64:ff9b::101:101",
    ] {
        assert_eq!(forbidden_address(ip.parse().unwrap()), None, "{ip}");
    }
}

#[test]
fn allowed_nets_open_exactly_their_addresses() {
    let policy = HttpPolicy {
        allow_nets: vec![parse_allowed_net("127.0.0.1").unwrap()],
        ..HttpPolicy::default()
    };
    assert!(policy.address_allowed("127.0.0.1".parse().unwrap()));
    assert!(policy.address_allowed("::ffff:127.0.0.1".parse().unwrap()));
    assert!(!policy.address_allowed("127.0.0.2".parse().unwrap()));
    assert!(!policy.address_allowed("10.0.0.1".parse().unwrap()));
    assert!(policy.address_allowed("1.1.1.1".parse().unwrap()));
    assert_eq!(
        parse_allowed_net("10.1.2.3/8").unwrap().to_string(),
        "10.0.0.0/8"
    );
    assert_eq!(
            parse_allowed_net("localhost").unwrap_err(),
            "\"localhost\" is not an IP address or network; give e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8"
        );
}
