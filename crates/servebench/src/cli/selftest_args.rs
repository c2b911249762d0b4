//! `servebench selftest`'s flags.

use std::time::Duration;

use clap::Args;

/// `servebench selftest`: the client against the built-in scripted server at rising concurrency.
#[derive(Args, Debug, Clone)]
pub struct SelftestArgs {
    /// Concurrent streams, one level each, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "1,100,1000,2048,4096")]
    pub levels: Vec<usize>,
    /// The server's time to the first token, ms (fractions allowed: 0.5).
    #[arg(long = "ttft-ms", value_name = "MS", default_value = "50", value_parser = millis)]
    pub ttft: Duration,
    /// The server's gap between tokens, ms (fractions allowed: 0.5).
    #[arg(long = "itl-ms", value_name = "MS", default_value = "10", value_parser = millis)]
    pub itl: Duration,
    /// Tokens per answer (one per streamed chunk).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub output_tokens: u32,
    /// Requests per level, as a multiple of its streams (at least 50 requests).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub requests_per_stream: usize,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The run store (SQLite); default in the user's data directory, or $SERVEBENCH_DB.
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Do not save the levels' runs to the run store.
    #[arg(long)]
    pub no_store: bool,
}

/// A time in milliseconds, 0 or more, fractions allowed.
fn millis(s: &str) -> Result<Duration, String> {
    let ms: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of milliseconds (e.g. 50 or 0.5)"))?;
    if !(ms.is_finite() && ms >= 0.0) {
        return Err(format!("{s} is not a time: give 0 ms or more"));
    }
    Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| format!("{s} ms is too long"))
}

#[cfg(test)]
mod tests {
    use super::millis;
    use std::time::Duration;

    #[test]
    fn millis_take_fractions_and_refuse_what_is_not_a_time() {
        assert_eq!(millis("50").unwrap(), Duration::from_millis(50));
        assert_eq!(millis("0.5").unwrap(), Duration::from_micros(500));
        assert_eq!(millis("0").unwrap(), Duration::ZERO);
        for bad in ["NaN", "-1", "inf", "x", "1e300"] {
            assert!(millis(bad).is_err(), "{bad}");
        }
        assert!(millis("NaN").unwrap_err().contains("not a time"));
        assert!(millis("x").unwrap_err().contains("not a number of milliseconds"));
    }
}
