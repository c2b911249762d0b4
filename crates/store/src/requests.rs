//! The `requests` table: one row per [`RequestRecord`], chunk times in a compact blob.
//!
//! The blob is a format byte (1), then each chunk time's difference from the previous one
//! (the first from 0), zigzag-encoded as an unsigned LEB128 varint. Gaps between tokens are
//! tens of milliseconds, so most chunks take two or three bytes instead of four. Generated
//! texts are not stored.

use rusqlite::{Row, Transaction, params};
use servebench_core::record::{Failure, FailureKind, RequestRecord, TurnRef, Usage};

use crate::runs::{ChunkTimes, RunId, RunRecords};

const BLOB_FORMAT: u8 = 1;

/// Encodes chunk times (µs) as described in the module docs.
pub(crate) fn encode_chunks(chunks: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + chunks.len() * 2);
    out.push(BLOB_FORMAT);
    let mut prev = 0i64;
    for &c in chunks {
        let d = i64::from(c) - prev;
        prev = i64::from(c);
        let mut z = ((d << 1) ^ (d >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    out
}

/// Decodes [`encode_chunks`]'s output; `None` when the blob is damaged.
pub(crate) fn decode_chunks(blob: &[u8]) -> Option<Vec<u32>> {
    let (&format, mut rest) = blob.split_first()?;
    if format != BLOB_FORMAT {
        return None;
    }
    let mut out = Vec::with_capacity(rest.len() / 2);
    let mut prev = 0i64;
    while !rest.is_empty() {
        let mut z = 0u64;
        let mut shift = 0;
        loop {
            let (&b, tail) = rest.split_first()?;
            rest = tail;
            if shift > 63 {
                return None;
            }
            z |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        let d = ((z >> 1) as i64) ^ -((z & 1) as i64);
        prev = prev.checked_add(d)?;
        out.push(u32::try_from(prev).ok()?);
    }
    Some(out)
}

/// Inserts every record of a run.
pub(crate) fn insert(tx: &Transaction<'_>, run_id: RunId, records: &RunRecords) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare(
        "INSERT INTO requests (run_id, seq, dataset_index, planned_ns, arrival_ns, start_ns, ttft_us, latency_us,
             num_chunks, end_us, chunks, max_tokens, prompt_tokens, output_tokens, prompt_tokens_server,
             completion_tokens_server, prompt_tokens_client, output_tokens_client, status, failure_kind,
             failure_message, retried, conversation, turn, shared_prefix_tokens, server_queue_s, server_ttft_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
             ?22, ?23, ?24, ?25, ?26, ?27)",
    )?;
    let all = records.chunk_times == ChunkTimes::All;
    for (seq, r) in records.records.iter().enumerate() {
        let chunks = all.then(|| encode_chunks(&r.chunks_us));
        stmt.execute(params![
            run_id,
            seq as i64,
            r.index,
            ns(r.planned_ns),
            ns(r.arrival_ns),
            ns(r.start_ns),
            r.chunks_us.first(),
            r.chunks_us.last(),
            r.chunks_us.len() as i64,
            r.end_us,
            chunks,
            r.max_tokens,
            r.prompt_tokens(),
            r.output_tokens(),
            r.usage.prompt_tokens,
            r.usage.completion_tokens,
            r.prompt_tokens_client,
            r.output_tokens_client,
            r.status,
            r.failure.as_ref().map(|f| f.kind.as_str()),
            r.failure.as_ref().map(|f| f.message.as_str()),
            r.retried,
            r.turn.map(|t| t.conversation),
            r.turn.map(|t| t.turn),
            r.turn.map(|t| t.shared_prefix_tokens),
            r.server_queue_s,
            r.server_ttft_s,
        ])?;
    }
    Ok(())
}

/// Nanoseconds as SQLite's signed integer (runs do not last 292 years).
fn ns(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Why a stored record could not be read back.
pub(crate) struct Damaged;

/// Reads a run's records in their original order.
pub(crate) fn load(tx: &rusqlite::Connection, run_id: RunId) -> rusqlite::Result<Result<Vec<RequestRecord>, Damaged>> {
    let mut stmt = tx.prepare(
        "SELECT dataset_index, planned_ns, arrival_ns, start_ns, ttft_us, latency_us, num_chunks, end_us, chunks,
             max_tokens, prompt_tokens_server, completion_tokens_server, prompt_tokens_client, output_tokens_client,
             status, failure_kind, failure_message, retried, conversation, turn, shared_prefix_tokens,
             server_queue_s, server_ttft_s
         FROM requests WHERE run_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([run_id], read_row)?;
    let mut out = Vec::new();
    for row in rows {
        match row? {
            Some(r) => out.push(r),
            None => return Ok(Err(Damaged)),
        }
    }
    Ok(Ok(out))
}

fn read_row(row: &Row<'_>) -> rusqlite::Result<Option<RequestRecord>> {
    let u64_at = |i: usize| -> rusqlite::Result<u64> { Ok(row.get::<_, i64>(i)?.max(0) as u64) };
    let chunks_us = match row.get::<_, Option<Vec<u8>>>(8)? {
        Some(blob) => match decode_chunks(&blob) {
            Some(c) => c,
            None => return Ok(None),
        },
        None => {
            let (first, last): (Option<u32>, Option<u32>) = (row.get(4)?, row.get(5)?);
            let count: i64 = row.get(6)?;
            match (first, last) {
                (Some(f), Some(l)) if count > 1 => vec![f, l],
                (Some(f), _) => vec![f],
                _ => Vec::new(),
            }
        }
    };
    let failure = match row.get::<_, Option<String>>(15)? {
        Some(kind) => {
            let Ok(kind) = serde_json::from_value::<FailureKind>(serde_json::Value::String(kind)) else {
                return Ok(None);
            };
            Some(Failure { kind, message: row.get::<_, Option<String>>(16)?.unwrap_or_default() })
        }
        None => None,
    };
    let turn = match (row.get::<_, Option<u32>>(18)?, row.get::<_, Option<u32>>(19)?) {
        (Some(conversation), Some(turn)) => {
            Some(TurnRef { conversation, turn, shared_prefix_tokens: row.get::<_, Option<u32>>(20)?.unwrap_or(0) })
        }
        _ => None,
    };
    Ok(Some(RequestRecord {
        index: row.get(0)?,
        planned_ns: u64_at(1)?,
        arrival_ns: u64_at(2)?,
        start_ns: u64_at(3)?,
        chunks_us,
        end_us: row.get(7)?,
        max_tokens: row.get(9)?,
        usage: Usage { prompt_tokens: row.get(10)?, completion_tokens: row.get(11)? },
        prompt_tokens_client: row.get(12)?,
        output_tokens_client: row.get(13)?,
        text: String::new(),
        status: row.get(14)?,
        failure,
        retried: row.get(17)?,
        turn,
        server_queue_s: row.get(21)?,
        server_ttft_s: row.get(22)?,
        // Not kept per request in the store (the run's ledger in its result has them).
        ..RequestRecord::default()
    }))
}

/// The columns of the per-request export, in order.
pub(crate) const EXPORT_COLUMNS: [&str; 26] = [
    "seq",
    "index",
    "planned_s",
    "arrival_s",
    "start_s",
    "ttft_ms",
    "e2el_ms",
    "stream_end_ms",
    "num_chunks",
    "prompt_tokens",
    "output_tokens",
    "prompt_tokens_server",
    "output_tokens_server",
    "prompt_tokens_client",
    "output_tokens_client",
    "max_tokens",
    "status",
    "failure_kind",
    "failure_message",
    "retried",
    "conversation",
    "turn",
    "shared_prefix_tokens",
    "server_queue_s",
    "server_ttft_s",
    "chunk_times_ms",
];

/// One record's values for the export, matching [`EXPORT_COLUMNS`]: times in seconds since
/// the run's start (`*_s`) or milliseconds since the request was sent (`*_ms`), the chunk
/// times space-separated.
pub(crate) fn export_values(seq: usize, r: &RequestRecord) -> [serde_json::Value; 26] {
    use serde_json::{Value, json};
    let opt = |x: Option<u32>| x.map_or(Value::Null, |x| json!(x));
    let real = |x: Option<f64>| x.and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number);
    let ms = |us: Option<u32>| real(us.map(|u| f64::from(u) / 1000.0));
    let secs = |ns: u64| real(Some(ns as f64 / 1e9));
    let chunk_list = r.chunks_us.iter().map(|&u| (f64::from(u) / 1000.0).to_string()).collect::<Vec<_>>().join(" ");
    [
        json!(seq),
        json!(r.index),
        secs(r.planned_ns),
        secs(r.arrival_ns),
        secs(r.start_ns),
        ms(r.chunks_us.first().copied()),
        ms(r.chunks_us.last().copied()),
        ms(Some(r.end_us).filter(|&e| e > 0)),
        json!(r.chunks_us.len()),
        json!(r.prompt_tokens()),
        json!(r.output_tokens()),
        opt(r.usage.prompt_tokens),
        opt(r.usage.completion_tokens),
        opt(r.prompt_tokens_client),
        opt(r.output_tokens_client),
        json!(r.max_tokens),
        json!(r.status),
        r.failure.as_ref().map_or(Value::Null, |f| json!(f.kind.as_str())),
        r.failure.as_ref().map_or(Value::Null, |f| json!(f.message)),
        json!(r.retried),
        opt(r.turn.map(|t| t.conversation)),
        opt(r.turn.map(|t| t.turn)),
        opt(r.turn.map(|t| t.shared_prefix_tokens)),
        real(r.server_queue_s),
        real(r.server_ttft_s),
        json!(chunk_list),
    ]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn typical_gaps_take_two_or_three_bytes() {
        let chunks: Vec<u32> = (0..100).map(|i| 250_000 + i * 30_000).collect();
        let blob = encode_chunks(&chunks);
        assert!(blob.len() <= 1 + 3 + 99 * 3, "{}", blob.len());
        assert_eq!(decode_chunks(&blob).unwrap(), chunks);
        assert_eq!(decode_chunks(&encode_chunks(&[])).unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn damaged_blobs_are_refused() {
        assert_eq!(decode_chunks(&[]), None);
        assert_eq!(decode_chunks(&[2, 0]), None);
        // A varint cut off in the middle.
        assert_eq!(decode_chunks(&[1, 0x80]), None);
        // A value below zero.
        assert_eq!(decode_chunks(&[1, 1]), None);
        // A varint longer than 64 bits.
        assert_eq!(decode_chunks(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), None);
    }

    proptest! {
        #[test]
        fn chunk_times_round_trip(chunks in proptest::collection::vec(any::<u32>(), 0..200)) {
            prop_assert_eq!(decode_chunks(&encode_chunks(&chunks)).unwrap(), chunks);
        }

        #[test]
        fn decoding_never_panics(blob in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_chunks(&blob);
        }
    }
}
