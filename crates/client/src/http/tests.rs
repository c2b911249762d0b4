//! Tests of the client: URLs, request targets, headers and proxies, checked up front; https
//! against loopback TLS servers that present the throwaway test certificate
//! (`testdata/tls`).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

const CA: &str = include_str!("../../testdata/tls/ca.pem");
const CERT: &str = include_str!("../../testdata/tls/localhost.pem");
const KEY: &str = include_str!("../../testdata/tls/localhost.key");

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn urls_are_checked_up_front() {
    assert!(HttpClient::with_env("https://api.example.com", &[], 1, false, no_env).is_ok());
    let e = HttpClient::with_env("ftp://x", &[], 1, false, no_env).unwrap_err();
    assert!(e.to_string().contains("http:// or https://"), "{e}");
    assert!(HttpClient::with_env("not a url", &[], 1, false, no_env).is_err());
    // A port past 65535 is named as the port, not as a missing host.
    let e = HttpClient::with_env("http://127.0.0.1:70000", &[], 1, false, no_env).unwrap_err();
    assert!(e.to_string().contains("port 70000 is not a port number (1 to 65535)"), "{e}");
    assert!(HttpClient::with_env("http://[::1]:8000", &[], 1, false, no_env).is_ok());
    let bad = [("Bad Header".to_string(), "v".to_string())];
    assert!(matches!(HttpClient::with_env("http://h:1", &bad, 1, false, no_env), Err(HttpError::InvalidHeader { .. })));
}

#[test]
fn request_targets_are_origin_form_direct_and_absolute_through_a_proxy() {
    let direct = HttpClient::with_env("http://10.0.0.1:8000", &[], 1, false, no_env).unwrap();
    assert_eq!(direct.target("http://10.0.0.1:8000/v1/completions?x=1").unwrap(), "/v1/completions?x=1");
    let env = |k: &str| (k == "http_proxy").then(|| "http://proxy:3128".to_string());
    let proxied = HttpClient::with_env("http://10.0.0.1:8000", &[], 1, false, env).unwrap();
    assert!(proxied.via_proxy());
    assert_eq!(proxied.target("http://10.0.0.1:8000/v1/models").unwrap(), "http://10.0.0.1:8000/v1/models");
    let local = HttpClient::with_env("http://127.0.0.1:8000", &[], 1, false, env).unwrap();
    assert!(!local.via_proxy());
}

#[test]
fn https_targets_use_port_443_and_https_proxy_through_a_tunnel() {
    let env = |k: &str| match k {
        "https_proxy" => Some("http://u:p@tunnel:3128".to_string()),
        "http_proxy" => Some("http://u:p@forward:8080".to_string()),
        _ => None,
    };
    let c = HttpClient::with_env("https://api.example.com", &[], 1, false, no_env).unwrap();
    assert_eq!((c.inner.port, c.via_proxy()), (443, false));
    let tunnelled = HttpClient::with_env("https://10.0.0.1:8443", &[], 1, false, env).unwrap();
    assert_eq!(tunnelled.inner.proxy.as_ref().map(|p| p.host.as_str()), Some("tunnel"));
    // Requests go through the tunnel in origin form; the proxy's credentials stay with CONNECT.
    assert_eq!(tunnelled.target("https://10.0.0.1:8443/v1/models").unwrap(), "/v1/models");
    assert!(tunnelled.headers(false, None).get(PROXY_AUTHORIZATION).is_none());
    let forwarded = HttpClient::with_env("http://10.0.0.1:8000", &[], 1, false, env).unwrap();
    assert_eq!(forwarded.inner.proxy.as_ref().map(|p| p.host.as_str()), Some("forward"));
    assert!(forwarded.headers(false, None).get(PROXY_AUTHORIZATION).is_some());
    // no_proxy and loopback apply to https too; a bad https_proxy is named as such.
    let bypass = |k: &str| if k == "no_proxy" { Some("10.0.0.1".to_string()) } else { env(k) };
    assert!(!HttpClient::with_env("https://10.0.0.1", &[], 1, false, bypass).unwrap().via_proxy());
    assert!(!HttpClient::with_env("https://127.0.0.1:1", &[], 1, false, env).unwrap().via_proxy());
    let bad = |k: &str| (k == "HTTPS_PROXY").then(|| "socks5://p:1".to_string());
    let e = HttpClient::with_env("https://10.0.0.1", &[], 1, false, bad).unwrap_err();
    assert!(e.to_string().contains("HTTPS_PROXY"), "{e}");
}

#[test]
fn api_key_header_comes_first_and_user_headers_can_override_it() {
    let user = vec![("X-A".to_string(), "1".to_string())];
    let h = request_headers(&user, Some("k".into()));
    assert_eq!(h[0], ("authorization".to_string(), "Bearer k".to_string()));
    assert_eq!(h[1].0, "X-A");
    assert_eq!(request_headers(&user, Some(String::new())).len(), 1);
    let c = HttpClient::with_env(
        "http://h:1",
        &request_headers(&[("Authorization".into(), "Bearer mine".into())], Some("k".into())),
        1,
        false,
        no_env,
    )
    .unwrap();
    let headers = c.headers(true, None);
    assert_eq!(headers[AUTHORIZATION], "Bearer mine");
    assert_eq!(headers[CONTENT_TYPE], "application/json");
    assert_eq!(headers[HOST], "h:1");
}

#[test]
fn a_request_is_its_line_headers_length_and_body_in_one_buffer() {
    let c = HttpClient::with_env("http://h:1", &[], 1, false, no_env).unwrap();
    let post = request_bytes(&Method::POST, &Uri::from_static("/v1/completions"), &c.headers(true, None), Some(b"{}"));
    let text = String::from_utf8(post).unwrap();
    assert!(
        text.starts_with("POST /v1/completions HTTP/1.1\r\nhost: h:1\r\ncontent-type: application/json\r\n"),
        "{text}"
    );
    assert!(text.ends_with("content-length: 2\r\n\r\n{}"), "{text}");
    let get = request_bytes(&Method::GET, &Uri::from_static("http://h:1/metrics"), &c.headers(false, None), None);
    let text = String::from_utf8(get).unwrap();
    assert!(text.starts_with("GET http://h:1/metrics HTTP/1.1\r\n") && !text.contains("content-length"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "{text}");
}

/// Reads a request head (a test request has no body); false when the connection ended first.
async fn read_head(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    let mut head = Vec::new();
    let mut buf = [0_u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// A loopback https server on `ip` that answers each request `200 ok` and closes; it takes
/// at most `connections` connections and records the ALPN protocol each one negotiated.
async fn https_server(ip: &str, connections: usize) -> (SocketAddr, Arc<Mutex<Vec<Option<Vec<u8>>>>>) {
    let certs = CertificateDer::pem_slice_iter(CERT.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    // A server that prefers h2 still has to pick http/1.1, the only protocol offered.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let alpn = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&alpn);
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                lock(&seen).push(tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec));
                if !read_head(&mut tls).await {
                    return;
                }
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok").await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (addr, alpn)
}

fn test_roots() -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(CA.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}

async fn get(client: &HttpClient, url: &str) -> Result<(StatusCode, String), String> {
    let target = client.target(url).map_err(|e| e.to_string())?;
    let mut resp = client.send(Method::GET, &target, None, None).await.map_err(|e| e.to_string())?;
    let text = resp.text(1024).await.map_err(|e| e.to_string())?;
    Ok((resp.status(), text))
}

#[tokio::test]
async fn a_certificate_from_a_trusted_authority_is_accepted_by_name_or_address() {
    let (addr, alpn) = https_server("127.0.0.1", 2).await;
    for url in [format!("https://localhost:{}/", addr.port()), format!("https://{addr}/")] {
        let client = HttpClient::with_roots(&url, test_roots()).unwrap();
        assert_eq!(get(&client, &url).await, Ok((StatusCode::OK, "ok".to_string())), "{url}");
    }
    assert_eq!(*lock(&alpn), vec![Some(b"http/1.1".to_vec()); 2]);
}

#[tokio::test]
async fn an_unknown_issuer_says_to_use_insecure_and_insecure_accepts_it() {
    let (addr, _) = https_server("127.0.0.1", 2).await;
    let url = format!("https://{addr}/v1/models");
    let verified = HttpClient::with_env(&url, &[], 1, false, no_env).unwrap();
    let e = get(&verified, &url).await.unwrap_err();
    assert!(e.starts_with(&format!("TLS handshake with 127.0.0.1 ({addr}) failed: ")), "{e}");
    assert!(e.contains("use --insecure for self-signed certificates"), "{e}");
    let insecure = HttpClient::with_env(&url, &[], 1, true, no_env).unwrap();
    assert_eq!(get(&insecure, &url).await, Ok((StatusCode::OK, "ok".to_string())));
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused_with_the_names_it_lists() {
    // 127.0.0.2 is loopback too, but not a name the certificate lists.
    let (addr, _) = https_server("127.0.0.2", 1).await;
    let url = format!("https://{addr}/");
    let e = get(&HttpClient::with_roots(&url, test_roots()).unwrap(), &url).await.unwrap_err();
    assert!(
        e.contains("is for localhost, 127.0.0.1, ") && e.contains("not 127.0.0.2") && e.contains("--insecure"),
        "{e}"
    );
}

#[tokio::test]
async fn a_plain_http_server_behind_an_https_url_is_named_as_such() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((mut tcp, _)) = listener.accept().await {
            let mut buf = [0_u8; 1024];
            let _ = tcp.read(&mut buf).await;
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        }
    });
    let url = format!("https://{addr}/");
    let e = get(&HttpClient::with_env(&url, &[], 1, true, no_env).unwrap(), &url).await.unwrap_err();
    assert!(e.contains("use an http:// URL"), "{e}");
}

/// A loopback server that answers each request on one connection with the next of `replies`
/// (written in one piece), then closes; returns its address and how many connections it took.
async fn scripted(replies: Vec<&'static [u8]>) -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        let Ok((mut tcp, _)) = listener.accept().await else { return };
        *lock(&count) += 1;
        for reply in replies {
            if !read_head(&mut tcp).await || tcp.write_all(reply).await.is_err() {
                return;
            }
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn informational_heads_are_skipped_and_a_finished_body_leaves_the_connection_for_the_next() {
    let (addr, accepted) = scripted(vec![
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
        b"HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    ])
    .await;
    let url = format!("http://{addr}/x");
    let client = HttpClient::with_env(&url, &[], 1, false, no_env).unwrap();
    assert_eq!(get(&client, &url).await, Ok((StatusCode::OK, "hello".to_string())));
    let target = client.target(&url).unwrap();
    let mut resp = client.send(Method::GET, &target, None, None).await.unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    // Both chunks came in one read: two pieces with that read's time.
    let first = resp.chunk().await.unwrap().map(|p| (p.data.to_vec(), p.at)).unwrap();
    let second = resp.chunk().await.unwrap().map(|p| (p.data.to_vec(), p.at)).unwrap();
    assert_eq!((first.0.as_slice(), second.0.as_slice()), (&b"abc"[..], &b"de"[..]));
    assert_eq!(first.1, second.1);
    assert!(resp.chunk().await.unwrap().is_none());
    assert_eq!(*lock(&accepted), 1, "the second request went on the first connection");
}

#[tokio::test]
async fn a_body_cut_off_mid_chunk_is_an_error_after_what_arrived() {
    let (addr, _) = scripted(vec![b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel"]).await;
    let url = format!("http://{addr}/");
    let client = HttpClient::with_env(&url, &[], 1, false, no_env).unwrap();
    let mut resp = client.send(Method::GET, &client.target(&url).unwrap(), None, None).await.unwrap();
    assert_eq!(resp.chunk().await.unwrap().map(|p| p.data.to_vec()), Some(b"hel".to_vec()));
    let e = resp.chunk().await.unwrap_err();
    assert_eq!(e.to_string(), "the connection closed before the body ended");
    assert!(resp.chunk().await.unwrap().is_none(), "a failed body stays ended");
}

#[tokio::test]
async fn a_server_that_is_not_http_is_named_before_any_body() {
    let (addr, _) = scripted(vec![b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]).await;
    let url = format!("http://{addr}/");
    let client = HttpClient::with_env(&url, &[], 1, false, no_env).unwrap();
    let e = client.send(Method::GET, &client.target(&url).unwrap(), None, None).await.unwrap_err();
    assert!(e.to_string().starts_with("connection failed before a response: the response head is not HTTP/1.x"), "{e}");
}
