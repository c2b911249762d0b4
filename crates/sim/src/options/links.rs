//! Which link each collective of a deployment crosses (the tensor-parallel all-reduce, the
//! experts' exchange, the pipeline's hand-offs), as a group of its size uses it, and the
//! all-reduce variants the deployment runs over the all-reduce's link.

use super::ServingOptions;
use crate::cost::quick_reduce::QuickReduce;
use crate::hardware::{HardwareSpec, Link, NormFusion};

impl ServingOptions {
    /// The link the tensor-parallel all-reduce crosses: between nodes when the TP group spans
    /// them, else within the node (the `interconnect` option replaces it).
    pub fn allreduce_link(&self, hw: &HardwareSpec) -> Link {
        self.group_link(self.tp, hw)
    }

    /// The link of the GPUs that share a MoE layer ([`Self::expert_shards`]), over which
    /// data-parallel ranks exchange their tokens around it, chosen as for the all-reduce.
    pub fn expert_link(&self, hw: &HardwareSpec) -> Link {
        self.group_link(self.expert_shards(), hw)
    }

    /// The link within a group of `gpus` GPUs: the one chosen with `interconnect`, else the
    /// network between nodes when the group spans them, else the node's own; as the group
    /// uses it ([`Link::for_group`]: on a full mesh, its links to each other).
    fn group_link(&self, gpus: u32, hw: &HardwareSpec) -> Link {
        if let Some(l) = &self.interconnect {
            return l.for_group(gpus);
        }
        if gpus > hw.gpus_per_node {
            return hw.inter_node.clone();
        }
        hw.intra_node.as_ref().map_or_else(|| hw.inter_node.clone(), |l| l.for_group(gpus))
    }

    /// The link between pipeline stages (between nodes when one engine's `tp × pp` GPUs span
    /// them; within a node, one GPU's link to the next).
    pub fn pipeline_link(&self, hw: &HardwareSpec) -> Link {
        if self.tp.saturating_mul(self.pp) > hw.gpus_per_node {
            return self.interconnect.clone().unwrap_or_else(|| hw.inter_node.clone());
        }
        hw.intra_node.as_ref().map_or_else(|| hw.inter_node.clone(), |l| l.for_group(2))
    }

    /// The QuickReduce level the tensor-parallel all-reduce runs at: the option's where the
    /// group's link carries it (MI300-series Infinity Fabric within a node), else none.
    pub fn allreduce_quick_reduce(&self, hw: &HardwareSpec) -> QuickReduce {
        if self.allreduce_link(hw).quick_reduce { self.quick_reduce } else { QuickReduce::None }
    }

    /// The fused all-reduce and norm of the tensor-parallel all-reduce: the group's link's
    /// where the option asks for it and that link carries it (not across nodes), else none.
    pub fn allreduce_norm_fusion(&self, hw: &HardwareSpec) -> Option<NormFusion> {
        self.allreduce_link(hw).norm_fusion.filter(|_| self.fuse_allreduce_rms)
    }
}
