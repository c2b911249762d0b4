//! https targets: the scripted server behind a loopback TLS front that presents the throwaway
//! test certificate (`testdata/tls`, issued by a test authority no machine trusts), and a
//! loopback `CONNECT` proxy for `https_proxy`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::{Method, StatusCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use servebench_client::http::HttpClient;
use servebench_client::testserver::{Script, TestServer, TestServerConfig};
use servebench_client::{fetch_metrics, fetch_models, run};
use servebench_core::config::Api;
use servebench_core::record::FailureKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{all_succeeded, config, never, plan, quiet, serial};

const CERT: &str = include_str!("../../testdata/tls/localhost.pem");
const KEY: &str = include_str!("../../testdata/tls/localhost.key");

/// A TLS front on a loopback port for the server at `backend`: each of at most `connections`
/// TLS connections is relayed to a connection of its own to the backend.
async fn tls_front(backend: SocketAddr, connections: usize) -> SocketAddr {
    let certs = CertificateDer::pem_slice_iter(CERT.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(KEY.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut plain) = TcpStream::connect(backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

fn quick(tokens: u32) -> Script {
    Script {
        ttft: std::time::Duration::from_millis(3),
        itl: std::time::Duration::from_millis(1),
        tokens,
        ..Script::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_server_fails_every_request_without_insecure_and_serves_all_with_it() {
    let _serial = serial().await;
    let n = 12;
    let server = TestServer::start(TestServerConfig::new(n, |_| quick(6))).await.unwrap();
    let front = tls_front(server.addr(), 64).await;
    let mut cfg = config(&format!("https://{front}"), Api::Completions);
    cfg.traffic.max_concurrency = Some(4);

    let refused = run(&cfg, &plan(Api::Completions, n as u32, 6, |_| 0), quiet(), never()).await.unwrap();
    assert_eq!(refused.records.len(), n);
    for r in &refused.records {
        let f = r.failure.as_ref().expect("an unverifiable certificate fails the request");
        assert_eq!(f.kind, FailureKind::Connect);
        assert!(f.message.contains("use --insecure for self-signed certificates"), "{}", f.message);
        assert_eq!(r.status, 0);
    }
    assert!(server.truth().is_empty(), "nothing reached the server");

    cfg.target.insecure = true;
    let result = run(&cfg, &plan(Api::Completions, n as u32, 6, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    // Every new connection timed its TLS handshake apart from its TCP connect.
    let opened: Vec<_> = result.records.iter().filter(|r| r.http.connect_us.is_some()).collect();
    assert!(!opened.is_empty() && opened.iter().all(|r| r.http.tls_us.is_some()), "{opened:?}");
    for r in &result.records {
        assert_eq!(r.output_tokens(), 6, "request {}", r.index);
        assert_eq!(r.chunks_us.len(), 6, "request {}", r.index);
    }
    // TLS connections are pooled and reused like plain ones: one per request in flight.
    assert!(server.connections() <= 4, "{} connections for 4 in flight", server.connections());
    assert_eq!(server.stopped().await.iter().filter(|t| t.status == 200).count(), n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_metrics_are_fetched_over_https_with_insecure() {
    let _serial = serial().await;
    let server = TestServer::start(TestServerConfig::new(1, |_| Script::default())).await.unwrap();
    let base = format!("https://{}", tls_front(server.addr(), 8).await);
    let e = fetch_models(&base, &[], None, false).await.unwrap_err();
    assert!(e.to_string().contains("use --insecure for self-signed certificates"), "{e}");
    let model = fetch_models(&base, &[], None, true).await.unwrap();
    assert_eq!(model.id, "test-model");
    let metrics = fetch_metrics(&format!("{base}/"), &[], None, true).await.unwrap();
    assert!(metrics.contains("vllm:num_requests_running{model_name=\"test-model\"} 0"), "{metrics}");
}

/// A loopback `CONNECT` proxy that records each request head and tunnels every connection to
/// `to`, whatever it asked for; it takes at most `connections` connections.
async fn connect_proxy(to: SocketAddr, connections: usize) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((mut client, _)) = listener.accept().await else { return };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0_u8; 1024];
                while !head.ends_with(b"\r\n\r\n") {
                    match client.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let Ok(mut upstream) = TcpStream::connect(to).await else { return };
                if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_through_a_proxy_goes_through_a_connect_tunnel() {
    let _serial = serial().await;
    let server = TestServer::start(TestServerConfig::new(1, |_| Script::default())).await.unwrap();
    let front = tls_front(server.addr(), 4).await;
    let (proxy, heads) = connect_proxy(front, 4).await;
    // A name outside loopback, so the proxy is used; only the proxy is ever dialled.
    let url = "https://gpu.servebench.invalid:8443/v1/models";
    let env = move |k: &str| match k {
        "https_proxy" => Some(format!("http://user:secret@{proxy}")),
        "http_proxy" => Some("http://wrong-proxy.invalid:1".to_string()),
        _ => None,
    };
    let client = HttpClient::with_env(url, &[], 1, true, env).unwrap();
    assert!(client.via_proxy());
    let mut resp = client.send(Method::GET, &client.target(url).unwrap(), None, None).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.text(1 << 16).await.unwrap().contains("test-model"));
    let heads = heads.lock().unwrap().clone();
    assert_eq!(
        heads,
        vec![
            "CONNECT gpu.servebench.invalid:8443 HTTP/1.1\r\nHost: gpu.servebench.invalid:8443\r\n\
             Proxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n\r\n"
                .to_string()
        ]
    );
    let truth = server.truth();
    assert_eq!(truth.iter().map(|t| t.path.as_str()).collect::<Vec<_>>(), ["/v1/models"]);
}
