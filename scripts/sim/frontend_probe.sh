#!/usr/bin/env bash
# What vLLM's API server costs, measured on this machine with no GPU (CALIBRATION.md, "vLLM's
# frontend, measured"): `frontend_probe.py` runs vLLM's own OpenAI server in front of a stand-in
# engine that emits one token a running request every STEP ms; servebench's client drives it
# (pinned to the second core, the server to the first), and the server's CPU time over each run
# is divided by the requests and tokens it served. Prints, per load: the client's mean TTFT,
# mean TPOT and output tokens/s, and the server's CPU per request and per streamed token.
#
# Needs a Python environment with vLLM and its era's web stack (the figures in CALIBRATION.md:
# vllm 0.11.0, transformers 4.57.1, fastapi 0.118.0, pydantic 2.12.0, uvicorn 0.37.0), a model
# directory with a config.json and tokenizer files (gpt-oss's needs `sliding_window` null, as vLLM's
# CPU platform would otherwise fall back to its old engine, and OpenAI's o200k_base.tiktoken under
# TIKTOKEN_ENCODINGS_BASE for its chat template), and two cores.
#
# Usage: scripts/sim/frontend_probe.sh MODEL_DIR TOKENIZER_DIR [PRELUDE]
#   PRELUDE: token ids every reply opens with (gpt-oss: 200005,17196,200008, so that its chat
#   replies carry text).
# Environment: PY (default python3: the environment with vLLM), SB (default
# target/release/servebench), PORT (default 8011), STEPS (default "1 15"), LOADS (default all).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
SB=${SB:-$repo/target/release/servebench}
PY=${PY:-python3}
PORT=${PORT:-8011}
model=$1 tok=$2 prelude=${3:-}
# A lone request's reply: two tokens of text after the prelude.
lone_out=$((2 + $(tr ',' ' ' <<<"$prelude" | wc -w)))
stats=$(mktemp)
server=
trap '{ [ -n "$server" ] && kill "$server" 2>/dev/null; } || true; rm -f "$stats" "$stats.log"' EXIT

start() { # STEP_MS: start the probe server and wait until it answers
  [ -n "$server" ] && { kill "$server"; wait "$server" 2>/dev/null || true; }
  taskset -c 0 "$PY" "$repo/scripts/sim/frontend_probe.py" --step-ms "$1" --stats "$stats" \
    --prelude "$prelude" -- "$model" --port "$PORT" --load-format dummy --served-model-name probe \
    >"$stats.log" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do
    curl -sf "127.0.0.1:$PORT/v1/models" >/dev/null && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 2
  done
  echo "the probe server did not start; the end of its log:" >&2
  tail -20 "$stats.log" >&2
  exit 1
}

cpu() { "$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['server_cpu_s'])" "$stats"; }

run() { # NAME API PROMPTS CONC IN OUT
  local name=$1 api=$2 n=$3 c=$4 in=$5 out=$6 flags c0 c1 res
  if [ "$api" = chat ]; then flags=(--backend openai-chat --endpoint /v1/chat/completions)
  else flags=(--backend vllm); fi
  c0=$(cpu)
  res=$(taskset -c 1 "$SB" bench serve --port "$PORT" --model probe --tokenizer "$tok" "${flags[@]}" \
    --dataset-name random --random-input-len "$in" --random-output-len "$out" --num-prompts "$n" \
    --max-concurrency "$c" --ignore-eos --no-store 2>&1 || true)
  sleep 0.6
  c1=$(cpu)
  awk -v name="$name" -v n="$n" -v out="$out" -v c0="$c0" -v c1="$c1" '
    /^Failed requests/ { failed = $3 } /^Mean TTFT/ { ttft = $4 } /^Mean TPOT/ { tpot = $4 }
    /^Output token throughput/ { tput = $5 }
    END { cpu = c1 - c0; printf "%-34s %9.2f %8.2f %9.0f %6d %7.2f s %8.3f ms %7.1f us\n", name, ttft, tpot, tput, failed, cpu, 1e3 * cpu / n, 1e6 * cpu / (n * out) }' <<<"$res"
}

printf '%-34s %9s %8s %9s %6s %9s %11s %10s\n' load "TTFT ms" "TPOT ms" "out tok/s" failed "CPU" "CPU/req" "CPU/token"
for step in ${STEPS:-1 15}; do
  start "$step"
  run "warm-up (step $step ms)" completions 20 4 128 8 >/dev/null
  case " ${LOADS:-all} " in *" all "*|*" lone "*)
    for api in completions chat; do
      for in in 16 1024 4096; do run "$api lone in=$in out=$lone_out step=$step" $api 100 1 "$in" "$lone_out"; done
    done ;;
  esac
  case " ${LOADS:-all} " in *" all "*|*" streams "*)
    for api in completions chat; do
      run "$api 64 streams out=1024 step=$step" $api 64 64 128 1024
      run "$api 256 streams out=256 step=$step" $api 256 256 128 256
    done ;;
  esac
  case " ${LOADS:-all} " in *" all "*|*" burst "*)
    for api in completions chat; do run "$api burst 1000 x 220/200 step=$step" $api 1000 1000 220 200; done ;;
  esac
done
