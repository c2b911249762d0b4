//! TLS for `https://` targets, on the same hand-managed connections as plain http.
//!
//! rustls with the `ring` provider. The server's certificate is checked for the URL's host
//! (a name or an IP address, also sent as SNI when it is a name) against Mozilla's roots,
//! compiled in (`webpki-roots`), and this machine's (`rustls-native-certs`: the system store,
//! or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set, as for vLLM's Python client). `--insecure`
//! (vLLM's flag) accepts any certificate for any name; the handshake's own signatures are
//! still checked.
//!
//! ALPN offers `http/1.1` only. Session resumption is off: like vLLM's client, every new
//! connection pays a full handshake, which is part of the first request sent on it.
//!
//! A failed handshake is explained in words that say what to do: an unknown issuer (a
//! self-signed certificate) points to `--insecure`, a plain-http server to an `http://` URL.

use std::fmt;
use std::io;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// How to open TLS to one server.
#[derive(Clone)]
pub(crate) struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Tls {
    /// TLS to `host` (a DNS name or an IP address), verifying its certificate unless
    /// `insecure`.
    pub(crate) fn new(host: &str, insecure: bool) -> Result<Self, String> {
        let config = if insecure { shared(&INSECURE, insecure_config) } else { shared(&VERIFIED, verified_config) };
        Ok(Self { connector: TlsConnector::from(config?), name: server_name(host)? })
    }

    /// TLS to `host`, trusting only `roots`.
    #[cfg(test)]
    pub(crate) fn with_roots(host: &str, roots: RootCertStore) -> Result<Self, String> {
        let config = finish(builder()?.with_root_certificates(roots).with_no_client_auth());
        Ok(Self { connector: TlsConnector::from(config), name: server_name(host)? })
    }

    /// The handshake on a connected stream; the error says what went wrong and what to do.
    pub(crate) async fn connect<S>(&self, stream: S) -> Result<TlsStream<S>, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.connector.connect(self.name.clone(), stream).await.map_err(|e| explain(&e, &self.name))
    }
}

type SharedConfig = Result<Arc<ClientConfig>, String>;

static VERIFIED: OnceLock<SharedConfig> = OnceLock::new();
static INSECURE: OnceLock<SharedConfig> = OnceLock::new();

/// One config of each kind for the whole process: the roots are loaded once.
fn shared(cell: &'static OnceLock<SharedConfig>, make: fn() -> SharedConfig) -> SharedConfig {
    cell.get_or_init(make).clone()
}

fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("{host:?} is not a name TLS can check ({e})"))
}

fn crypto() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS 1.2 and 1.3 with ring's cipher suites.
fn builder() -> Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>, String> {
    ClientConfig::builder_with_provider(crypto())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("the TLS library refused its default settings ({e})"))
}

fn finish(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

fn verified_config() -> SharedConfig {
    let mut roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // This machine's certificates are added when they can be read; the compiled-in ones
    // suffice for public servers.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    Ok(finish(builder()?.with_root_certificates(roots).with_no_client_auth()))
}

fn insecure_config() -> SharedConfig {
    let verifier = Arc::new(AnyCertificate(crypto().signature_verification_algorithms));
    Ok(finish(builder()?.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth()))
}

/// `--insecure`: any certificate, for any name, is accepted (Python's `CERT_NONE`); the
/// handshake signatures made with its key are still checked.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// What a failed handshake means, and what to do about it.
fn explain(e: &io::Error, name: &ServerName<'_>) -> String {
    let name = name.to_str();
    let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) else {
        return match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => format!(
                "the server closed the connection during the handshake ({e}); check that this port serves https, \
                 or use an http:// URL"
            ),
            _ => e.to_string(),
        };
    };
    match tls {
        rustls::Error::InvalidCertificate(c) => certificate(c, &name),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            format!("the server did not answer in TLS ({tls}); if it serves plain http, use an http:// URL")
        }
        rustls::Error::AlertReceived(alert) => {
            format!("the server refused the handshake (alert {alert:?}); check that it serves https for {name}")
        }
        rustls::Error::NoApplicationProtocol => {
            "the server offers no HTTP/1.1 over TLS (ALPN); servebench speaks HTTP/1.1 only".to_string()
        }
        other => other.to_string(),
    }
}

fn certificate(c: &CertificateError, name: &str) -> String {
    match c {
        CertificateError::UnknownIssuer => "the server's certificate is not signed by an authority this machine trusts \
             (a self-signed certificate?): use --insecure for self-signed certificates"
            .to_string(),
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "the server's certificate is for {}, not {name}: connect by a name it lists, or use --insecure",
            presented.iter().map(|n| bare_name(n)).collect::<Vec<_>>().join(", ")
        ),
        CertificateError::NotValidForName => {
            format!("the server's certificate is not for {name}: connect by a name it lists, or use --insecure")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the server's certificate has expired: renew it, or use --insecure".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the server's certificate is not valid yet (is this machine's clock right?): use --insecure to skip the check"
                .to_string()
        }
        other => format!("the server's certificate was refused ({other}): use --insecure to skip certificate checks"),
    }
}

/// `localhost` for rustls's `DnsName("localhost")`, `127.0.0.1` for `IpAddress(127.0.0.1)`.
fn bare_name(presented: &str) -> &str {
    let inner = |prefix: &str, suffix: &str| presented.strip_prefix(prefix).and_then(|r| r.strip_suffix(suffix));
    inner("DnsName(\"", "\")").or_else(|| inner("IpAddress(", ")")).unwrap_or(presented)
}
