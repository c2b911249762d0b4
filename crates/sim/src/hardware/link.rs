//! The links between GPUs that a deployment's collectives cross (NVLink, Infinity Fabric, PCIe,
//! networks between nodes): their bandwidth and latencies, how a group of GPUs uses a mesh or
//! a bridge, and the all-reduce variants the serving stack runs over them (ROCm's QuickReduce,
//! FlashInfer's all-reduce fused with the RMSNorm after it).

use serde::{Deserialize, Serialize};

/// A link the tensor-parallel all-reduce (or pipeline hand-off) crosses. A preset may give a
/// link by its name alone when it is one of [`KNOWN_LINKS`] (`name = "pcie5"`), which is then
/// that link as `interconnect=NAME` selects it; otherwise it states its numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LinkSpec")]
pub struct Link {
    pub name: String,
    /// Effective one-direction bandwidth per GPU, GB/s (on a mesh, the sum of its links).
    pub bandwidth_gbs: f64,
    /// Fixed cost of one all-reduce (kernel launch, synchronisation), µs.
    pub allreduce_latency_us: f64,
    /// One message's latency over a network or PCIe, µs: a ring all-reduce over n ranks takes
    /// `2 (n − 1)` such steps on top of the fixed cost. 0 for links whose all-reduce is one
    /// shot (NVLink, Infinity Fabric).
    #[serde(default)]
    pub step_latency_us: f64,
    /// A full mesh of this many point-to-point links a GPU (AMD's Infinity Fabric: 7 between
    /// the 8 GPUs of a node), whose sum `bandwidth_gbs` is: a group of n GPUs of the node
    /// reaches the others over n − 1 of them ([`Link::for_group`]). 0 for a switched fabric
    /// (NVLink through NVSwitch, PCIe, a network), where any group gets the whole bandwidth.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mesh_links: u32,
    /// The serving stack can run ROCm's QuickReduce over it (MI300-series Infinity Fabric; the
    /// `quick-reduce` serving option).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quick_reduce: bool,
    /// The serving stack can fuse the all-reduce over it with the residual add and RMSNorm
    /// after it (FlashInfer's kernel; the `fuse-allreduce-rms` serving option): where and what
    /// that saves. Absent where vLLM has no fusion for the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_fusion: Option<NormFusion>,
    /// A bridge rather than a fabric: the most GPUs it joins (NVLink bridges join two or four
    /// PCIe cards); a larger group crosses [`Link::beyond`] instead ([`Link::for_group`]).
    /// 0: the link joins the whole node.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bridge_gpus: u32,
    /// The link a group larger than [`Link::bridge_gpus`] crosses (the PCIe between bridged
    /// cards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Box<Link>>,
}

/// A link as a preset or a saved setup writes it: [`Link`]'s fields, of which a named link
/// ([`Link::named`]) may give only its name (and a bridge's).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkSpec {
    name: String,
    bandwidth_gbs: Option<f64>,
    allreduce_latency_us: Option<f64>,
    #[serde(default)]
    step_latency_us: f64,
    #[serde(default)]
    mesh_links: u32,
    #[serde(default)]
    quick_reduce: bool,
    #[serde(default)]
    norm_fusion: Option<NormFusion>,
    #[serde(default)]
    bridge_gpus: u32,
    #[serde(default)]
    beyond: Option<Box<Link>>,
}

impl TryFrom<LinkSpec> for Link {
    type Error = String;

    fn try_from(mut s: LinkSpec) -> Result<Link, String> {
        let (bridge_gpus, beyond) = (s.bridge_gpus, s.beyond.take());
        let bridge = |link: Link| Link { bridge_gpus, beyond, ..link };
        let (Some(bandwidth_gbs), Some(allreduce_latency_us)) = (s.bandwidth_gbs, s.allreduce_latency_us) else {
            let own = s.bandwidth_gbs.is_some()
                || s.allreduce_latency_us.is_some()
                || s.step_latency_us != 0.0
                || s.mesh_links != 0
                || s.quick_reduce
                || s.norm_fusion.is_some();
            return match Link::named(&s.name).filter(|_| !own) {
                Some(named) => Ok(bridge(named)),
                None => Err(format!(
                    "link {}: give bandwidth_gbs and allreduce_latency_us, or only the name of a known link ({})",
                    s.name,
                    Link::known_names()
                )),
            };
        };
        Ok(bridge(Link {
            name: s.name,
            bandwidth_gbs,
            allreduce_latency_us,
            step_latency_us: s.step_latency_us,
            mesh_links: s.mesh_links,
            quick_reduce: s.quick_reduce,
            norm_fusion: s.norm_fusion,
            bridge_gpus: 0,
            beyond: None,
        }))
    }
}

/// FlashInfer's all-reduce fused with the residual add and RMSNorm that follow it, as vLLM
/// 0.11 to 0.13 run it within one node of Hopper (compute capability 9.0) or Blackwell (10.0)
/// GPUs when `pass_config.fuse_allreduce_rms` is on: one kernel (a one-shot or two-shot
/// all-reduce whose peers write into each other's buffers, then the add and the norm) takes
/// the place of the all-reduce and the norm kernel, for steps whose message is at most
/// vLLM's size for the group (`FI_ALLREDUCE_FUSION_MAX_SIZE_MB`); larger steps are compiled
/// without it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormFusion {
    /// The largest message fused over 2, 4 and 8 GPUs, MiB (vLLM runs no fusion over other
    /// group sizes).
    pub max_mb: [f64; 3],
    /// What one fused all-reduce of a small message saves against the all-reduce and the norm
    /// kernel apart, µs. vLLM's sizes are where the fused kernel stops winning, so the saving
    /// is taken to fall linearly to nothing at the largest size ([`NormFusion::saving_seconds`]).
    pub saving_us: f64,
}

impl NormFusion {
    /// Blackwell (B200, GB200): vLLM's sizes for compute capability 10.0 (64, 32 and 1 MiB);
    /// 4.8 µs saved where SGLang's change to FlashInfer's fused kernel on 8 B200 measured an
    /// all-reduce and its RMSNorm at 13.5 µs apart and 8.7 µs fused (sgl-project/sglang pull
    /// request 7621, DeepSeek-R1 decode at TP 8).
    pub const BLACKWELL: NormFusion = NormFusion { max_mb: [64.0, 32.0, 1.0], saving_us: 4.8 };
    /// Hopper (H100, H200): vLLM's sizes for compute capability 9.0 (64, 2 and 0.5 MiB);
    /// nothing saved: vLLM's own benchmark of the fused kernel on two H100 (pull request
    /// 22086) times it as the all-reduce and norm apart at small messages (10 µs both).
    pub const HOPPER: NormFusion = NormFusion { max_mb: [64.0, 2.0, 0.5], saving_us: 0.0 };

    /// The largest message fused over `gpus` GPUs, bytes; `None` for a group vLLM does not
    /// fuse over.
    pub fn max_bytes(&self, gpus: u32) -> Option<f64> {
        let mb = match gpus {
            2 => self.max_mb[0],
            4 => self.max_mb[1],
            8 => self.max_mb[2],
            _ => return None,
        };
        Some(mb * 1024.0 * 1024.0)
    }

    /// Seconds one all-reduce of `bytes` over `gpus` GPUs saves fused: [`NormFusion::saving_us`]
    /// for a small message, falling linearly to 0 at the largest fused size, 0 beyond it.
    pub fn saving_seconds(&self, gpus: u32, bytes: f64) -> f64 {
        match self.max_bytes(gpus) {
            Some(max) if max > 0.0 && bytes <= max => self.saving_us * 1e-6 * (1.0 - bytes.max(0.0) / max),
            _ => 0.0,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A link `interconnect=NAME` can select, as [`KNOWN_LINKS`] lists it (the fields of [`Link`]).
#[derive(Clone, Copy, Debug)]
pub struct KnownLink {
    pub name: &'static str,
    pub bandwidth_gbs: f64,
    pub allreduce_latency_us: f64,
    pub step_latency_us: f64,
    pub mesh_links: u32,
    pub quick_reduce: bool,
    pub norm_fusion: Option<NormFusion>,
}

/// A switched link: every group gets the whole bandwidth, no QuickReduce, no fused norm.
const fn switched(
    name: &'static str,
    bandwidth_gbs: f64,
    allreduce_latency_us: f64,
    step_latency_us: f64,
) -> KnownLink {
    KnownLink {
        name,
        bandwidth_gbs,
        allreduce_latency_us,
        step_latency_us,
        mesh_links: 0,
        quick_reduce: false,
        norm_fusion: None,
    }
}

/// An NVLink generation through NVSwitch, with the fused all-reduce and norm of the GPUs that
/// carry it.
const fn nvlink(name: &'static str, bandwidth_gbs: f64, fusion: NormFusion) -> KnownLink {
    KnownLink { norm_fusion: Some(fusion), ..switched(name, bandwidth_gbs, 9.0, 0.0) }
}

/// Links that `interconnect=NAME` can select: GB/s one way, fixed µs per all-reduce, µs per
/// ring step. Network step latencies are NCCL's small-message latency over RoCE or InfiniBand
/// (a few µs of wire and NIC plus the proxy's hand-off), slower on TCP Ethernet.
pub const KNOWN_LINKS: [KnownLink; 12] = [
    switched("nvlink3", 300.0, 20.0, 0.0),
    nvlink("nvlink4", 450.0, NormFusion::HOPPER),
    nvlink("nvlink5", 900.0, NormFusion::BLACKWELL),
    // MI300X's: 7 links of 64 GB/s each way, a full mesh that QuickReduce can run over.
    KnownLink {
        name: "infinity-fabric",
        bandwidth_gbs: 448.0,
        allreduce_latency_us: 9.0,
        step_latency_us: 0.0,
        mesh_links: 7,
        quick_reduce: true,
        norm_fusion: None,
    },
    // PCIe between the cards of one server: NCCL's ring hop over PCI for small messages (1 µs
    // in its tuning model's LL protocol); CALIBRATION.md, "PCIe between cards".
    switched("pcie4", 25.0, 30.0, 1.0),
    switched("pcie5", 50.0, 25.0, 1.0),
    switched("10gbe", 1.1, 30.0, 60.0),
    switched("25gbe", 2.8, 30.0, 40.0),
    switched("100gbe", 11.0, 20.0, 20.0),
    switched("200gbe", 22.0, 20.0, 18.0),
    switched("400gbe", 45.0, 20.0, 12.0),
    switched("ib-ndr", 50.0, 15.0, 5.0),
];

impl Link {
    /// A link from [`KNOWN_LINKS`], by case-insensitive name.
    pub fn named(name: &str) -> Option<Link> {
        let key = name.trim().to_ascii_lowercase();
        KNOWN_LINKS.iter().find(|k| k.name == key).map(|k| Link {
            name: k.name.to_string(),
            bandwidth_gbs: k.bandwidth_gbs,
            allreduce_latency_us: k.allreduce_latency_us,
            step_latency_us: k.step_latency_us,
            mesh_links: k.mesh_links,
            quick_reduce: k.quick_reduce,
            norm_fusion: k.norm_fusion,
            bridge_gpus: 0,
            beyond: None,
        })
    }

    /// The link as a group of `gpus` GPUs uses it: on a full mesh the group's links to each
    /// other only, `gpus − 1` of [`Link::mesh_links`] (two MI300X reach each other over one
    /// 64 GB/s link, not the 448 GB/s of all seven); beyond a bridge's GPUs, the link past it
    /// (four H100 NVL cards bridged in pairs all-reduce over PCIe); unchanged on a switched fabric.
    pub fn for_group(&self, gpus: u32) -> Link {
        if let Some(beyond) = self.beyond.as_deref().filter(|_| self.bridge_gpus > 0 && gpus > self.bridge_gpus) {
            return beyond.for_group(gpus);
        }
        let used = gpus.saturating_sub(1).max(1);
        if self.mesh_links == 0 || used >= self.mesh_links {
            return self.clone();
        }
        Link { bandwidth_gbs: self.bandwidth_gbs * f64::from(used) / f64::from(self.mesh_links), ..self.clone() }
    }

    /// Why the link cannot be priced as given: a bridge with nothing past it, or a link past
    /// something that is not a bridge.
    pub fn check(&self) -> Result<(), String> {
        if !(self.bandwidth_gbs.is_finite() && self.bandwidth_gbs > 0.0) {
            return Err(format!(
                "link {}: bandwidth_gbs must be a positive number, got {}",
                self.name, self.bandwidth_gbs
            ));
        }
        match (self.bridge_gpus, &self.beyond) {
            (0, Some(_)) => {
                Err(format!("link {}: `beyond` is the link past a bridge; give bridge_gpus too", self.name))
            }
            (1, _) => Err(format!("link {}: a bridge joins at least 2 GPUs, got bridge_gpus = 1", self.name)),
            (n, None) if n > 0 => Err(format!(
                "link {}: a bridge of {n} GPUs needs the link past it ([...beyond]), such as pcie5",
                self.name
            )),
            (_, Some(beyond)) => beyond.check(),
            _ => Ok(()),
        }
    }

    /// The names [`Link::named`] accepts, comma-separated.
    pub fn known_names() -> String {
        KNOWN_LINKS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::terms::LinkCost;

    /// nccl-tests' all-reduce of 8 bytes over eight RTX 4090 on PCIe 4.0, outside CUDA graphs:
    /// 42.1 µs out of place, 40.1 in place (NVIDIA/nccl issue 1530). The named link's fixed part
    /// and NCCL's 1 µs hop over PCI price it within 10 %; without steps (30 µs) or with a
    /// network's 5 µs hop (86 µs) they did not.
    #[test]
    fn a_small_all_reduce_over_eight_pcie_cards_costs_what_nccl_tests_time() {
        let pcie4 = LinkCost::of(&Link::named("pcie4").unwrap());
        let us = pcie4.allreduce_seconds(8.0, 8.0) * 1e6;
        assert!((us / 42.1 - 1.0).abs() <= 0.10, "{us:.1} µs");
        // Two cards: vLLM's one-shot custom all-reduce, about the fixed part.
        assert!(pcie4.allreduce_seconds(2.0, 8.0) * 1e6 < 33.0);
    }

    /// A link given by its name alone is that named link (a bridge keeps its own size and the
    /// link past it); one that gives some numbers must give both of its required ones; a name
    /// alone that no link has is refused with the names there are.
    #[test]
    fn a_link_given_by_name_is_the_named_one_and_half_a_link_is_refused() {
        let link = |text: &str| toml::from_str::<Link>(text).map_err(|e| e.to_string());
        assert_eq!(link("name = \"pcie5\"").unwrap(), Link::named("pcie5").unwrap());
        let bridged = link(
            "name = \"x\"\nbandwidth_gbs = 300\nallreduce_latency_us = 9\nbridge_gpus = 2\n[beyond]\nname = \"pcie4\"",
        )
        .unwrap();
        assert_eq!(bridged.beyond.as_deref(), Link::named("pcie4").as_ref());
        assert_eq!((bridged.bridge_gpus, bridged.bandwidth_gbs), (2, 300.0));
        let e = link("name = \"pcie9\"").unwrap_err();
        assert!(e.contains("only the name of a known link") && e.contains("pcie5"), "{e}");
        let e = link("name = \"pcie5\"\nbandwidth_gbs = 60").unwrap_err();
        assert!(e.contains("give bandwidth_gbs and allreduce_latency_us"), "{e}");
        let e = link("name = \"pcie5\"\nstep_latency_us = 2").unwrap_err();
        assert!(e.contains("give bandwidth_gbs and allreduce_latency_us"), "{e}");
        // A saved setup's link, every field written out, reads back as it was.
        let named = Link::named("infinity-fabric").unwrap();
        assert_eq!(serde_json::from_value::<Link>(serde_json::to_value(&named).unwrap()).unwrap(), named);
    }
    /// Every preset's PCIe link between cards is the named link of that generation, so
    /// `--interconnect pcie5` and a preset price the same wire the same.
    #[test]
    fn the_presets_pcie_links_are_the_named_ones() {
        let presets = crate::presets::Presets::embedded().unwrap();
        let mut seen = 0;
        for hw in presets.hardware_presets() {
            let links = hw.intra_node.iter().chain(hw.intra_node.iter().filter_map(|l| l.beyond.as_deref()));
            for link in links.filter(|l| l.name.starts_with("pcie")) {
                assert_eq!(Some(link), Link::named(&link.name).as_ref(), "{}", hw.name);
                seen += 1;
            }
        }
        assert!(seen >= 6, "{seen} PCIe links");
    }
}
