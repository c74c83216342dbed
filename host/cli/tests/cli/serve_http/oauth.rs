//! `host serve --http` with OAuth flags that cannot be served: refused at start (setup
//! exit code) saying what to give instead.

use super::*;

#[test]
fn oauth_set_ups_are_checked_before_serving() {
    let serve = ["serve", "--http", "127.0.0.1:0", "--no-builtins"];
    let issuer = |url| ["--oauth-issuer", url];
    let audience = |uri| ["--oauth-audience", uri];
    for (flags, expected) in [
        // Keys over plain HTTP from a host that is not loopback: anyone on the way could
        // swap them.
        (
            [issuer("http://auth.example.com"), audience("https://mcp.example.com/mcp")].concat(),
            "--oauth-issuer http://auth.example.com: plain HTTP is only for a loopback address (anyone on the way could swap the keys); use https, or --oauth-insecure-issuer on a network you trust",
        ),
        (
            [issuer("https://auth.example.com"), audience("/mcp")].concat(),
            "--oauth-audience \"/mcp\" is not an absolute URI",
        ),
        (
            [
                issuer("https://auth.example.com"),
                audience("https://mcp.example.com/mcp"),
                ["--oauth-scope", "a\"b"],
            ]
            .concat(),
            "--oauth-scope \"a\\\"b\" is not a scope",
        ),
    ] {
        let output = host()
            .args(serve)
            .args(&flags)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(EXIT_SETUP), "{flags:?}: {stderr}");
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
    }
}
