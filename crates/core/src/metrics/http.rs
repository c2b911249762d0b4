//! The HTTP timing breakdown of a run: how many requests opened a new connection and how long
//! the TCP connect and the TLS handshake took, when the response's head and its first byte
//! arrived after the request was sent. Where TTFT comes from, on the wire: a long connect or
//! TLS means the client paid for connections the server closed; a first byte long after the
//! head means the server answered at once and streamed late; a head only at the first token
//! means the server held the response until it had one.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use super::Sorted;
use super::stats::mean;
use crate::record::RequestRecord;

/// Mean, median and P99 of one timing, ms (numpy's arithmetic, as the report's other timings).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p99_ms: f64,
}

impl Spread {
    fn of(us: impl Iterator<Item = u32>) -> Option<Spread> {
        let ms: Vec<f64> = us.map(|u| f64::from(u) / 1000.0).collect();
        if ms.is_empty() {
            return None;
        }
        let sorted = Sorted::new(&ms);
        Some(Spread { mean_ms: mean(&ms), median_ms: sorted.median(), p99_ms: sorted.percentile(99.0) })
    }
}

/// The breakdown over every request that got a response head.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpBreakdown {
    /// Requests that got a response head.
    pub responses: u64,
    /// Of those, the ones sent on a connection they opened.
    pub new_connections: u64,
    pub connect: Option<Spread>,
    pub tls: Option<Spread>,
    pub headers: Option<Spread>,
    pub first_byte: Option<Spread>,
}

impl HttpBreakdown {
    /// `None` when no request got a response head (or the records do not say: an import).
    pub fn of<R: Borrow<RequestRecord>>(records: &[R]) -> Option<HttpBreakdown> {
        let answered: Vec<&RequestRecord> =
            records.iter().map(Borrow::borrow).filter(|r| r.http.headers_us.is_some()).collect();
        if answered.is_empty() {
            return None;
        }
        Some(HttpBreakdown {
            responses: answered.len() as u64,
            new_connections: answered.iter().filter(|r| r.http.connect_us.is_some()).count() as u64,
            connect: Spread::of(answered.iter().filter_map(|r| r.http.connect_us)),
            tls: Spread::of(answered.iter().filter_map(|r| r.http.tls_us)),
            headers: Spread::of(answered.iter().filter_map(|r| r.http.headers_us)),
            first_byte: Spread::of(answered.iter().filter_map(|r| r.http.first_byte_us)),
        })
    }
}

/// The one line printed after the report.
pub fn render_http(b: &HttpBreakdown) -> String {
    let spread = |name: &str, s: Option<Spread>| {
        s.map(|s| format!("{name} mean {:.2} / median {:.2} / P99 {:.2} ms", s.mean_ms, s.median_ms, s.p99_ms))
    };
    let mut parts = vec![format!(
        "{} new connection{} for {} response{}",
        b.new_connections,
        if b.new_connections == 1 { "" } else { "s" },
        b.responses,
        if b.responses == 1 { "" } else { "s" }
    )];
    parts.extend(spread("connect", b.connect));
    parts.extend(spread("TLS", b.tls));
    parts.extend(spread("response head", b.headers));
    parts.extend(spread("first byte", b.first_byte));
    format!("HTTP: {} (times after the request was sent).", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::HttpTimes;

    fn rec(connect: Option<u32>, headers: Option<u32>, first: Option<u32>) -> RequestRecord {
        RequestRecord {
            http: HttpTimes { connect_us: connect, tls_us: None, headers_us: headers, first_byte_us: first },
            ..RequestRecord::default()
        }
    }

    #[test]
    fn only_answered_requests_count_and_reused_connections_have_no_connect() {
        let records = [
            rec(Some(300), Some(2_000), Some(2_500)),
            rec(None, Some(1_000), Some(1_500)),
            rec(None, Some(3_000), None),
            rec(None, None, None),
        ];
        let b = HttpBreakdown::of(&records).unwrap();
        assert_eq!((b.responses, b.new_connections), (3, 1));
        assert_eq!(b.connect, Some(Spread { mean_ms: 0.3, median_ms: 0.3, p99_ms: 0.3 }));
        assert_eq!(b.tls, None);
        let h = b.headers.unwrap();
        assert_eq!((h.mean_ms, h.median_ms), (2.0, 2.0));
        assert!((h.p99_ms - 2.98).abs() < 1e-9, "numpy's linear percentile: {h:?}");
        assert_eq!(b.first_byte.unwrap().mean_ms, 2.0);
        assert_eq!(HttpBreakdown::of(&[rec(None, None, None)]), None);
        insta::assert_snapshot!(render_http(&b), @"HTTP: 1 new connection for 3 responses, connect mean 0.30 / median 0.30 / P99 0.30 ms, response head mean 2.00 / median 2.00 / P99 2.98 ms, first byte mean 2.00 / median 2.00 / P99 2.49 ms (times after the request was sent).");
    }
}
