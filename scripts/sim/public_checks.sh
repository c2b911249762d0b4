#!/usr/bin/env bash
# Every public report in crates/sim/testdata/public/ (GPUStack's performance lab, the NVIDIA
# forum's four-Spark post, vLLM pull requests' B200, H100, L40S and MI300X runs, vLLM issues' B200
# decodes and rate sweep, vLLM's recipes, Vultr's Nemotron sweep, a blog's Jetson Thor runs),
# predicted with the shipped presets or a profile: per file, the median error, P90 and bias of
# mean TTFT, mean TPOT and output throughput (the median TTFT and TPOT, marked "m", for a file that
# gives no mean), then of the three headline figures together, and the share of those inside the
# prediction band `sim predict` prints with them; the last line counts them over all files.
# Which files are in sample for which constant, and which are held out, is in that folder's
# README.md; the options each file needs (some need a memory utilization or a context length) are
# the ones it lists. Each file names its vLLM release (`vllm: v0.11.0`), which sets what that
# release did by default (no async scheduling before 0.14).
#
# Usage: scripts/sim/public_checks.sh [ARG ...]   (passed to every `sim validate`, e.g.
#        --profile fit.toml, or --option moe-eff.bf16=0.2)
# Environment: SB (default target/release/servebench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
dir=$repo/crates/sim/testdata/public
extra=("$@")
printf '%-46s %-24s %-24s %-24s %-24s %s\n' "file (median / P90 / bias)" "mean TTFT" "mean TPOT" "output tok/s" "all" "in band (80 % meant)"
check() {
  local hw=$1 file=$2
  shift 2
  "$SB" sim validate --hardware "$hw" "$@" "${extra[@]}" --points "$dir/$file" 2>&1 |
    awk -v f="$file" -v tally="$tally" '/^Inside the prediction band/ { band = 1 }
      !band && /^(mean TTFT|mean TPOT|median TTFT|median TPOT|output tok\/s|all) / { k = ($1 == "all") ? "all" : $1 " " $2; r[k] = $(NF-2) " / " $(NF-1) " / " $NF; n++ }
      band && /^all / { inside = $3 " of " $2; print $2 - $4 - $5, $2 >> tally }
      function get(k) { return (k in r) ? r[k] : "-" }
      function mean_else_median(x) { return ("mean " x in r) ? r["mean " x] : ("median " x in r) ? r["median " x] " m" : "-" }
      END { if (n) printf "%-46s %-24s %-24s %-24s %-24s %s\n", f, mean_else_median("TTFT"), mean_else_median("TPOT"), get("output tok/s"), get("all"), inside ? inside : "-"; else printf "%-46s (no summary: run sim validate on it)\n", f }'
}
tally=$(mktemp)
trap 'rm -f "$tally"' EXIT
check h100-sxm gpustack-h100-qwen3-235b.txt
check h100-sxm gpustack-h100-gpt-oss-32k.txt --option max-model-len=32768
check h100-sxm gpustack-h100-qwen3-8b-latency.txt
check h100-pcie gpustack-h100-qwen3-14b.txt
check h100-pcie gpustack-h100-qwen3-32b.txt --option gpu-memory-utilization=0.95
check h200 gpustack-h200-glm-4.6.txt
check h200 gpustack-h200-deepseek-r1.json --option max-model-len=32768
check h200 gpustack-h200-deepseek-v3.2.txt
check h200 gpustack-h200-glm-5.2-fp8.txt
check a100-80g gpustack-a100-gpt-oss-120b.txt --option max-model-len=32768
check a100-80g gpustack-a100-gpt-oss-20b.txt
check a100-80g gpustack-a100-qwen3-235b.txt
check a100-80g gpustack-a100-glm-4.5-air.txt
check a100-80g gpustack-a100-qwen3-14b.txt
check a100-80g gpustack-a100-qwen3-32b.txt --option gpu-memory-utilization=0.95
check a100-80g gpustack-a100-qwen3-dense-quantized.txt
check h200 gpustack-h200-qwen3.5-35b-a3b.txt
check h200 gpustack-h200-qwen3.5-35b-a3b-latency.txt
check h100-sxm gpustack-h100-qwen3.5-9b.txt
check h100-sxm gpustack-h100-qwen3.5-9b-latency.txt
check dgx-spark nvidia-forum-spark-qwen3-vl-32b-fp8.txt
check b200 vllm-pr-43232-b200-qwen3-235b-fp8.txt
check b200 vllm-pr-23696-b200-gpt-oss-120b-sharegpt.txt
check b200 vultr-b200-nemotron-3-nano-fp8.json
check h100-sxm vllm-pr-25444-h100-qwen3-coder-30b-fp8.json
check b200 vllm-issue-47089-b200-qwen3-0.6b.json
check h200 vllm-recipes-h200-nemotron-3-nano-fp8.json
check b200 vllm-recipes-b200-kimi-k2.5-nvfp4.json
check b200 flashinfer-issue-4249-b200-qwen3.6-35b-a3b.json --option linear-eff=0.65
check b200 vllm-pr-44214-b200-qwen3.5-122b-a10b.json --option linear-eff=0.65
check b200 vllm-issue-26825-b200-qwen3-30b-a3b-fp8.json
check l40s vllm-pr-29217-l40s-qwen3-vl-32b-fp8.txt
check mi300x vllm-pr-27323-mi300x-glm-4.6.json
check jetson-agx-thor wangjunjian-thor-qwen3-8b-and-32b-awq.txt --option async-scheduling=false
awk '{ inside += $1; n += $2 } END { if (n) printf "%-46s %s of %d figures inside their band (%.0f %%)\n", "all files", inside, n, 100 * inside / n }' "$tally"
