//! Which HTTP proxy, if any, a target is reached through.
//!
//! Follows the conventions vLLM's client inherits from Python (`trust_env`): `http_proxy`
//! (else `HTTP_PROXY`) names the proxy of http targets, `https_proxy` (else `HTTPS_PROXY`) that
//! of https targets, and `no_proxy` (else `NO_PROXY`) lists hosts reached
//! directly: `*`, host names matched with their subdomains (`example.com`, `.example.com`),
//! `host:port`, IP addresses and IPv4 CIDR blocks. Loopback targets are always reached
//! directly, so a proxy set for the outside world never sits between the client and a local
//! server.

use std::net::{IpAddr, Ipv4Addr};

use http::HeaderValue;

use crate::http::HttpError;

/// A proxy to send requests through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Proxy {
    pub host: String,
    pub port: u16,
    /// `Proxy-Authorization` for credentials given in the proxy URL.
    pub authorization: Option<HeaderValue>,
}

/// The proxy for `host:port`, an https target when `https`, under the environment `env` (a
/// lookup of variable names).
pub(crate) fn proxy_for(
    host: &str,
    port: u16,
    https: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Proxy>, HttpError> {
    if is_loopback(host) {
        return Ok(None);
    }
    let names = if https { ["https_proxy", "HTTPS_PROXY"] } else { ["http_proxy", "HTTP_PROXY"] };
    let Some((var, url)) = first_set(&env, &names) else {
        return Ok(None);
    };
    if let Some((_, list)) = first_set(&env, &["no_proxy", "NO_PROXY"])
        && bypasses(&list, host, port)
    {
        return Ok(None);
    }
    parse_proxy(&url).map(Some).map_err(|reason| HttpError::InvalidProxy {
        var: var.to_string(),
        value: url.clone(),
        reason,
    })
}

fn first_set<'a>(env: &impl Fn(&str) -> Option<String>, names: &[&'a str]) -> Option<(&'a str, String)> {
    names.iter().find_map(|n| env(n).map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).map(|v| (*n, v)))
}

/// Whether `host` names this machine.
pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") || bare.to_ascii_lowercase().ends_with(".localhost") {
        return true;
    }
    bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn bypasses(list: &str, host: &str, port: u16) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| entry == "*" || entry_matches(&entry.to_ascii_lowercase(), &host, port))
}

fn entry_matches(entry: &str, host: &str, port: u16) -> bool {
    if let Some((net, bits)) = entry.split_once('/') {
        return cidr_contains(net, bits, host);
    }
    let entry = entry.trim_start_matches('[');
    let (name, entry_port) = match entry.rsplit_once(':') {
        // An IPv6 address has colons of its own; only `[v6]:port` or `name:port` carry a port.
        Some((n, p)) if !n.contains(':') || n.ends_with(']') => (n.trim_end_matches(']'), p.parse::<u16>().ok()),
        _ => (entry.trim_end_matches(']'), None),
    };
    if entry_port.is_some_and(|p| p != port) {
        return false;
    }
    let name = name.trim_start_matches("*.").trim_start_matches('.');
    host == name || host.ends_with(&format!(".{name}"))
}

fn cidr_contains(net: &str, bits: &str, host: &str) -> bool {
    let (Ok(net), Ok(bits), Ok(ip)) = (net.parse::<Ipv4Addr>(), bits.parse::<u32>(), host.parse::<Ipv4Addr>()) else {
        return false;
    };
    if bits > 32 {
        return false;
    }
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(net) & mask == u32::from(ip) & mask
}

fn parse_proxy(url: &str) -> Result<Proxy, String> {
    let rest = match url.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => return Err(format!("only http:// proxies are supported, not {scheme}://")),
        None => url,
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let (host, port) = split_host_port(hostport).ok_or("expected host[:port]")?;
    let authorization = userinfo
        .map(|u| HeaderValue::from_str(&format!("Basic {}", base64(u.as_bytes()))).map_err(|e| e.to_string()))
        .transpose()?;
    Ok(Proxy { host, port: port.unwrap_or(80), authorization })
}

/// Splits `host`, `host:port`, `[v6]` or `[v6]:port`.
pub(crate) fn split_host_port(s: &str) -> Option<(String, Option<u16>)> {
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?.parse().ok()?),
        };
        return Some((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') => Some((h.to_string(), Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s.to_string(), None)),
    }
}

fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for c in input.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(char::from(T[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn loopback_is_always_direct() {
        let e = env(&[("http_proxy", "http://proxy:3128")]);
        for host in ["127.0.0.1", "127.3.4.5", "localhost", "[::1]", "::1", "api.localhost"] {
            assert_eq!(proxy_for(host, 80, false, &e).unwrap(), None, "{host}");
        }
        assert!(proxy_for("10.0.0.2", 80, false, &e).unwrap().is_some());
    }

    #[test]
    fn lower_case_wins_and_empty_means_unset() {
        let e = env(&[("http_proxy", "p1:8080"), ("HTTP_PROXY", "http://p2:9")]);
        assert_eq!(proxy_for("gpu", 8000, false, &e).unwrap().unwrap().host, "p1");
        let e = env(&[("http_proxy", " "), ("HTTP_PROXY", "http://p2:9")]);
        let p = proxy_for("gpu", 8000, false, &e).unwrap().unwrap();
        assert_eq!((p.host.as_str(), p.port), ("p2", 9));
        assert_eq!(proxy_for("gpu", 8000, false, env(&[])).unwrap(), None);
    }

    #[test]
    fn no_proxy_entries_match_hosts_domains_ports_and_cidrs() {
        let e = env(&[
            ("http_proxy", "http://proxy:3128"),
            ("no_proxy", "internal.corp, .lab,gpu-7:8000,10.1.0.0/16, 192.168.1.5"),
        ]);
        let direct = |h: &str, p: u16| proxy_for(h, p, false, &e).unwrap().is_none();
        assert!(direct("internal.corp", 80));
        assert!(direct("a.internal.corp", 80));
        assert!(direct("node.lab", 80));
        assert!(direct("gpu-7", 8000));
        assert!(!direct("gpu-7", 8001));
        assert!(direct("10.1.200.3", 80));
        assert!(!direct("10.2.0.1", 80));
        assert!(direct("192.168.1.5", 80));
        assert!(!direct("notinternal.corp", 80));
        let all = env(&[("HTTP_PROXY", "proxy:1"), ("NO_PROXY", "*")]);
        assert_eq!(proxy_for("anything", 80, false, all).unwrap(), None);
    }

    #[test]
    fn proxy_credentials_become_basic_auth_and_bad_urls_are_errors() {
        let e = env(&[("http_proxy", "http://user:pa ss@proxy:3128/")]);
        let p = proxy_for("gpu", 80, false, e).unwrap().unwrap();
        assert_eq!(p.authorization.unwrap(), "Basic dXNlcjpwYSBzcw==");
        let e = env(&[("http_proxy", "https://secure:443")]);
        let err = proxy_for("gpu", 80, false, e).unwrap_err();
        assert!(err.to_string().contains("http_proxy"), "{err}");
        assert!(proxy_for("gpu", 80, false, env(&[("http_proxy", "http://p:notaport")])).is_err());
    }

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn host_port_splitting() {
        assert_eq!(split_host_port("h:1"), Some(("h".into(), Some(1))));
        assert_eq!(split_host_port("[::1]:8000"), Some(("::1".into(), Some(8000))));
        assert_eq!(split_host_port("[::1]"), Some(("::1".into(), None)));
        assert_eq!(split_host_port("h"), Some(("h".into(), None)));
        assert_eq!(split_host_port("h:x"), None);
        assert_eq!(split_host_port(""), None);
    }
}
