#!/usr/bin/env python3
"""The client's own distortion and CPU cost beside vllm-bench's, measured side by side.

Both clients stream from vllm-bench's deterministic mock server (first token after 50 ms, one
token every 10 ms, 100 tokens per request: the ground truth), at each concurrency level, runs
alternating between the clients, and this prints per client and level the medians over the
runs of: the error of the mean TTFT and of the p99 ITL against the truth, the CPU seconds the
client process used, and its CPU per streamed event above start-up (the CPU of a one-request
run subtracted, divided by the events). For servebench it also prints the CPU per event inside
the timed run alone (its own health record, `servebench.health.cpu`): the hot path without the
start-up and the tokenizer's work before and after the run (counting the prompts, re-counting
the generated text for the token ledger); vllm-bench records no such figure ("-").

Usage:
  scripts/bench/client_overhead.py VLLM_BENCH_CHECKOUT [--levels 500,1000,2000] [--runs 3]
                                   [--servebench PATH ...]

VLLM_BENCH_CHECKOUT is a checkout of github.com/vllm-project/vllm-bench; its mock server
(bench-overhead/mock-server) and its binary are built there with `cargo build --release` when
missing. servebench is target/release/servebench, or each --servebench PATH given (two builds
compared side by side, each named by its path). Both clients count tokens
with the repo's Qwen3 tokenizer (testdata/tokenizers/qwen3), so nothing is downloaded.
The machine is shared by the server and the client, as it is for users on one box.
"""

import argparse
import json
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO / "testdata/tokenizers/qwen3"
TTFT_MS, ITL_MS, TOKENS, PROMPT = 50, 10, 100, 32


def build(directory, binary):
    if not binary.exists():
        subprocess.run(["cargo", "build", "--release"], cwd=directory, check=True)
    return binary


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, port):
    server = subprocess.Popen(
        [str(binary), "--port", str(port), "--token-interval-ms", str(ITL_MS),
         "--first-token-delay-ms", str(TTFT_MS), "--num-tokens", str(TOKENS)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    sys.exit("the mock server did not start")


def flags(port, requests, concurrency, out_dir):
    return ["--base-url", f"http://127.0.0.1:{port}", "--model", "mock-model",
            "--tokenizer", str(TOKENIZER), "--dataset-name", "random",
            "--random-input-len", str(PROMPT), "--random-output-len", str(TOKENS),
            "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
            "--disable-tqdm", "--save-result", "--result-dir", str(out_dir),
            "--percentile-metrics", "ttft,tpot,itl,e2el"]


def run(client, argv):
    """Runs one client; returns its result JSON and the CPU seconds it used."""
    with tempfile.TemporaryDirectory() as out:
        cmd = argv(Path(out))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        files = sorted(Path(out).glob("*.json"))
        if done.returncode != 0 or not files:
            sys.exit(f"{client} failed:\n{done.stdout[-3000:]}")
        return json.loads(files[-1].read_text()), cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vllm_bench", type=Path)
    ap.add_argument("--levels", default="500,1000,2000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--servebench", type=Path, action="append", default=[])
    args = ap.parse_args()
    vb = args.vllm_bench.resolve()
    mock = build(vb / "bench-overhead/mock-server", vb / "bench-overhead/mock-server/target/release/mock-llm-server")
    vllm_bench = build(vb, vb / "target/release/vllm-bench")
    builds = args.servebench or [REPO / "target/release/servebench"]

    def ours(binary):
        return lambda p, n, c: lambda out: [str(binary), "bench", "serve", "--no-store", *flags(p, n, c, out)]

    clients = {("servebench" if len(builds) == 1 else str(b)): ours(b) for b in builds}
    clients["vllm-bench"] = lambda p, n, c: lambda out: [str(vllm_bench), "--backend", "openai", "--num-warmups",
                                                         "0", *flags(p, n, c, out)]
    port = free_port()
    server = start_server(mock, port)
    try:
        startup = {name: statistics.median(run(name, make(port, 1, 1))[1] for _ in range(3))
                   for name, make in clients.items()}
        print(f"start-up CPU (one request): " + ", ".join(f"{k} {v:.2f} s" for k, v in startup.items()))
        width = max(len(name) for name in clients)
        print(f"{'streams':>7} {'client':>{width}} {'TTFT err ms':>11} {'ITL p99 err ms':>14} {'CPU s':>6} "
              f"{'CPU us/event':>12} {'in run us/event':>15}")
        for level in (int(x) for x in args.levels.split(",")):
            requests = level * 2
            seen = {name: [] for name in clients}
            for _ in range(args.runs):
                for name, make in clients.items():
                    result, cpu = run(name, make(port, requests, level))
                    events = result["total_output_tokens"]
                    in_run = result.get("servebench", {}).get("health", {}).get("cpu", {}).get("seconds")
                    seen[name].append((result["mean_ttft_ms"] - TTFT_MS, result["p99_itl_ms"] - ITL_MS, cpu,
                                       (cpu - startup[name]) / max(events, 1) * 1e6,
                                       None if in_run is None else in_run / max(events, 1) * 1e6))
            for name, rows in seen.items():
                med = [statistics.median(r[i] for r in rows) for i in range(4)]
                in_run = [r[4] for r in rows if r[4] is not None]
                in_run = f"{statistics.median(in_run):>15.1f}" if in_run else f"{'-':>15}"
                print(f"{level:>7} {name:>{width}} {med[0]:>11.1f} {med[1]:>14.1f} {med[2]:>6.2f} {med[3]:>12.1f} "
                      f"{in_run}")
    finally:
        server.kill()


if __name__ == "__main__":
    main()
