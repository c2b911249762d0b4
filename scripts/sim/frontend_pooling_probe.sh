#!/usr/bin/env bash
# What vLLM's API server costs a pooling request and each input in it, measured on this machine
# with no GPU (CALIBRATION.md, "vLLM's API server, measured"): `frontend_probe.py --pooling`
# runs vLLM's own OpenAI server for a pooling model in front of a stand-in engine that ends each
# input at its next step (every STEP ms) with a vector of HIDDEN floats; servebench's client
# drives `/v1/embeddings` with batches of 1 to 64 inputs a request (pinned to the second core,
# the server to the first), and the server's CPU time over each run is divided by what it
# served. Prints each load (mean E2EL, inputs a second, CPU per request and per input), then
# the least-squares split of the CPU time into a cost a request, an input and a prompt token.
#
# Needs the Python environment of `frontend_probe.sh` (vllm 0.11.0 and its month's web stack)
# and a model directory with a config.json and the tokenizer files (Qwen3-0.6B's config with
# the tokenizer of testdata/tokenizers/qwen3 will do).
#
# Usage: scripts/sim/frontend_pooling_probe.sh MODEL_DIR [HIDDEN]   (about 3 minutes)
# Environment: PY (default python3: the environment with vLLM), SB (default
# target/release/servebench), PORT (default 8012), STEP (default 1), INPUTS (prompts a load,
# default 2000).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
PY=${PY:-python3}
PORT=${PORT:-8012}
STEP=${STEP:-1}
INPUTS=${INPUTS:-2000}
model=$1 hidden=${2:-1024}
stats=$(mktemp)
rows=$(mktemp)
server=
trap '{ [ -n "$server" ] && kill "$server" 2>/dev/null; } || true; rm -f "$stats" "$stats.log" "$rows"' EXIT

taskset -c 0 "$PY" "$repo/scripts/sim/frontend_probe.py" --step-ms "$STEP" --stats "$stats" --pooling "$hidden" -- \
  "$model" --port "$PORT" --load-format dummy --served-model-name probe --runner pooling --convert embed \
  >"$stats.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do
  curl -sf "127.0.0.1:$PORT/v1/models" >/dev/null && break
  kill -0 "$server" 2>/dev/null || { tail -20 "$stats.log" >&2; exit 1; }
  sleep 2
done

cpu() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['server_cpu_s'])" "$stats"; }

run() { # NAME BATCH PROMPTS CONC IN
  local name=$1 b=$2 n=$3 c=$4 in=$5 c0 c1 res
  c0=$(cpu)
  res=$(taskset -c 1 "$SB" bench serve --port "$PORT" --model probe --tokenizer "$model" \
    --backend openai-embeddings --dataset-name random --random-input-len "$in" --random-batch-size "$b" \
    --num-prompts "$n" --max-concurrency "$c" --no-store 2>&1 || true)
  sleep 0.6
  c1=$(cpu)
  awk -v name="$name" -v n="$n" -v b="$b" -v in_="$in" -v c0="$c0" -v c1="$c1" -v rows="$rows" '
    /^Successful requests/ { ok = $3 } /^Failed requests/ { failed = $3 } /^Mean E2EL/ { e2el = $4 }
    /^Input throughput/ { tput = $4 }
    END {
      cpu = c1 - c0; reqs = int((n + b - 1) / b)
      printf "%-28s %6d %6d %9.2f %9.1f %6d %7.2f s %8.3f ms %8.3f ms\n", name, reqs, n, e2el, tput, failed, cpu, 1e3 * cpu / reqs, 1e3 * cpu / n
      if (name !~ /warm-up/) printf "%d %d %d %.6f\n", reqs, n, n * in_, cpu >> rows
    }' <<<"$res"
}

printf '%-28s %6s %6s %9s %9s %6s %9s %11s %11s\n' load requests inputs "E2EL ms" "inputs/s" failed CPU "CPU/req" "CPU/input"
run "warm-up" 4 200 4 64 >/dev/null
run "lone, 64 tokens" 1 200 1 64
for in in 16 256; do
  for b in 1 4 16 64; do run "batch $b of $in tokens, 8 at once" "$b" "$INPUTS" 8 "$in"; done
done

"$PY" - "$rows" <<'EOF'
import sys
import numpy as np
rows = np.loadtxt(sys.argv[1], ndmin=2)
x, y = rows[:, :3], rows[:, 3]
(a, b, c), *_ = np.linalg.lstsq(x, y, rcond=None)
fit = x @ [a, b, c]
print(f"CPU = {a * 1e3:.3f} ms a request + {b * 1e3:.3f} ms an input + {c * 1e6:.2f} us a prompt token "
      f"(residuals {', '.join(f'{100 * (f / m - 1):+.1f} %' for f, m in zip(fit, y))})")
EOF
