//! ROCm's QuickReduce: the all-reduce vLLM runs within one node of MI300-series GPUs (MI300X,
//! MI325X, MI355X) when `VLLM_ROCM_QUICK_REDUCE_QUANTIZATION` chooses a level, for messages
//! whose size its table allows, with the payload quantized on the wire.
//!
//! As vLLM 0.11 to 0.13 run it (`quick_all_reduce.py`, `csrc/quickreduce`): a two-shot
//! all-reduce (reduce-scatter, then all-gather) over 2, 4 or 8 GPUs of one node, which vLLM
//! tries before its custom all-reduce for every message from the level's minimum size (by the
//! number of GPUs; BF16 is cast to FP16 first, so FP16's row applies) up to 2 GiB. Each
//! 2,048-value atom of 4,096 bytes travels as 4,096 (FP), 2,176 (INT8), 1,664 (INT6) or 1,152
//! bytes (INT4: values and their FP16 scales per 32): that fraction of the bytes crosses the
//! link, at the link's rate, but the kernel that quantizes, exchanges and reduces a message
//! takes it no faster than [`PROCESS_GBS`].

use serde::Serialize;

use super::terms::LinkCost;

/// The rate at which QuickReduce's kernels take a message however few bytes cross the link,
/// GB/s of the message: AMD's benchmark of it on MI355X (ROCm blog "QuickReduce FP4
/// Quantization and Benchmarking on MI355") measures INT4 and FP4 at 1.52 times RCCL's speed
/// over 8 GPUs on a 1 GB message, where the quantized bytes alone over the seven links would
/// allow 3.6 times (RCCL at the links' 538 GB/s: 1 GB in 3.25 ms; QuickReduce 2.14 ms), and
/// 4.14 times over 2 GPUs, where one link binds. The same kernels' rate is assumed on the
/// MI300X and MI325X.
pub const PROCESS_GBS: f64 = 467.0;

/// A QuickReduce level, as vLLM's environment variable names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QuickReduce {
    /// vLLM's default: no QuickReduce.
    #[default]
    None,
    Fp,
    Int8,
    Int6,
    Int4,
}

const MB: f64 = 1024.0 * 1024.0;

/// The largest message QuickReduce takes by default (`kMaxProblemSize`), bytes.
const MAX_BYTES: f64 = 2.0 * 1024.0 * MB;

impl QuickReduce {
    /// A level by vLLM's name (`NONE`, `FP`, `INT8`, `INT6`, `INT4`), in any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Some(QuickReduce::None),
            "fp" => Some(QuickReduce::Fp),
            "int8" => Some(QuickReduce::Int8),
            "int6" => Some(QuickReduce::Int6),
            "int4" => Some(QuickReduce::Int4),
            _ => None,
        }
    }

    /// The fraction of a message's bytes that crosses the link (1 without QuickReduce).
    pub fn wire_fraction(self) -> f64 {
        match self {
            QuickReduce::None | QuickReduce::Fp => 1.0,
            QuickReduce::Int8 => 2176.0 / 4096.0,
            QuickReduce::Int6 => 1664.0 / 4096.0,
            QuickReduce::Int4 => 1152.0 / 4096.0,
        }
    }

    /// The smallest message it takes over `gpus` GPUs, bytes (vLLM's `_QR_MIN_SIZE`, FP16
    /// row); `None` where it does not run (no level, or a group of other than 2, 4 or 8).
    pub fn min_bytes(self, gpus: u32) -> Option<f64> {
        // Columns: FP, INT8, INT6, INT4.
        let row: [f64; 4] = match gpus {
            2 => [1.0, 2.0, 2.0, 1.0],
            4 => [1.0, 16.0, 4.0, 2.0],
            8 => [16.0, 4.0, 4.0, 2.0],
            _ => return None,
        };
        let column = match self {
            QuickReduce::None => return None,
            QuickReduce::Fp => 0,
            QuickReduce::Int8 => 1,
            QuickReduce::Int6 => 2,
            QuickReduce::Int4 => 3,
        };
        Some(row[column] * MB)
    }

    /// Whether QuickReduce takes a message of `bytes` over `gpus` GPUs.
    pub fn takes(self, gpus: u32, bytes: f64) -> bool {
        self.min_bytes(gpus).is_some_and(|min| (min..=MAX_BYTES).contains(&bytes))
    }

    /// The bytes an all-reduce of `bytes` over `gpus` GPUs puts on the link: the wire fraction
    /// of them where QuickReduce takes the message, all of them where it does not.
    pub fn wire_bytes(self, gpus: u32, bytes: f64) -> f64 {
        if self.takes(gpus, bytes) { bytes * self.wire_fraction() } else { bytes }
    }

    /// Seconds of an all-reduce of `bytes` over `gpus` GPUs on `link`: the link's time for the
    /// bytes that cross it, and where QuickReduce takes the message no less than its kernels'
    /// time for the whole message ([`PROCESS_GBS`]).
    pub fn allreduce_seconds(self, gpus: u32, bytes: f64, link: &LinkCost) -> f64 {
        let ranks = f64::from(gpus);
        let wire = link.allreduce_seconds(ranks, self.wire_bytes(gpus, bytes));
        if self.takes(gpus, bytes) { wire.max(link.fixed_s + bytes / (PROCESS_GBS * 1e9)) } else { wire }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn int4_takes_prefill_sized_messages_at_a_quarter_of_the_bytes() {
        let q = QuickReduce::Int4;
        // gpt-oss: 2,880 BF16 values a token. 64 decodes (368,640 bytes) go by the custom
        // all-reduce, whole; a 1,024-token prefill (5.9 MB) by QuickReduce.
        assert_eq!(q.wire_bytes(8, 64.0 * 5760.0), 64.0 * 5760.0);
        let prefill = 1024.0 * 5760.0;
        assert!((q.wire_bytes(8, prefill) / prefill - 0.28125).abs() < 1e-12);
        // Where vLLM does not run it: one GPU, six GPUs, no level.
        for gpus in [1, 6, 16] {
            assert_eq!(q.wire_bytes(gpus, prefill), prefill);
        }
        assert_eq!(QuickReduce::None.wire_bytes(8, prefill), prefill);
        // FP moves every byte; over 8 GPUs it only starts at 16 MB.
        assert_eq!(QuickReduce::Fp.wire_bytes(2, prefill), prefill);
        assert_eq!(QuickReduce::Fp.min_bytes(8), Some(16.0 * MB));
        assert_eq!(QuickReduce::parse("INT4"), Some(QuickReduce::Int4));
        assert_eq!(QuickReduce::parse("q4"), None);
    }

    #[test]
    fn over_eight_gpus_the_kernels_bind_and_over_two_the_link() {
        // MI355X's mesh: 538 GB/s over seven links, one of them between two GPUs.
        let mesh = |gpus: f64| LinkCost { fixed_s: 9e-6, step_s: 0.0, bandwidth: 538e9 * (gpus - 1.0) / 7.0 };
        let gb = 1e9;
        let speedup = |gpus: u32| {
            let link = mesh(f64::from(gpus));
            QuickReduce::None.allreduce_seconds(gpus, gb, &link) / QuickReduce::Int4.allreduce_seconds(gpus, gb, &link)
        };
        // AMD's 1.52 times at TP8 (by construction of the rate); the wire's 3.56 at TP2.
        assert!((speedup(8) - 1.52).abs() < 0.02, "{}", speedup(8));
        assert!((speedup(2) - 4096.0 / 1152.0).abs() < 0.01, "{}", speedup(2));
        assert!(speedup(4) > speedup(8) && speedup(4) < speedup(2));
    }

    proptest! {
        /// A level never puts more bytes on the link than the message has, nor fewer than
        /// its wire fraction of them; more bytes never put fewer on the link within its range.
        #[test]
        fn wire_bytes_stay_between_the_fraction_and_the_message(
            level in 0usize..5, gpus in 1u32..10, bytes in 1.0f64..3e9, more in 1.0f64..2.0,
        ) {
            let q = [QuickReduce::None, QuickReduce::Fp, QuickReduce::Int8, QuickReduce::Int6, QuickReduce::Int4][level];
            let w = q.wire_bytes(gpus, bytes);
            prop_assert!(w <= bytes && w >= bytes * q.wire_fraction() - 1e-6);
            let bigger = bytes * more;
            if q.min_bytes(gpus).is_some_and(|min| bytes >= min) && bigger <= MAX_BYTES {
                prop_assert!(q.wire_bytes(gpus, bigger) >= w);
            }
        }

        /// Its time never falls below the link's time for the bytes that cross it, and more
        /// bytes never take less time where it takes both messages.
        #[test]
        fn more_bytes_never_take_less_time(
            level in 0usize..5, gpus in prop::sample::select(vec![2u32, 4, 8]), bytes in 1.0f64..1e9,
            more in 1.0f64..2.0, gbs in 10.0f64..1000.0,
        ) {
            let q = [QuickReduce::None, QuickReduce::Fp, QuickReduce::Int8, QuickReduce::Int6, QuickReduce::Int4][level];
            let link = LinkCost { fixed_s: 9e-6, step_s: 0.0, bandwidth: gbs * 1e9 };
            let t = q.allreduce_seconds(gpus, bytes, &link);
            prop_assert!(t >= link.allreduce_seconds(f64::from(gpus), q.wire_bytes(gpus, bytes)) - 1e-15);
            if q.takes(gpus, bytes) == q.takes(gpus, bytes * more) {
                prop_assert!(q.allreduce_seconds(gpus, bytes * more, &link) >= t - 1e-15);
            }
        }
    }
}
