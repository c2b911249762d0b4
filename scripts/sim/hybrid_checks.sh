#!/usr/bin/env bash
# Qwen3.5-35B-A3B (Gated DeltaNet hybrid, BF16) on one H200, as GPUStack's performance lab
# measured it (docs/performance-lab/qwen3.5-35b-a3b/h200.md, vLLM v0.17.1, the baseline serve
# line `--reasoning-parser=qwen3 --max-model-len=32768`, no prefix caching), predicted with the
# shipped presets; nothing was fitted to these runs (CALIBRATION.md, "Gated DeltaNet hybrids").
# The lab drives its runs with guidellm: every request of a profile sent within a second (rate
# 1000/s), at most 512 at once, chat completions. Its tables' TPOT column is not the vLLM metric
# (it reads TTFT / output tokens), so the comparison is of the benchmark's duration, the mean
# TTFT and the mean end-to-end latency.
#
# Usage: scripts/sim/hybrid_checks.sh [--option KEY=VALUE ...]
# Environment: SB (default target/release/servebench).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
extra=("$@")
pct() { python3 -c "import sys; m, p = map(float, sys.argv[1:]); print(f'{100 * (p - m) / m:+.1f}')" "$1" "$2"; }
# NAME ISL OSL PROMPTS CONC DURATION_S MEAN_TTFT_MS MEAN_E2E_S
check() {
  local out d t e
  out=$("$SB" sim predict --model Qwen/Qwen3.5-35B-A3B --hardware h200 --max-model-len 32768 \
    --backend openai-chat --dataset-name random --random-input-len "$2" --random-output-len "$3" \
    --num-prompts "$4" --max-concurrency "$5" --request-rate 1000 --percentile-metrics ttft,e2el "${extra[@]}")
  d=$(awk '/^Benchmark duration/ {print $NF; exit}' <<<"$out")
  t=$(awk '/^Mean TTFT/ {print $NF; exit}' <<<"$out")
  e=$(awk '/^Mean E2EL/ {print $NF / 1000; exit}' <<<"$out")
  printf '%-18s duration %7.2f s (%s %%)  mean TTFT %8.0f ms (%s %%)  mean E2E %6.2f s (%s %%)\n' \
    "$1" "$d" "$(pct "$6" "$d")" "$t" "$(pct "$7" "$t")" "$e" "$(pct "$8" "$e")"
}
echo "predicted (error against the measurement)"
check "throughput" 1024 128 1000 512 40.37 5809.82 19.96
check "generation heavy" 1000 2000 200 200 57.74 1915.55 57.43
check "long context" 32000 100 100 100 73.72 31979.13 47.26
