#!/usr/bin/env bash
# How many concurrent streams one client process holds with client health "ok" on this machine,
# and how many two worker processes (`--workers 2`) hold: `bench serve` at rising
# --max-concurrency against the simulator served in its own process (`sim serve`), two waves
# of 128/128-token requests per level, printing each level's health verdict (per rank with
# workers). The server shares the machine, so this measures the machine as a whole.
# Usage: scripts/bench/streams-per-process.sh [LEVELS...]   (default: 512 1024 2048 4096 8192)
set -euo pipefail
SB=${SERVEBENCH:-target/release/servebench}
PORT=${PORT:-18080}
LEVELS=${*:-512 1024 2048 4096 8192}
"$SB" sim serve --model Qwen/Qwen3-8B --hardware h100-sxm --max-num-seqs 16384 --max-num-batched-tokens 16384 --port "$PORT" >/tmp/streams-sim.log 2>&1 &
SIM=$!
trap 'kill $SIM' EXIT
sleep 2
for c in $LEVELS; do
  for w in 1 2; do
    extra=()
    [ "$w" -gt 1 ] && extra=(--workers "$w")
    verdicts=$("$SB" bench serve --base-url "http://127.0.0.1:$PORT" --model Qwen/Qwen3-8B \
      --random-input-len 128 --random-output-len 128 --num-prompts $((c * 2)) --max-concurrency "$c" \
      --disable-tqdm --no-store "${extra[@]}" 2>&1 | grep -E "^Client health|^  rank" | tr -s ' ' | tr '\n' ' ')
    echo "streams=$c workers=$w: $verdicts"
  done
done
