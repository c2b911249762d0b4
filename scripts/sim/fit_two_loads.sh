#!/usr/bin/env bash
# Can `sim fit` on two loads predict the third? A synthetic check of the fit, not of the physics:
# for each model given, the simulator "measures" 1, 10 and 100 prompts of 1024/128 tokens sent
# at once (tensor parallel TP on HW) with constants well away from the preset's (HIDDEN), the
# fit starts from the preset and sees the 1- and 100-prompt runs, and the 10-prompt run is
# predicted. Prints, per model, the 10-prompt errors of mean TTFT, mean TPOT and output
# throughput with the preset alone and after the fit, and the constants fitted.
#
# Usage: scripts/sim/fit_two_loads.sh MODEL...   (e.g. openai/gpt-oss-120b glm-4.6-fp8)
# Environment: SB (default target/release/servebench), HW (dgx-spark), TP (4), HIDDEN.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
HW=${HW:-dgx-spark}
TP=${TP:-4}
HIDDEN=${HIDDEN:-"alpha-api-ms=35 eta-bw=0.85 t0-ms=1.5 t-layer-us=35 gemm-eff=0.4 moe-eff=0.25 dequant-mma=0.3 t-moe-us=30"}
hidden=()
for kv in $HIDDEN; do hidden+=(--option "$kv"); done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
errors() { "$SB" sim validate --model "$1" --hardware "$HW" --option "tp=$TP" "${@:3}" --points "$2" 2>/dev/null |
  grep -E '^\S+ +(mean TTFT|mean TPOT|output tok/s)' |
  awk '{for (i = 1; i <= NF; i++) if ($i ~ /%$/) { print $i; break }}' | tr '\n' ' '; }
for m in "$@"; do
  d=$out/$(echo "$m" | tr / _)
  mkdir -p "$d"
  for n in 1 10 100; do
    "$SB" sim predict --no-store --model "$m" --hardware "$HW" --tp "$TP" --random-input-len 1024 \
      --random-output-len 128 --num-prompts "$n" "${hidden[@]}" --save-result --result-dir "$d" \
      --result-filename "n$n.json" >/dev/null
  done
  "$SB" sim fit --model "$m" --hardware "$HW" --tp "$TP" --no-holdout --out "$d/fit.toml" "$d/n1.json" \
    "$d/n100.json" >"$d/fit.txt"
  fitted=$(sed -n 1p "$d/fit.txt" | sed 's/^Fitting //; s/ to 2 measured.*//')
  echo "$m: preset [ $(errors "$m" "$d/n10.json")] fitted [ $(errors "$m" "$d/n10.json" --profile "$d/fit.toml")] ($fitted)"
done
