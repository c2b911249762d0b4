//! Hardware descriptions: memory, bandwidth, peak throughput per format, GPUs per node, the links
//! inside and between nodes, and the default serving-stack constants for the device.
//!
//! Presets are TOML files (see `presets/hardware/`); [`HardwareSpec::from_toml`] reads one and
//! validates it, so a user-written preset fails early with the file named.

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::profile::StackProfile;

/// Dense tensor throughput per format, TFLOP/s (sparse marketing figures are twice these).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeakTflops {
    pub bf16: f64,
    #[serde(default)]
    pub fp8: Option<f64>,
    #[serde(default)]
    pub fp4: Option<f64>,
    /// Integer 4-bit peak where published (informational: AWQ kernels compute in BF16).
    #[serde(default)]
    pub int4: Option<f64>,
    /// The SMs' 32-bit integer rate, TOPS (datasheet: SMs × boost clock × integer lanes × 2, the
    /// lanes 64 an SM up to Hopper and 128 on consumer Blackwell and GB10): what
    /// prices dequantizing (weight-only) kernels; see [`PeakTflops::dequant_issue`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int32: Option<f64>,
    /// The special function units' exponentials, tera a second: what bounds attention's softmax,
    /// one exponential a query-key score. On NVIDIA parts 16 a clock an SM (`MUFU.EX2`), 32 on
    /// Blackwell Ultra, at the clock the tensor peak assumes: the BF16 peak over 256 on Hopper,
    /// over 512 on Blackwell (whose tensor cores doubled and SFUs did not), over 128 on the
    /// A100. Unset: no bound (the DGX Spark, whose tensor rate an SM is too low for it to bind,
    /// and the AMD parts, not looked up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp2: Option<f64>,
    /// The activations the serving stack's expert kernels for MXFP4 checkpoints (gpt-oss) take
    /// on this device: `fp8` (W4A8 at the FP8 rate, vLLM's FlashInfer kernels on Blackwell),
    /// `bf16` (W4A16: the weights dequantized to BF16, as ROCm vLLM's AITER kernels on the
    /// MI355X and Marlin everywhere). Unset: FP8 where the device has FP4 and FP8 units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mxfp4_activations: Option<Mxfp4Activations>,
}

/// See [`PeakTflops::mxfp4_activations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mxfp4Activations {
    Fp8,
    Bf16,
}

impl PeakTflops {
    /// The peak for a compute format, falling back to BF16 where the format has none.
    pub fn get(&self, p: crate::precision::ComputePrecision) -> f64 {
        use crate::precision::ComputePrecision as C;
        match p {
            C::Bf16 | C::WeightOnly => self.bf16,
            C::Fp8 => self.fp8.unwrap_or(self.bf16),
            C::Fp4 => self.fp4.or(self.fp8).unwrap_or(self.bf16),
        }
    }

    /// The rate, in BF16 FLOP/s equivalents (TFLOPS), at which the SMs issue the work of a
    /// dequantizing (weight-only) kernel: Marlin and its kin unpack every weight on the integer
    /// units and multiply with `mma.sync`, so their speed follows the SMs' issue rate (the
    /// integer rate), not the tensor peak. The integer rate times [`WEIGHT_ONLY_PER_INT32`],
    /// so that the weight-only ceilings fitted on the H100 keep their meaning there; the BF16
    /// peak where the preset gives no integer rate.
    pub fn dequant_issue(&self) -> f64 {
        self.int32.map_or(self.bf16, |i| i * WEIGHT_ONLY_PER_INT32)
    }

    /// A dequantizing product's rate, TFLOP/s: the lower of its issue-bound rate
    /// (`issue_ceiling` of [`PeakTflops::dequant_issue`]) and the tensor cores' BF16 rate at
    /// `mma`. The first binds on parts with strong tensor cores (the H100; the A100's expert
    /// products, whose ceiling is low), the second where the integer rate is high beside the
    /// tensor rate (the A100's dense products, RTX 4090, consumer Blackwell, GB10).
    pub fn weight_only_rate(&self, issue_ceiling: f64, mma: f64) -> f64 {
        (self.dequant_issue() * issue_ceiling).min(self.bf16 * mma)
    }

    /// Whether [`PeakTflops::weight_only_rate`] is the tensor cores' rate.
    pub fn weight_only_tensor_bound(&self, issue_ceiling: f64, mma: f64) -> bool {
        self.bf16 * mma < self.dequant_issue() * issue_ceiling
    }

    /// The SMs' integer rate, TOPS: the preset's, or where it gives none the BF16 peak over the
    /// H100's ratio of the two (the inverse of [`PeakTflops::dequant_issue`]'s fallback).
    pub fn integer_tops(&self) -> f64 {
        self.dequant_issue() / WEIGHT_ONLY_PER_INT32
    }

    /// Every rate (tensor and integer) times `k`: what the SMs deliver at a clock `k` times the
    /// one the rates assume (see [`HardwareSpec::sustained_clock`]).
    pub fn at_clock(&self, k: f64) -> PeakTflops {
        let scale = |v: Option<f64>| v.map(|x| x * k);
        PeakTflops {
            bf16: self.bf16 * k,
            fp8: scale(self.fp8),
            fp4: scale(self.fp4),
            int4: scale(self.int4),
            int32: scale(self.int32),
            exp2: scale(self.exp2),
            mxfp4_activations: self.mxfp4_activations,
        }
    }
}

/// The H100 SXM's BF16 tensor peak over its integer rate (989 / 33.5): BF16 FLOP/s
/// equivalents of a dequantizing kernel's issue rate per integer op/s (see
/// [`PeakTflops::dequant_issue`]).
pub const WEIGHT_ONLY_PER_INT32: f64 = 989.0 / 33.5;

/// The SMs' boost clock of the H100 SXM, MHz: the clock at which the stack constants that are
/// chains of small kernels (`t_layer_us`, `t_moe_us`) were calibrated (see
/// [`HardwareSpec::latency_scale`]).
pub const CALIBRATION_CLOCK_MHZ: f64 = 1980.0;

mod link;
mod uncertainty;
pub use link::{KNOWN_LINKS, KnownLink, Link, NormFusion};
pub use uncertainty::{Spread, Uncertainty};

/// One device type, as a preset describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HardwareSpec {
    /// The preset name (`h100-sxm`).
    pub name: String,
    /// Other names it answers to.
    pub aliases: Vec<String>,
    pub description: String,
    /// The name the driver reports (vLLM's batch defaults look for "A100" in it).
    pub device_name: String,
    /// Device memory visible to the framework, GiB.
    pub memory_gib: f64,
    /// Memory bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    pub peak_tflops: PeakTflops,
    /// The SMs' clock under a serving load, as a fraction of what the stack constants assume:
    /// they were calibrated on the H100 SXM, whose 700 W lets it hold the clock its share of the
    /// datasheet peaks implies; a part held back further by its power limit computes at this
    /// fraction of its peaks (every tensor and integer rate; memory is not affected). 1 unless a
    /// preset's own measurements say otherwise (the H100 PCIe at 350 W, CALIBRATION.md).
    pub sustained_clock: f64,
    /// The SMs' (or CUs') boost clock from the datasheet, MHz, where it is published: the clock
    /// at which a light step's small, latency-bound kernels run (see
    /// [`HardwareSpec::latency_scale`]).
    pub boost_clock_mhz: Option<f64>,
    /// The kernels the device's serving stack runs an MXFP4 checkpoint's experts with where
    /// they dequantize to BF16 (W4A16), unless `mxfp4-backend` says otherwise: Marlin on CUDA
    /// (the path the stack constants were calibrated on), OpenAI's Triton kernels on ROCm, where
    /// vLLM has no Marlin.
    pub mxfp4_backend: crate::precision::Mxfp4Backend,
    /// The kernels whose weight layout those experts take in memory, which sizes the KV pool:
    /// the kernels vLLM's images really run there (OpenAI's Triton kernels on Hopper, where
    /// `triton_kernels` is installed; Marlin before Hopper; Triton on ROCm). The same as
    /// `mxfp4_backend` unless a preset says otherwise (the Hopper presets, whose constants were
    /// calibrated with Marlin's pricing on measurements of Triton's kernels).
    pub mxfp4_layout: crate::precision::Mxfp4Backend,
    pub gpus_per_node: u32,
    /// The link between GPUs of one node; absent on single-GPU machines.
    pub intra_node: Option<Link>,
    /// The link between nodes.
    pub inter_node: Link,
    /// Default serving-stack constants on this device.
    pub stack: StackProfile,
    /// How far its predictions are expected to be off.
    pub uncertainty: Uncertainty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHardware {
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    description: String,
    device_name: String,
    memory_gib: f64,
    bandwidth_gbs: f64,
    peak_tflops: PeakTflops,
    #[serde(default)]
    sustained_clock: Option<f64>,
    #[serde(default)]
    boost_clock_mhz: Option<f64>,
    #[serde(default)]
    mxfp4_backend: crate::precision::Mxfp4Backend,
    #[serde(default)]
    mxfp4_layout: Option<crate::precision::Mxfp4Backend>,
    gpus_per_node: u32,
    #[serde(default)]
    intra_node: Option<Link>,
    inter_node: Link,
    #[serde(default)]
    stack: Option<serde_json::Value>,
    #[serde(default)]
    uncertainty: Option<Uncertainty>,
}

impl HardwareSpec {
    /// Reads a hardware preset; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, SimError> {
        let bad = |message: String| SimError::Preset { origin: origin.to_string(), message };
        let raw: RawHardware = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let mut stack = StackProfile::default();
        if let Some(patch) = &raw.stack {
            stack.apply_patch(patch).map_err(|e| bad(format!("[stack]: {e}")))?;
        }
        let positive = [
            ("memory_gib", raw.memory_gib),
            ("bandwidth_gbs", raw.bandwidth_gbs),
            ("peak_tflops.bf16", raw.peak_tflops.bf16),
            ("inter_node.bandwidth_gbs", raw.inter_node.bandwidth_gbs),
        ];
        let p = &raw.peak_tflops;
        let given = [
            ("peak_tflops.fp8", p.fp8),
            ("peak_tflops.fp4", p.fp4),
            ("peak_tflops.int4", p.int4),
            ("peak_tflops.int32", p.int32),
            ("peak_tflops.exp2", p.exp2),
        ]
        .into_iter()
        .filter_map(|(field, v)| v.map(|v| (field, v)));
        for (field, v) in positive.into_iter().chain(given) {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!("{field} must be a positive number, got {v}")));
            }
        }
        let sustained_clock = raw.sustained_clock.unwrap_or(1.0);
        if !(sustained_clock.is_finite() && sustained_clock > 0.0 && sustained_clock <= 1.5) {
            return Err(bad(format!("sustained_clock must be in (0, 1.5], got {sustained_clock}")));
        }
        if let Some(mhz) = raw.boost_clock_mhz.filter(|c| !(c.is_finite() && (100.0..=10_000.0).contains(c))) {
            return Err(bad(format!("boost_clock_mhz must be a clock in MHz between 100 and 10000, got {mhz}")));
        }
        let uncertainty = raw.uncertainty.unwrap_or_default();
        uncertainty.validate().map_err(bad)?;
        if raw.gpus_per_node == 0 {
            return Err(bad("gpus_per_node must be at least 1".into()));
        }
        for link in raw.intra_node.iter().chain([&raw.inter_node]) {
            link.check().map_err(bad)?;
        }
        if raw.gpus_per_node > 1 && raw.intra_node.is_none() {
            return Err(bad(format!(
                "gpus_per_node is {} but there is no [intra_node] link; add one",
                raw.gpus_per_node
            )));
        }
        Ok(HardwareSpec {
            name: raw.name,
            aliases: raw.aliases,
            description: raw.description,
            device_name: raw.device_name,
            memory_gib: raw.memory_gib,
            bandwidth_gbs: raw.bandwidth_gbs,
            peak_tflops: raw.peak_tflops,
            sustained_clock,
            boost_clock_mhz: raw.boost_clock_mhz,
            mxfp4_backend: raw.mxfp4_backend,
            mxfp4_layout: raw.mxfp4_layout.unwrap_or(raw.mxfp4_backend),
            gpus_per_node: raw.gpus_per_node,
            intra_node: raw.intra_node,
            inter_node: raw.inter_node,
            stack,
            uncertainty,
        })
    }

    /// How much longer than on the H100 SXM a latency-bound kernel takes here: the calibration
    /// clock over the device's boost clock (1 where the preset gives none). A small kernel of a
    /// light step (a norm, a projection of a few rows, a router, a top-k) is a chain of
    /// dependent instructions and barriers counted in the SMs' cycles, not a stream limited by
    /// memory or by power, so it runs at the boost clock and its time scales as its inverse;
    /// the constants that are such latencies were calibrated at [`CALIBRATION_CLOCK_MHZ`]. The
    /// expert kernels' fixed costs are long reads from memory and do not scale.
    pub fn latency_scale(&self) -> f64 {
        self.boost_clock_mhz.map_or(1.0, |mhz| CALIBRATION_CLOCK_MHZ / mhz)
    }

    /// vLLM's test for its larger batch defaults: at least 70 GiB and not an A100.
    pub fn has_large_batch_defaults(&self) -> bool {
        self.memory_gib >= 70.0 && !self.device_name.to_ascii_lowercase().contains("a100")
    }

    /// Whether this preset answers to `name`: its name, an alias or the device's own name
    /// (`nvidia-smi`'s, as results record it), ignoring case and whether words are joined by
    /// `-`, `_` or spaces (`H100_SXM`, `NVIDIA H100 80GB HBM3`).
    pub fn matches(&self, name: &str) -> bool {
        let n = normalized(name);
        self.names().any(|known| normalized(known) == n)
    }

    /// How near `name` comes to this preset's name, an alias or the device's name: 1 for the
    /// same, 0 for nothing alike (edit distance over the longer length, as
    /// [`HardwareSpec::matches`] reads them).
    pub fn nearness(&self, name: &str) -> f64 {
        let n = normalized(name);
        self.names().map(|known| strsim::normalized_levenshtein(&normalized(known), &n)).fold(0.0, f64::max)
    }

    fn names(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.name).chain(&self.aliases).chain(std::iter::once(&self.device_name))
    }
}

/// Lower case, words joined by `-`.
fn normalized(name: &str) -> String {
    name.split(|c: char| c.is_whitespace() || c == '_' || c == '-')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        name = "toy"
        description = "a test device"
        device_name = "Toy GPU"
        memory_gib = 16
        bandwidth_gbs = 500
        gpus_per_node = 1
        [peak_tflops]
        bf16 = 100
        [inter_node]
        name = "25gbe"
        bandwidth_gbs = 2.8
        allreduce_latency_us = 200
        [stack]
        t0_ms = 4.5
    "#;

    #[test]
    fn a_name_is_as_near_as_its_nearest_spelling() {
        let toy = HardwareSpec::from_toml(MINIMAL, "toy").unwrap();
        assert_eq!(toy.nearness(&toy.name), 1.0);
        assert_eq!(toy.nearness(&toy.name.to_uppercase().replace('-', " ")), 1.0);
        let typo = format!("{}x", toy.name);
        assert!((0.75..1.0).contains(&toy.nearness(&typo)), "{}", toy.nearness(&typo));
        assert!(toy.nearness("zzzzzzzzzzzz") < 0.5);
    }

    /// A rate of zero would price a step at infinity (or NaN): every rate a preset gives, the
    /// optional peaks and the links' bandwidths too, must be positive.
    #[test]
    fn a_rate_of_zero_is_refused() {
        for (from, to, field) in [
            ("bf16 = 100", "bf16 = 100\nexp2 = 0", "peak_tflops.exp2"),
            ("bf16 = 100", "bf16 = 100\nfp8 = -1", "peak_tflops.fp8"),
            ("bandwidth_gbs = 2.8", "bandwidth_gbs = 0", "bandwidth_gbs must be a positive number"),
        ] {
            let e = HardwareSpec::from_toml(&MINIMAL.replace(from, to), "toy").unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn a_sustained_clock_outside_its_range_is_refused() {
        let with = |k: &str| MINIMAL.replace("gpus_per_node = 1", &format!("gpus_per_node = 1\nsustained_clock = {k}"));
        assert_eq!(HardwareSpec::from_toml(MINIMAL, "toy").unwrap().sustained_clock, 1.0);
        assert_eq!(HardwareSpec::from_toml(&with("0.5"), "toy").unwrap().sustained_clock, 0.5);
        for bad in ["0", "-1", "2"] {
            let e = HardwareSpec::from_toml(&with(bad), "toy").unwrap_err().to_string();
            assert!(e.contains("sustained_clock must be in (0, 1.5]"), "{e}");
        }
    }

    #[test]
    fn a_bridge_needs_the_link_past_it_and_nothing_else_has_one() {
        let with = |link: &str| MINIMAL.replace("gpus_per_node = 1", &format!("gpus_per_node = 4\n{link}"));
        let bridge = "[intra_node]\nname = \"b\"\nbandwidth_gbs = 300\nallreduce_latency_us = 9\n";
        let past = "[intra_node.beyond]\nname = \"pcie5\"\nbandwidth_gbs = 50\nallreduce_latency_us = 25\n";
        let ok = HardwareSpec::from_toml(&with(&format!("{bridge}bridge_gpus = 2\n{past}")), "toy").unwrap();
        let link = ok.intra_node.unwrap();
        assert_eq!((link.for_group(2).name.as_str(), link.for_group(3).name.as_str()), ("b", "pcie5"));
        let refused = |text: String, says: &str| {
            let e = HardwareSpec::from_toml(&with(&text), "toy").unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        };
        refused(format!("{bridge}bridge_gpus = 2\n"), "needs the link past it");
        refused(format!("{bridge}{past}"), "give bridge_gpus too");
        refused(format!("{bridge}bridge_gpus = 1\n{past}"), "at least 2 GPUs");
    }

    #[test]
    fn a_boost_clock_sets_the_latency_scale_and_a_bad_one_is_refused() {
        let with = |c: &str| MINIMAL.replace("gpus_per_node = 1", &format!("gpus_per_node = 1\nboost_clock_mhz = {c}"));
        assert_eq!(HardwareSpec::from_toml(MINIMAL, "toy").unwrap().latency_scale(), 1.0);
        let hw = HardwareSpec::from_toml(&with("2475"), "toy").unwrap();
        assert_eq!((hw.boost_clock_mhz, hw.latency_scale()), (Some(2475.0), 0.8));
        for bad in ["0", "-1980", "1.98", "1e9"] {
            let e = HardwareSpec::from_toml(&with(bad), "toy").unwrap_err().to_string();
            assert!(e.contains("boost_clock_mhz must be a clock in MHz"), "{e}");
        }
    }

    #[test]
    fn a_minimal_preset_reads_and_patches_the_default_stack() {
        let hw = HardwareSpec::from_toml(MINIMAL, "toy.toml").unwrap();
        assert_eq!(hw.stack.t0_ms, 4.5);
        assert_eq!(hw.stack.eta_bw, StackProfile::default().eta_bw);
        assert!(!hw.has_large_batch_defaults());
        assert!(hw.matches("TOY"));
        assert_eq!(hw.uncertainty, Uncertainty::default());
        let bad = format!(
            "{MINIMAL}\n[uncertainty]\nsource = \"x\"\nttft = [0.2, -0.2]\ntpot = [0, 0]\nthroughput = [0, 0]\n"
        );
        let err = HardwareSpec::from_toml(&bad, "toy.toml").unwrap_err().to_string();
        assert!(err.contains("uncertainty.ttft"), "{err}");
        let band = "[uncertainty]\nsource = \"x\"\nttft = [-0.1, 0.1]\ntpot = [0, 0]\nthroughput = [0, 0]\n";
        let elsewhere = |tpot: &str| {
            format!(
                "{MINIMAL}\n{band}[uncertainty.elsewhere]\nsource = \"y\"\nttft = [-0.6, 0.4]\ntpot = {tpot}\n\
                 throughput = [-0.3, 0.3]\n"
            )
        };
        let hw = HardwareSpec::from_toml(&elsewhere("[-0.3, 0.3]"), "toy.toml").unwrap();
        assert_eq!(hw.uncertainty.outside().ttft, [-0.6, 0.4]);
        let err = HardwareSpec::from_toml(&elsewhere("[-0.1, 0.3]"), "toy.toml").unwrap_err().to_string();
        assert!(err.contains("toy.toml") && err.contains("uncertainty.elsewhere.tpot"), "{err}");
    }

    #[test]
    fn bad_presets_name_the_file_and_the_field() {
        let text = MINIMAL.replace("memory_gib = 16", "memory_gib = -1");
        let err = HardwareSpec::from_toml(&text, "toy.toml").unwrap_err().to_string();
        assert!(err.contains("toy.toml") && err.contains("memory_gib"), "{err}");
        let text = MINIMAL.replace("t0_ms = 4.5", "t0_msec = 4.5");
        let err = HardwareSpec::from_toml(&text, "toy.toml").unwrap_err().to_string();
        assert!(err.contains("t0_msec"), "{err}");
        let text = MINIMAL.replace("gpus_per_node = 1", "gpus_per_node = 4");
        let err = HardwareSpec::from_toml(&text, "toy.toml").unwrap_err().to_string();
        assert!(err.contains("intra_node"), "{err}");
    }

    #[test]
    fn links_are_found_by_name() {
        assert_eq!(Link::named("200GbE").unwrap().bandwidth_gbs, 22.0);
        assert!(Link::named("carrier-pigeon").is_none());
        assert!(Link::known_names().contains("nvlink4"));
    }
}
