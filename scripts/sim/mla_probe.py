#!/usr/bin/env python3
"""Times the parts of one DeepSeek-V3/R1 decoder layer (MLA, block-scaled FP8) on the GPU at hand.

The simulator prices DeepSeek-style models (DeepSeek-R1, V3.2, GLM-5, Kimi-K2) with the dense
products at the FP8 ceiling that cuBLAS's per-tensor FP8 products measured (`gemm_eff.fp8`), a
fixed cost a layer fitted on gpt-oss's nine-kernel layer (`t_layer_us`), and MLA's attention by
its FLOPs and the latent cache's bytes. Their public reports run slow against that by a fifth
(CALIBRATION.md, "DeepSeek-R1 (MLA, block-scaled FP8) on H200"). This probe measures the parts
that the expert probes (`fused_moe_probe.py`) do not:

- `dense`: the layer's products at a tensor-parallel shard (default 8) from 1 to 8,192 rows, in
  BF16 (cuBLAS), FP8 with per-tensor scales and FP8 with DeepSeek's block scales (128 x 128 for
  the weights, 1 x 128 for the activations, through `torch._scaled_mm`, which runs cuBLAS's
  block-scaled kernels with CUDA 13; vLLM runs CUTLASS's or DeepGEMM's), each with the
  activations' quantization to 128-wide groups timed apart (a plain Triton kernel of this file,
  one program a group: a launch's cost at small row counts, slower than vLLM's at large ones);
- `decode`: the absorbed MLA decode's own products (queries into the latent space and the
  latent output back to heads, BF16 batched products) and the whole layer's non-expert kernels
  one by one and back to back in one graph, at 1 to 64 sequences: what a layer costs a decode
  step beside its experts;
- `gptoss`: the same torch ops for gpt-oss-120b's layer without its experts (the layer whose
  floor `t_layer_us` was fitted on), for a like-for-like ratio;
- `prefill`: MLA's prefill attention as vLLM runs it (decompressed heads, 192-wide keys and
  128-wide values, causal) through torch's SDPA, at 2,048 to 8,192-token chunks.

Every time is of kernels replayed in a CUDA graph over weights rotated so that the L2 cache
does not hold them (`kernel_probe.py`'s helpers); a part that fails records its error and the
rest go on. The norms and the activation are torch's own kernels (more launches than vLLM's
fused ones); the records say which kernels each part ran.

    python3 scripts/sim/mla_probe.py --out probe.json [--tp 8] [--budget-s 300]
        [--sections dense,decode,gptoss,prefill]
"""

import argparse
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

# DeepSeek-V3's config.json: hidden 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, rope
# dims 64, nope dims 128, value dims 128, 256 routed experts of 2048 with one shared expert of
# 2048, the first three layers dense with an FFN of 18432.
HIDDEN, HEADS, Q_RANK, KV_RANK, ROPE, NOPE, V_DIM = 7168, 128, 1536, 512, 64, 128, 128
SHARED, DENSE_FFN, EXPERTS = 2048, 18432, 256
BLOCK = 128
ROWS = [1, 4, 16, 64, 256, 1024, 2048, 8192]
START = time.monotonic()
FP8 = torch.float8_e4m3fn


def shapes(tp):
    """(name, input width K, output width N) of each product a GPU runs at tensor parallel `tp`
    (vLLM: the fused q_a/kv_a projection is replicated, the rest sliced)."""
    h = HEADS // tp
    return [
        # 2,112 columns, padded to the scale blocks' 2,176 (3 % more work)
        ("qkv_a", HIDDEN, 2176),
        ("q_b", Q_RANK, h * (NOPE + ROPE)),
        ("kv_b", KV_RANK, h * (NOPE + V_DIM)),
        ("o_proj", h * V_DIM, HIDDEN),
        ("shared_gate_up", HIDDEN, 2 * SHARED // tp),
        ("shared_down", SHARED // tp, HIDDEN),
        ("dense_gate_up", HIDDEN, 2 * DENSE_FFN // tp),
        ("dense_down", DENSE_FFN // tp, HIDDEN),
    ]


# ----------------------------------------------------------------------------------------------
def group_quant_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def quant(x_ptr, q_ptr, s_ptr, groups, stride_sm, stride_sg, GROUP: tl.constexpr):
        """One program a 128-wide group of one row: its absolute maximum, its scale, its FP8
        values (per-token-group quantization)."""
        pid = tl.program_id(0)
        row, g = pid // groups, pid % groups
        offs = tl.arange(0, GROUP)
        x = tl.load(x_ptr + pid * GROUP + offs).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(x)), 1e-10)
        scale = amax / 448.0
        tl.store(q_ptr + pid * GROUP + offs, (x / scale).to(q_ptr.dtype.element_ty))
        tl.store(s_ptr + row * stride_sm + g * stride_sg, scale)

    def run(x, q, s):
        m, k = x.shape
        groups = k // BLOCK
        quant[(m * groups,)](x, q, s, groups, s.stride(0), s.stride(1), GROUP=BLOCK)

    return run


class Product:
    """One product's weights in the three formats, `copies` of each (rotated against the L2)."""

    def __init__(self, k, n, copies):
        self.wbf = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        self.w8 = [w.to(FP8) for w in self.wbf]
        nb = (n + BLOCK - 1) // BLOCK
        # 128 x 128 weight scales, (K/128, N/128) as the blockwise product takes them
        self.ws = [torch.rand(k // BLOCK, nb, device="cuda", dtype=torch.float32) * 1e-3 + 1e-3
                   for _ in range(copies)]


WEIGHT_SCALES_OUTER_MAJOR = [False]


def block_mm(x8, xs, w8, ws):
    """The block-scaled product; the weights' scales are passed in the layout this torch took at
    the first call (`find_block_layout`)."""
    if WEIGHT_SCALES_OUTER_MAJOR[0]:
        ws = ws.t().contiguous().t()
    return torch._scaled_mm(x8, w8.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16)


def find_block_layout(kp):
    """Which layout of the 128 x 128 weight scales `torch._scaled_mm` takes (recorded)."""
    k, n, m = 1024, 1024, 64
    x8 = torch.randn(m, k, device="cuda").to(FP8)
    xs = torch.ones(k // BLOCK, m, device="cuda").t()
    w8 = torch.randn(n, k, device="cuda").to(FP8)
    ws = torch.ones(k // BLOCK, n // BLOCK, device="cuda")
    errors = []
    for outer in (False, True):
        WEIGHT_SCALES_OUTER_MAJOR[0] = outer
        try:
            y = block_mm(x8, xs, w8, ws)
            ref = x8.float() @ w8.float().t()
            err = ((y.float() - ref).norm() / ref.norm()).item()
            kp.record("block layout", weight_scales_outer_major=outer, relative_error=round(err, 4))
            return
        except Exception as e:  # noqa: BLE001
            errors.append(f"{type(e).__name__}: {e}"[:300])
    kp.record("block layout", error=errors)


def probe_dense(args, kp):
    quant = group_quant_kernel()
    one = torch.ones((), device="cuda", dtype=torch.float32)
    for name, k, n in shapes(args.tp):
        p = Product(k, n, copies=4)
        for m in ROWS:
            if kp.over_budget(args):
                return
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            x8 = x.to(FP8)
            # vLLM pads the rows of a block-scaled product to a multiple of four (`_padded_cutlass`);
            # the activation scales outer-dim-major (M contiguous), as the blockwise kernel wants
            rows = (m + 3) // 4 * 4
            x8b = torch.zeros(rows, k, device="cuda", dtype=FP8)
            x8b[:m].copy_(x8)
            xs = torch.rand(k // BLOCK, rows, device="cuda", dtype=torch.float32).t() * 1e-2 + 1e-3
            flops = 2.0 * m * k * n
            base = {"product": name, "tp": args.tp, "m": m, "k": k, "n": n}
            formats = [
                ("bf16", [(lambda w=w: x @ w.t()) for w in p.wbf]),
                ("fp8-tensor", [(lambda w=w: torch._scaled_mm(x8, w.t(), scale_a=one, scale_b=one,
                                                               out_dtype=torch.bfloat16)) for w in p.w8]),
                ("fp8-block", [(lambda w=w, s=s: block_mm(x8b, xs, w, s)) for w, s in zip(p.w8, p.ws)]),
            ]
            for fmt, fns in formats:
                try:
                    fns[0]()
                    t = kp.timed(fns, want_kernels=(m in (4, 8192)))
                    kp.record("dense", **base, format=fmt, **t,
                              tflops=round(flops / (t["us"] * 1e-6) / 1e12, 1),
                              weight_gb_per_s=round(k * n * (2 if fmt == "bf16" else 1) / (t["us"] * 1e-6) / 1e9, 1))
                except Exception as e:  # noqa: BLE001 - a format this torch lacks is a finding
                    kp.record("dense", **base, format=fmt, error=f"{type(e).__name__}: {e}"[:400])
            xq = torch.empty(m, k, device="cuda", dtype=FP8)
            sq = torch.empty(k // BLOCK, m, device="cuda", dtype=torch.float32).t()
            try:
                t = kp.timed([lambda: quant(x, xq, sq)])
                kp.record("dense", **base, format="group-quant", **t,
                          gb_per_s=round(m * k * 3 / (t["us"] * 1e-6) / 1e9, 1))
            except Exception as e:  # noqa: BLE001
                kp.record("dense", **base, format="group-quant", error=f"{type(e).__name__}: {e}"[:400])
        del p
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------
def kernels_per_call(kp, fns, reps=5):
    """Kernels launched per call of the fns, counted by the profiler."""
    events, calls = kp.profiled(fns, reps)
    return round(sum(e.count for e in events if (getattr(e, "self_device_time_total", 0) or 0) > 0) / calls, 1)


def time_layer(kp, section, parts, rot, **meta):
    """Each part alone, then all back to back in one graph; one record."""
    alone = {}
    for name, fns in parts.items():
        try:
            alone[name] = kp.timed(fns)["us"]
        except Exception as e:  # noqa: BLE001
            alone[name] = None
            kp.record(section, **meta, part=name, error=f"{type(e).__name__}: {e}"[:400])

    def layer(i):
        for fns in parts.values():
            fns[i]()

    fns = [(lambda i=i: layer(i)) for i in range(rot)]
    try:
        chain = kp.timed(fns, want_kernels=True)
        count = kernels_per_call(kp, fns)
    except Exception as e:  # noqa: BLE001
        chain, count = {"error": f"{type(e).__name__}: {e}"[:400]}, None
    kp.record(section, **meta, alone=alone, sum_us=round(sum(v for v in alone.values() if v), 2),
              chain_us=chain.get("us"), kernels=count, top_kernels=chain.get("kernels"),
              chain_error=chain.get("error"))


def rms(x, res, w):
    return F.rms_norm(x + res, (x.shape[1],), w)


def probe_decode(args, kp):
    """A decode step's layer without its routed experts: the kernels vLLM 0.11-0.13 runs for MLA
    absorbed decode (norms, the five products with their activations' group quantization where
    block-scaled, the queries' and outputs' latent projections, the latent cache's attention as
    torch's products and softmax, the router and the shared expert), alone and back to back,
    with block-scaled products and with per-tensor ones. Rows are padded to four for the
    block-scaled products, as vLLM pads them for CUTLASS."""
    quant = group_quant_kernel()
    one = torch.ones((), device="cuda", dtype=torch.float32)
    tp = args.tp
    h = HEADS // tp
    rot = 4
    prods = {name: Product(k, n, copies=rot) for name, k, n in shapes(tp)
             if name in ("qkv_a", "q_b", "o_proj", "shared_gate_up", "shared_down")}
    w_uk = [torch.randn(h, NOPE, KV_RANK, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
    w_uv = [torch.randn(h, KV_RANK, V_DIM, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
    router = [torch.randn(EXPERTS, HIDDEN, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
    nw = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
    qn, kvn = torch.ones(Q_RANK, device="cuda", dtype=torch.bfloat16), torch.ones(KV_RANK, device="cuda", dtype=torch.bfloat16)
    for ctx in (1024, 4096):
        for b in (1, 4, 16, 64):
            if kp.over_budget(args):
                return
            rows = max(b, 4)
            cache = [torch.randn(b, ctx, KV_RANK + ROPE, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
            x = torch.randn(rows, HIDDEN, device="cuda", dtype=torch.bfloat16)
            res = torch.randn_like(x)
            a_in = torch.randn(rows, Q_RANK, device="cuda", dtype=torch.bfloat16)
            o_in = torch.randn(rows, h * V_DIM, device="cuda", dtype=torch.bfloat16)
            q_nope = torch.randn(h, b, NOPE, device="cuda", dtype=torch.bfloat16)
            q_lat = torch.randn(b, h, KV_RANK + ROPE, device="cuda", dtype=torch.bfloat16)
            lat_out = torch.randn(h, b, KV_RANK, device="cuda", dtype=torch.bfloat16)
            scale = (NOPE + ROPE) ** -0.5
            bufs = {}

            def qbuf(name, m, k):
                if (name, m, k) not in bufs:
                    bufs[(name, m, k)] = (torch.empty(m, k, device="cuda", dtype=FP8),
                                          torch.empty(k // BLOCK, m, device="cuda", dtype=torch.float32).t())
                return bufs[(name, m, k)]

            def attention(c):
                s = torch.einsum("bhd,bcd->bhc", q_lat, c) * scale
                return torch.einsum("bhc,bcd->bhd", torch.softmax(s.float(), -1).to(torch.bfloat16), c[..., :KV_RANK])

            def act(y):
                n = y.shape[1] // 2
                return F.silu(y[:, :n]) * y[:, n:]

            for fmt in ("fp8-block", "fp8-tensor"):
                def mm(name, inp, i, fmt=fmt):
                    p = prods[name]
                    if fmt == "fp8-tensor":
                        return torch._scaled_mm(inp.to(FP8), p.w8[i].t(), scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16)
                    q, s = qbuf(name, inp.shape[0], inp.shape[1])
                    quant(inp, q, s)
                    return block_mm(q, s, p.w8[i], p.ws[i])

                parts = {
                    "input_norm": [lambda: rms(x, res, nw)] * rot,
                    "qkv_a": [(lambda i=i: mm("qkv_a", x, i)) for i in range(rot)],
                    "q_kv_norms": [lambda: (F.rms_norm(a_in, (Q_RANK,), qn), F.rms_norm(a_in[:, :KV_RANK], (KV_RANK,), kvn))] * rot,
                    "q_b": [(lambda i=i: mm("q_b", a_in, i)) for i in range(rot)],
                    "w_uk": [(lambda i=i: torch.bmm(q_nope, w_uk[i])) for i in range(rot)],
                    "attention": [(lambda c=c: attention(c)) for c in cache] * (rot // 2),
                    "w_uv": [(lambda i=i: torch.bmm(lat_out, w_uv[i])) for i in range(rot)],
                    "o_proj": [(lambda i=i: mm("o_proj", o_in, i)) for i in range(rot)],
                    "post_norm": [lambda: rms(x, res, nw)] * rot,
                    "router": [(lambda i=i: torch.topk(torch.sigmoid((x @ router[i].t()).float()), 8, dim=-1)) for i in range(rot)],
                    "shared_expert": [(lambda i=i: mm("shared_down", act(mm("shared_gate_up", x, i)), i)) for i in range(rot)],
                }
                time_layer(kp, "decode", parts, rot, model="DeepSeek-R1", products=fmt, tp=tp, batch=b, context=ctx)
            del cache
            torch.cuda.empty_cache()


def probe_gptoss(args, kp):
    """The same torch ops for gpt-oss-120b's layer without its experts (the layer `t_layer_us`
    was fitted on): norms, the BF16 QKV and output products, GQA decode attention through
    torch's SDPA, the router with its top-k; at TP 1 and 8."""
    hidden, q_heads, kv_heads, head_dim, experts = 2880, 64, 8, 64, 128
    rot = 4
    nw = torch.ones(hidden, device="cuda", dtype=torch.bfloat16)
    for tp in (1, 8):
        qh, kvh = q_heads // tp, kv_heads // tp
        wqkv = [torch.randn((qh + 2 * kvh) * head_dim, hidden, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
        wo = [torch.randn(hidden, qh * head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
        wr = [torch.randn(experts, hidden, device="cuda", dtype=torch.bfloat16) for _ in range(rot)]
        for ctx in (1024, 4096):
            for b in (1, 4, 16, 64):
                if kp.over_budget(args):
                    return
                x = torch.randn(b, hidden, device="cuda", dtype=torch.bfloat16)
                res = torch.randn_like(x)
                o_in = torch.randn(b, qh * head_dim, device="cuda", dtype=torch.bfloat16)
                q = torch.randn(b, qh, 1, head_dim, device="cuda", dtype=torch.bfloat16)
                ks = [torch.randn(b, kvh, ctx, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
                vs = [torch.randn_like(k) for k in ks]
                parts = {
                    "input_norm": [lambda: rms(x, res, nw)] * rot,
                    "qkv": [(lambda i=i: x @ wqkv[i].t()) for i in range(rot)],
                    "attention": [(lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
                                  for k, v in zip(ks, vs)] * (rot // 2),
                    "o_proj": [(lambda i=i: o_in @ wo[i].t()) for i in range(rot)],
                    "post_norm": [lambda: rms(x, res, nw)] * rot,
                    "router": [(lambda i=i: torch.topk(torch.softmax((x @ wr[i].t()).float(), -1), 4, dim=-1)) for i in range(rot)],
                }
                time_layer(kp, "decode", parts, rot, model="gpt-oss-120b", products="bf16", tp=tp, batch=b, context=ctx)
                del ks, vs
        del wqkv, wo, wr
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------
def probe_prefill(args, kp):
    """MLA's prefill attention over decompressed heads (192-wide queries and keys, 128-wide
    values, causal) through torch's SDPA, a chunk attending itself."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    h = HEADS // args.tp
    for m in (2048, 4096, 8192):
        if kp.over_budget(args):
            return
        q = torch.randn(1, h, m, NOPE + ROPE, device="cuda", dtype=torch.bfloat16)
        k = torch.randn_like(q)
        v = torch.randn(1, h, m, V_DIM, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * h * m * m / 2 * (NOPE + ROPE + V_DIM)
        for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            try:
                with sdpa_kernel([backend]):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
                    fn()
                    t = kp.timed([fn], want_kernels=True)
                kp.record("prefill", tp=args.tp, tokens=m, heads=h, backend=backend.name, **t,
                          tflops=round(flops / (t["us"] * 1e-6) / 1e12, 1))
            except Exception as e:  # noqa: BLE001 - a backend refusing these widths is a finding
                kp.record("prefill", tp=args.tp, tokens=m, heads=h, backend=backend.name,
                          error=f"{type(e).__name__}: {e}"[:300])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--tp", type=int, default=8, help="tensor-parallel size whose shard is timed")
    ap.add_argument("--budget-s", type=float, default=300.0, help="stop starting new measurements after this")
    ap.add_argument("--sections", default="dense,decode,gptoss,prefill")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("mla_probe: no CUDA device; this probe measures a GPU and needs one")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kernel_probe as kp
    import triton

    kp.START = START
    torch.set_grad_enabled(False)
    props = torch.cuda.get_device_properties(0)
    head = {"device": props.name, "sms": props.multi_processor_count, "memory_gib": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__}
    kp.log(head)
    probes = {"dense": probe_dense, "decode": probe_decode, "gptoss": probe_gptoss, "prefill": probe_prefill}

    def save():
        with open(args.out, "w") as f:
            json.dump({"head": head, "records": kp.RECORDS}, f, indent=1)

    try:
        find_block_layout(kp)  # once, for the dense and decode sections' block-scaled products
    except Exception as e:  # noqa: BLE001 - recorded; the block-scaled points then record theirs
        kp.record("block layout", error=f"{type(e).__name__}: {e}")
    for name in args.sections.split(","):
        try:
            probes[name](args, kp)
        except Exception as e:  # noqa: BLE001 - one failed section must not lose the others
            kp.record(name, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-2000:])
        save()
    kp.log("done")


if __name__ == "__main__":
    main()
