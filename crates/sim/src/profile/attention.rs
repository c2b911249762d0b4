//! Which attention kernels a model's layers run on a stack, and the rate and exposure the
//! profile gives them: the one place the choice is made, for the cost model and for what
//! `sim step` says of it.

use super::StackProfile;

/// The attention kernel family a model runs on a stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKernels {
    /// The stack's attention kernels (`attn_eff`, `attn_exp_exposed`).
    Standard,
    /// Attention sinks on Triton's kernels, where the fast ones lack them or the stack serves
    /// sinks that way (`attn_eff_sinks`).
    SinksOnTriton,
    /// Sparse attention's own kernels, which hide their few exponentials whole
    /// (`attn_eff_sparse`).
    Sparse,
}

/// The kernels a model's attention runs on, their fraction of the units' rates and the share
/// of their shorter compute stream they do not hide.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionRate {
    pub kernels: AttentionKernels,
    pub eff: f64,
    pub exposed: f64,
}

impl StackProfile {
    /// The attention kernels of a model with or without sinks and sparse attention: sparse
    /// attention's own rate where the stack sets one, else the sinks' where the model has sinks
    /// and the stack sets a rate for them, else the stack's kernels.
    pub fn attention_rate(&self, sinks: bool, sparse: bool) -> AttentionRate {
        match (self.attn_eff_sparse.filter(|_| sparse), self.attn_eff_sinks.filter(|_| sinks)) {
            (Some(eff), _) => AttentionRate { kernels: AttentionKernels::Sparse, eff, exposed: 0.0 },
            (None, Some(eff)) => {
                AttentionRate { kernels: AttentionKernels::SinksOnTriton, eff, exposed: self.attn_exp_exposed }
            }
            (None, None) => AttentionRate {
                kernels: AttentionKernels::Standard,
                eff: self.attn_eff,
                exposed: self.attn_exp_exposed,
            },
        }
    }
}
