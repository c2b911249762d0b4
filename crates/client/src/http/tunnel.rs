//! `CONNECT` tunnels: how an https target is reached through an HTTP proxy (`https_proxy`).
//!
//! The proxy is asked to connect to the target's host and port; once it answers 2xx, the
//! connection carries TLS end to end, and the proxy sees neither requests nor answers. Its
//! credentials (from the proxy URL) go with the `CONNECT` only, never to the target.

use http::HeaderValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The most of a proxy's answer head that is read.
const HEAD_LIMIT: usize = 16 * 1024;

/// Asks the proxy at the other end of `stream` for a tunnel to `host:port`; the error is the
/// reason, in words that say what to do.
pub(super) async fn open<S>(
    stream: &mut S,
    host: &str,
    port: u16,
    authorization: Option<&HeaderValue>,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(&request(host, port, authorization)).await.map_err(|e| format!("sending CONNECT failed: {e}"))?;
    stream.flush().await.map_err(|e| format!("sending CONNECT failed: {e}"))?;
    let head = read_head(stream).await?;
    check_status(&head)
}

fn request(host: &str, port: u16, authorization: Option<&HeaderValue>) -> Vec<u8> {
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let mut req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    if let Some(auth) = authorization {
        req.extend_from_slice(b"Proxy-Authorization: ");
        req.extend_from_slice(auth.as_bytes());
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    req
}

/// The answer's head, up to its blank line. The target speaks only after the client's TLS
/// hello, so nothing may follow the head yet.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Vec<u8>, String> {
    let mut head = Vec::with_capacity(256);
    let mut buf = [0_u8; 1024];
    loop {
        let n = stream.read(&mut buf).await.map_err(|e| format!("reading the proxy's answer failed: {e}"))?;
        if n == 0 {
            return Err("the proxy closed the connection without answering CONNECT".to_string());
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            if end + 4 != head.len() {
                return Err("the proxy sent data after its answer to CONNECT; it is not a CONNECT proxy".to_string());
            }
            return Ok(head);
        }
        if head.len() > HEAD_LIMIT {
            return Err(format!("the proxy's answer to CONNECT has no end within {HEAD_LIMIT} bytes"));
        }
    }
}

fn check_status(head: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.splitn(3, ' ');
    let (version, status, reason) = (parts.next(), parts.next(), parts.next().unwrap_or("").trim());
    let code = match (version, status.and_then(|s| s.parse::<u16>().ok())) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code,
        _ => return Err(format!("the proxy's answer is not HTTP ({line:?}); check https_proxy")),
    };
    match code {
        200..=299 => Ok(()),
        407 => Err(format!(
            "HTTP 407 {reason}; the proxy wants credentials: give them in the proxy URL (http://USER:PASSWORD@HOST:PORT)"
        )),
        _ => Err(format!("HTTP {code} {reason}; check https_proxy and no_proxy")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `open` against a scripted proxy that answers `answer`; returns the result and what
    /// the proxy read.
    async fn against(answer: &'static [u8], auth: Option<&HeaderValue>) -> (Result<(), String>, String) {
        let (mut client, mut proxy) = tokio::io::duplex(4096);
        let proxy_side = async move {
            let mut got = Vec::new();
            let mut buf = [0_u8; 512];
            while !got.ends_with(b"\r\n\r\n") {
                let n = proxy.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            proxy.write_all(answer).await.unwrap_or_default();
            // Dropping the proxy's end closes the stream, as a proxy that hangs up would.
            String::from_utf8_lossy(&got).into_owned()
        };
        let (result, seen) = tokio::join!(open(&mut client, "gpu.example", 443, auth), proxy_side);
        (result, seen)
    }

    #[tokio::test]
    async fn a_2xx_answer_opens_the_tunnel_and_credentials_go_with_connect() {
        let auth = HeaderValue::from_static("Basic dXNlcjpwYXNz");
        let (result, seen) = against(b"HTTP/1.1 200 Connection established\r\n\r\n", Some(&auth)).await;
        assert_eq!(result, Ok(()));
        assert_eq!(
            seen,
            "CONNECT gpu.example:443 HTTP/1.1\r\nHost: gpu.example:443\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n"
        );
        let (result, _) = against(b"HTTP/1.0 200 OK\r\nProxy-Agent: x\r\n\r\n", None).await;
        assert_eq!(result, Ok(()));
    }

    #[tokio::test]
    async fn refusals_and_broken_answers_are_explained() {
        let (result, _) = against(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", None).await;
        let e = result.unwrap_err();
        assert!(e.contains("407") && e.contains("USER:PASSWORD"), "{e}");
        let (result, _) = against(b"HTTP/1.1 403 Forbidden\r\n\r\n", None).await;
        assert!(result.unwrap_err().contains("HTTP 403 Forbidden"));
        let (result, _) = against(b"", None).await;
        assert!(result.unwrap_err().contains("without answering"));
        let (result, _) = against(b"SSH-2.0-OpenSSH\r\n\r\n", None).await;
        assert!(result.unwrap_err().contains("not HTTP"));
        let (result, _) = against(b"HTTP/1.1 200 OK\r\n\r\nextra", None).await;
        assert!(result.unwrap_err().contains("not a CONNECT proxy"));
    }

    #[test]
    fn ipv6_targets_are_bracketed() {
        let req = String::from_utf8(request("::1", 8443, None)).unwrap();
        assert!(req.starts_with("CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n"), "{req}");
    }
}
