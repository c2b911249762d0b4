#!/usr/bin/env bash
# The public gpt-oss-120b measurements of AMD parts (CALIBRATION.md, "AMD Instinct"), predicted
# with the shipped presets: per point, the errors of total throughput per GPU, median TTFT and
# median TPOT (where the source gives them), then the median and P90 of all the errors.
# InferenceX's workload: random prompts, lengths over [0.8 x ISL, ISL], ten prompts a stream
# (its client's `--random-range-ratio 0.8` is the older vLLM convention, [r x len, len]; today's
# `vllm bench serve`, which `sim predict` follows, reads a ratio r as [(1 - r) len, (1 + r) len],
# so the same spread is asked for as 0.9 x len with a ratio of 1/9). Its AMD launch scripts
# all-reduce through ROCm's QuickReduce at INT4 (`VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4`), so
# every prediction here does too (`--option quick-reduce=none` after it undoes that).
#
# Usage: scripts/sim/amd_checks.sh [--option KEY=VALUE ...]   (e.g. --option mxfp4-backend=marlin)
# Environment: SB (default target/release/servebench); SERVEBENCH_PRESETS for presets of your own.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
extra=("$@")
errors=()
pct() { python3 -c "import sys; m, p = map(float, sys.argv[1:]); print(f'{100 * (p - m) / m:+.0f}')" "$1" "$2"; }
# HW TP ISL OSL PROMPTS CONC: the report of `sim predict` on InferenceX's workload.
predict() {
  "$SB" sim predict --model openai/gpt-oss-120b --hardware "$1" --tp "$2" \
    --no-enable-prefix-caching --dataset-name random --random-input-len $(($3 * 9 / 10)) \
    --random-output-len $(($4 * 9 / 10)) --random-range-ratio 0.1112 --num-prompts "$5" \
    --max-concurrency "$6" --option quick-reduce=int4 "${extra[@]}"
}
# NAME HW TP ISL OSL CONC TOTAL_TPUT_PER_GPU MEDIAN_TTFT_MS MEDIAN_TPOT_MS ('-': not given)
check() {
  local name=$1 hw=$2 tp=$3 isl=$4 osl=$5 conc=$6 tput=$7 ttft=$8 tpot=$9 out t f o line
  out=$(predict "$hw" "$tp" "$isl" "$osl" $((10 * conc)) "$conc")
  t=$(awk '/^Total token throughput/ {print $NF; exit}' <<<"$out")
  f=$(awk '/^Median TTFT/ {print $NF; exit}' <<<"$out")
  o=$(awk '/^Median TPOT/ {print $NF; exit}' <<<"$out")
  line="throughput $(pct "$tput" "$(python3 -c "print($t / $tp)")")"
  errors+=("${line##* }")
  if [ "$ttft" != - ]; then line+="  TTFT $(pct "$ttft" "$f")"; errors+=("${line##* }"); fi
  if [ "$tpot" != - ]; then line+="  TPOT $(pct "$tpot" "$o")"; errors+=("${line##* }"); fi
  printf '%-28s %s %%\n' "$name" "$line"
}
# InferenceX blog "Best GPU for gpt-oss-120b" (runs of 2026-03-09).
check "MI300X tp1 1k/1k c64" mi300x 1 1024 1024 64 3887 143.6 32.2
check "MI325X tp2 1k/1k c64" mi325x 2 1024 1024 64 4521 62.5 13.8
check "MI300X tp1 8k/1k c64" mi300x 1 8192 1024 64 11512 443 49.0
check "MI325X tp1 8k/1k c64" mi325x 1 8192 1024 64 13011 336 43.5
check "MI355X tp1 8k/1k c128" mi355x 1 8192 1024 128 38532 268.7 -
# InferenceX PR #1531 (2026-05), the dashboard's MI355X column at 1k/1k.
for c_t in "4 1653" "8 2668" "16 4189" "32 6275" "64 8812" "128 13186"; do
  set -- $c_t
  check "MI355X tp1 1k/1k c$1" mi355x 1 1024 1024 "$1" "$2" - -
done
# InferenceX PR #1061 (2026-04, vLLM 0.17.0 ROCm).
for c_t_o in "64 4016 31.4" "128 5981 41.3" "256 8552 58.3"; do
  set -- $c_t_o
  check "MI300X tp1 1k/1k c$1 (0.17)" mi300x 1 1024 1024 "$1" "$2" - "$3"
done
# InferenceX PR #1092 (2026-04, vLLM 0.17.0 ROCm): the best MI300X TP8 rates before that PR,
# tokens/s per user (one over the median TPOT) at one and four streams, 64 prompts.
for c_r in "1 249" "4 234"; do
  set -- $c_r
  line=$(predict mi300x 8 1024 1024 64 "$1" | awk '/^Median TPOT/ {print $NF; exit}')
  e=$(pct "$2" "$(python3 -c "print(1000 / $line)")")
  errors+=("$e")
  printf '%-28s %s %%\n' "MI300X tp8 1k/1k c$1 (0.17)" "tokens/s a user $e"
done
python3 - "${errors[@]}" <<'PY'
import statistics, sys
e = sorted(abs(int(x)) for x in sys.argv[1:])
print(f"{len(e)} errors: median {statistics.median(e):.0f} %, P90 {e[int(0.9 * (len(e) - 1))]} %")
PY
