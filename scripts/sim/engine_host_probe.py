#!/usr/bin/env python3
"""vLLM's engine core at work with no GPU: the host's work a step, by the sequences running.

Runs vLLM's real `EngineCore` (its scheduler, KV cache manager, request bookkeeping, stop
checks and prefix-cache hashing) with one part replaced: the executor. In its place a
stand-in returns, for every step, what a GPU worker returns (one sampled token for every
request whose prompt is done, in the persistent batch's order) without running a model. So
each step costs what vLLM's engine process does around a forward pass, and nothing else:
`schedule()`, `update_from_output()`, and the encoding of the step's outputs for the API
server (vLLM's msgpack encoder, as its output thread runs it). With `--tp` above one it also
times what the multiprocessing executor adds: the step's `SchedulerOutput` pickled for the
workers' shared-memory queue and read back, and the worker's `ModelRunnerOutput` the same way.

Not measured: the GPU worker's own host work (its persistent batch's updates, input
preparation, the sampled tokens' copy to the host), which needs CUDA.

For each count of running sequences it admits that many requests (distinct prompts of
`--prompt` tokens, `--max-tokens` out with EOS ignored), steps the engine until every prompt
is prefilled, then times `--steps` decode steps and prints the median of each part, per step
and per sequence. Output: one JSON line per count (`--out` appends them to a file too).

Usage (inside a Python environment with vLLM installed; the model directory needs a
config.json and the tokenizer files, no weights):

    python scripts/sim/engine_host_probe.py --model /path/to/model \\
        --seqs 1,16,64,128,256,512,1024 --layers 36 --sliding 0
"""

import argparse
import json
import pickle
import statistics
import sys
import time


def fake_executor(layers: int, sliding: int, window: int, kv_heads: int, head_size: int, blocks: int):
    """An executor class whose workers hold a KV cache of `layers` attention layers (the last
    `sliding` of them with a sliding window) and return one token a request a step."""
    import torch

    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
    from vllm.v1.outputs import ModelRunnerOutput

    class StandInExecutor:
        max_concurrent_batches = 1
        supported_tasks = ("generate",)

        def __init__(self, vllm_config):
            self.vllm_config = vllm_config
            self.block_size = vllm_config.cache_config.block_size
            self.requests = None  # the scheduler's request table, set by the probe
            self.batch: list[str] = []  # the persistent batch's order
            self.index: dict[str, int] = {}
            self.seconds = 0.0

        def register_failure_callback(self, callback):
            pass

        def get_kv_cache_specs(self):
            specs = {}
            for i in range(layers):
                name = f"model.layers.{i}.self_attn.attn"
                if i >= layers - sliding:
                    specs[name] = SlidingWindowSpec(block_size=self.block_size, num_kv_heads=kv_heads,
                                                    head_size=head_size, dtype=torch.bfloat16,
                                                    sliding_window=window)
                else:
                    specs[name] = FullAttentionSpec(block_size=self.block_size, num_kv_heads=kv_heads,
                                                    head_size=head_size, dtype=torch.bfloat16)
            return [specs]

        def determine_available_memory(self):
            page = 2 * self.block_size * kv_heads * head_size * 2
            return [blocks * page * layers]

        def initialize_from_config(self, kv_cache_configs):
            pass

        def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
            return [None]

        def execute_model(self, so):
            start = time.perf_counter()
            for rid in so.finished_req_ids:
                self._remove(rid)
            for new in so.scheduled_new_reqs:
                self.index[new.req_id] = len(self.batch)
                self.batch.append(new.req_id)
            sampled = []
            for rid in self.batch:
                req = self.requests[rid]
                done = rid in so.num_scheduled_tokens and req.num_computed_tokens >= req.num_prompt_tokens
                sampled.append([1000 + len(req.output_token_ids) % 20000] if done else [])
            out = ModelRunnerOutput(req_ids=list(self.batch), req_id_to_index=dict(self.index),
                                    sampled_token_ids=sampled, logprobs=None, prompt_logprobs_dict={},
                                    pooler_output=[])
            self.seconds += time.perf_counter() - start
            return out

        def _remove(self, rid):
            i = self.index.pop(rid, None)
            if i is None:
                return
            last = self.batch.pop()
            if last != rid:
                self.batch[i] = last
                self.index[last] = i

        def shutdown(self):
            pass

    return StandInExecutor


def probe(args, seqs: int) -> dict:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.serial_utils import MsgpackEncoder

    engine_args = EngineArgs(model=args.model, load_format="dummy", block_size=args.block_size,
                             max_num_seqs=max(seqs, args.max_num_seqs),
                             max_num_batched_tokens=args.max_num_batched_tokens,
                             max_model_len=args.prompt + args.max_tokens + 16,
                             enable_prefix_caching=not args.no_prefix_caching,
                             disable_log_stats=args.no_log_stats)
    config = engine_args.create_engine_config()
    config.cache_config.block_size = args.block_size
    blocks = seqs * ((args.prompt + args.max_tokens) // args.block_size + 2) + 64
    executor = fake_executor(args.layers, args.sliding, args.window, args.kv_heads, args.head_size, blocks)
    engine = EngineCore(config, executor, log_stats=not args.no_log_stats)
    engine.model_executor.requests = engine.scheduler.requests
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0.0, ignore_eos=True)
    for i in range(seqs):
        # Distinct prompts, so that nothing is served from the prefix cache.
        prompt = [(i * 7919 + j * 31) % 30000 + 100 for j in range(args.prompt)]
        req = EngineCoreRequest(request_id=f"r{i}", prompt_token_ids=prompt, mm_features=None,
                                sampling_params=sampling, pooling_params=None, eos_token_id=2,
                                arrival_time=time.time(), lora_request=None, cache_salt=None,
                                data_parallel_rank=None)
        request, _ = engine.preprocess_add_request(req)
        engine.add_request(request)
    sched = engine.scheduler
    while any(r.num_computed_tokens < r.num_prompt_tokens for r in sched.requests.values()):
        engine.step()
    encoder = MsgpackEncoder()
    parts = {"schedule": [], "update": [], "encode": [], "pickle": [], "executor": []}
    for _ in range(args.steps):
        t0 = time.perf_counter()
        so = sched.schedule()
        t1 = time.perf_counter()
        before = engine.model_executor.seconds
        mro = engine.model_executor.execute_model(so)
        t2 = time.perf_counter()
        outputs = sched.update_from_output(so, mro)
        t3 = time.perf_counter()
        for out in outputs.values():
            encoder.encode(out)
        t4 = time.perf_counter()
        if args.tp > 1:
            pickle.loads(pickle.dumps(so, protocol=pickle.HIGHEST_PROTOCOL))
            pickle.loads(pickle.dumps(mro, protocol=pickle.HIGHEST_PROTOCOL))
        t5 = time.perf_counter()
        parts["schedule"].append(t1 - t0)
        parts["update"].append(t3 - t2)
        parts["encode"].append(t4 - t3)
        parts["pickle"].append(t5 - t4)
        parts["executor"].append(engine.model_executor.seconds - before)
    running = len(sched.running)
    # The mean, not the median: one step in `block_size` allocates each sequence a new block and
    # hashes the full one for the prefix cache, and that belongs to the average step.
    us = {k: statistics.fmean(v) * 1e6 for k, v in parts.items()}
    host = us["schedule"] + us["update"] + us["encode"] + us["pickle"]
    return {"seqs": running, "prompt": args.prompt, "layers": args.layers, "sliding": args.sliding,
            "prefix_caching": not args.no_prefix_caching, "log_stats": not args.no_log_stats,
            "tp": args.tp, "steps": args.steps, "block_size": config.cache_config.block_size,
            "async_scheduling": bool(config.scheduler_config.async_scheduling),
            **{f"{k}_us": round(v, 1) for k, v in us.items()},
            "host_us": round(host, 1), "host_us_per_seq": round(host / max(running, 1), 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a model directory: config.json and tokenizer files")
    p.add_argument("--seqs", default="1,16,64,128,256,512,1024")
    p.add_argument("--prompt", type=int, default=200)
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--steps", type=int, default=64, help="decode steps timed (a multiple of the block size)")
    p.add_argument("--layers", type=int, default=36)
    p.add_argument("--sliding", type=int, default=0, help="how many of the layers have a sliding window")
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-size", type=int, default=128)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--max-num-seqs", type=int, default=1024)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--tp", type=int, default=1, help="above 1: add the multiprocessing executor's pickling")
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--no-log-stats", action="store_true")
    p.add_argument("--out", help="append each JSON line to this file too")
    args = p.parse_args()

    import vllm.platforms as platforms
    platforms.builtin_platform_plugins["cpu"] = lambda: "vllm.platforms.cpu.CpuPlatform"
    import logging
    logging.getLogger("vllm").setLevel(logging.WARNING)

    for n in (int(x) for x in args.seqs.split(",")):
        row = probe(args, n)
        line = json.dumps(row)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    sys.exit(main())
