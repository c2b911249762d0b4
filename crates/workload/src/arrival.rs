//! vLLM's arrival schedule, bit-exact: per-request gaps from the legacy `np.random.gamma`
//! (shape = burstiness, scale = 1/(rate·burstiness); exponential at burstiness 1), constant
//! gaps at infinite burstiness, none at an infinite rate; summed, and without a ramp rescaled so
//! the last request lands at N/rate. Linear and exponential ramps change the rate per request.

use servebench_core::config::{RampStrategy, Traffic};
use servebench_core::rng::RandomState;

use crate::WorkloadError;

fn check(traffic: &Traffic) -> Result<(), WorkloadError> {
    let b = traffic.burstiness;
    if b.is_nan() || b <= 0.0 {
        return Err(WorkloadError::Invalid(format!(
            "a positive burstiness factor is expected, got {b}; pass --burstiness > 0 (1 = Poisson)"
        )));
    }
    if let Some(r) = &traffic.ramp_up {
        let ok = r.start_rps.is_finite() && r.end_rps.is_finite() && r.start_rps <= r.end_rps;
        let positive = match r.strategy {
            RampStrategy::Linear => r.start_rps >= 0.0,
            RampStrategy::Exponential => r.start_rps > 0.0,
        };
        if !ok || !positive {
            return Err(WorkloadError::Invalid(format!(
                "the ramp-up needs a start rate no higher than its end rate (and above 0 for \
                 exponential), got {} -> {}; fix --ramp-up-start-rps and --ramp-up-end-rps",
                r.start_rps, r.end_rps
            )));
        }
    }
    Ok(())
}

/// Cumulative delays in seconds (vLLM's `delay_ts`) for `n` requests, drawing from the global
/// legacy `np.random` state.
pub fn delays(traffic: &Traffic, n: usize, np_random: &mut RandomState) -> Result<Vec<f64>, WorkloadError> {
    check(traffic)?;
    let b = traffic.burstiness;
    let mut d = Vec::with_capacity(n);
    for i in 0..n {
        let rate = traffic.rate_at(i, n);
        if rate.is_nan() || rate <= 0.0 {
            let flag = if traffic.ramp_up.is_some() { "--ramp-up-start-rps" } else { "--request-rate" };
            return Err(WorkloadError::Invalid(format!(
                "obtained non-positive request rate {rate} for request {i}; pass a positive {flag}"
            )));
        }
        d.push(if rate == f64::INFINITY {
            0.0
        } else if b == f64::INFINITY {
            1.0 / rate
        } else {
            np_random.gamma(b, 1.0 / (rate * b))
        });
    }
    for i in 1..d.len() {
        d[i] += d[i - 1];
    }
    if traffic.ramp_up.is_none()
        && let Some(&last) = d.last()
        && last != 0.0
    {
        let factor = (n as f64 / traffic.request_rate) / last;
        for x in &mut d {
            *x *= factor;
        }
    }
    Ok(d)
}

/// Arrival offsets from a trace's timestamps (seconds after its first request), scaled.
pub fn from_timestamps(timestamps_s: &[f64], time_scale: f64) -> Result<Vec<f64>, WorkloadError> {
    if !(time_scale.is_finite() && time_scale >= 0.0) {
        return Err(WorkloadError::Invalid(format!(
            "the trace time scale must be a finite number >= 0, got {time_scale}; fix --trace-time-scale"
        )));
    }
    Ok(timestamps_s.iter().map(|t| t * time_scale).collect())
}

/// Seconds to whole nanoseconds (rounded).
pub fn to_ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::testdata;
    use serde_json::Value;
    use servebench_core::config::RampUp;

    fn f(v: &Value) -> f64 {
        v.as_f64().unwrap_or(f64::INFINITY)
    }

    #[test]
    fn schedules_match_numpy_bit_for_bit() {
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(testdata().join("datasets/arrival.json")).unwrap()).unwrap();
        for c in r["cases"].as_array().unwrap() {
            let ramp_up = c.get("ramp").map(|r| RampUp {
                strategy: if r[0] == "linear" { RampStrategy::Linear } else { RampStrategy::Exponential },
                start_rps: r[1].as_f64().unwrap(),
                end_rps: r[2].as_f64().unwrap(),
            });
            let traffic = Traffic {
                request_rate: f(&c["rate"]),
                burstiness: f(&c["burstiness"]),
                ramp_up,
                seed: c["seed"].as_u64().unwrap(),
                ..Traffic::default()
            };
            let n = c["n"].as_u64().unwrap() as usize;
            let mut rs = RandomState::new(traffic.seed as u32);
            let got: Vec<u64> = delays(&traffic, n, &mut rs).unwrap().into_iter().map(f64::to_bits).collect();
            let want: Vec<u64> = c["delays_bits"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            assert_eq!(got, want, "{c}");
        }
    }

    #[test]
    fn the_last_arrival_lands_at_n_over_rate() {
        let traffic = Traffic { request_rate: 7.0, burstiness: 0.3, ..Traffic::default() };
        let d = delays(&traffic, 50, &mut RandomState::new(3)).unwrap();
        assert!((d[49] - 50.0 / 7.0).abs() < 1e-9);
        assert!(d.windows(2).all(|w| w[0] <= w[1]));
        assert!(d[0] > 0.0);
    }

    #[test]
    fn bad_traffic_is_rejected() {
        let mut rs = RandomState::new(0);
        let zero_b = Traffic { burstiness: 0.0, request_rate: 1.0, ..Traffic::default() };
        assert!(delays(&zero_b, 3, &mut rs).unwrap_err().to_string().contains("--burstiness"));
        let neg_rate = Traffic { request_rate: -1.0, ..Traffic::default() };
        assert!(delays(&neg_rate, 3, &mut rs).unwrap_err().to_string().contains("--request-rate"));
        let bad_ramp = Traffic {
            ramp_up: Some(RampUp { strategy: RampStrategy::Exponential, start_rps: 0.0, end_rps: 5.0 }),
            ..Traffic::default()
        };
        assert!(delays(&bad_ramp, 3, &mut rs).is_err());
        // A linear ramp from 0 sends its first request at rate 0: the ramp's flag is named.
        let from_zero = Traffic {
            ramp_up: Some(RampUp { strategy: RampStrategy::Linear, start_rps: 0.0, end_rps: 5.0 }),
            ..Traffic::default()
        };
        let err = delays(&from_zero, 3, &mut rs).unwrap_err().to_string();
        assert!(err.contains("--ramp-up-start-rps") && !err.contains("--request-rate"), "{err}");
        assert!(delays(&Traffic::default(), 0, &mut rs).unwrap().is_empty());
    }

    #[test]
    fn trace_times_scale_and_convert_to_ns() {
        assert_eq!(from_timestamps(&[0.0, 1.5], 2.0).unwrap(), [0.0, 3.0]);
        assert!(from_timestamps(&[0.0], -1.0).is_err());
        assert_eq!(to_ns(1.234_567_891_4), 1_234_567_891);
    }
}
