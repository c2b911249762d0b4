#!/usr/bin/env python3
"""vLLM's own API server in front of a stand-in engine: what the frontend costs, with no GPU.

Runs `vllm serve`'s real OpenAI server (vLLM's `api_server.run_server`: uvicorn, FastAPI, the
serving classes, `AsyncLLM`'s input processor, tokenizer and output processor) with one part
replaced: the engine-core client. In its place a stand-in speaks to an engine process over ZMQ
as vLLM's `AsyncMPClient` does (requests msgpack-encoded by vLLM's own encoder on the way in,
outputs decoded by vLLM's own decoder in the server's event loop on the way out). The stand-in
engine takes no GPU: every `--step-ms` it emits one new token for every running request, as a
decode step would, and ends a request at its `max_tokens`. It keeps its own pace whatever the
server does, as vLLM's engine process does, so a server that falls behind queues the outputs
and catches up later.

So a client that drives this server sees vLLM's frontend at work and nothing else: the time a
request takes to reach the engine, and the time a step's tokens take to come out. With
`--pooling HIDDEN` the engine serves a pooling model instead (start the server with
`--runner pooling --convert embed`): each request ends at the next step with a vector of
HIDDEN floats, as a pooling model's prefill hands its output back. The CPU time
of this process (the server) and of its engine child are written to `--stats` every second, so
a driver can divide them by the requests and tokens it sent.

Usage (inside a Python environment with vLLM installed; the model directory needs a config.json
and the tokenizer files, no weights):

    python scripts/sim/frontend_probe.py --step-ms 15 --stats /tmp/fe.json -- \
        /path/to/model --port 8011 --load-format dummy

Everything after `--` is `vllm serve`'s command line (the model first). The platform is set to
vLLM's CPU platform, so that vLLM's configuration can be built on a machine without a GPU; no
model is loaded.
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import time


def engine_main(in_addr: str, out_addr: str, step_s: float, prelude: list[int], pooling: int) -> None:
    """The stand-in engine: one token a step for every running request, on its own clock; each
    output opens with the `prelude` token ids (a gpt-oss reply's `<|channel|>final<|message|>`).
    A pooling request (`pooling` > 0) ends at its first step with a vector of `pooling` floats."""
    import torch
    import zmq

    from vllm.v1.engine import (EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest,
                                EngineCoreRequestType, FinishReason)
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(in_addr)
    push = ctx.socket(zmq.PUSH)
    push.bind(out_addr)
    encoder = MsgpackEncoder()
    decoder = MsgpackDecoder(EngineCoreRequest)
    add = EngineCoreRequestType.ADD.value
    abort = EngineCoreRequestType.ABORT.value
    abort_decoder = MsgpackDecoder(list[str])
    # request id -> [max tokens, tokens emitted, first token id]
    running: dict[str, list[int]] = {}
    next_step = time.monotonic() + step_s
    while True:
        wait_ms = max(0.0, next_step - time.monotonic()) * 1e3
        if pull.poll(wait_ms):
            frames = pull.recv_multipart()
            kind, body = frames[0], frames[1:]
            if kind == add:
                req = decoder.decode(body)
                if req.pooling_params is not None:
                    running[req.request_id] = [1, 0, -1]
                    continue
                max_tokens = req.sampling_params.max_tokens or 16
                # Ordinary words of the vocabulary, so that detokenizing is typical work.
                running[req.request_id] = [max_tokens, 0, 1000 + len(running) % 20000]
            elif kind == abort:
                for rid in abort_decoder.decode(body):
                    running.pop(rid, None)
            continue
        next_step += step_s
        if not running:
            continue
        outputs = []
        done = []
        for rid, state in running.items():
            if state[2] < 0:
                outputs.append(EngineCoreOutput(
                    request_id=rid, new_token_ids=[], pooling_output=torch.rand(pooling) - 0.5,
                    finish_reason=FinishReason.STOP,
                ))
                done.append(rid)
                continue
            token = prelude[state[1]] if state[1] < len(prelude) else state[2] + state[1] % 7
            state[1] += 1
            finished = state[1] >= state[0]
            outputs.append(EngineCoreOutput(
                request_id=rid,
                new_token_ids=[token],
                finish_reason=FinishReason.LENGTH if finished else None,
            ))
            if finished:
                done.append(rid)
        for rid in done:
            del running[rid]
        push.send_multipart(encoder.encode(EngineCoreOutputs(outputs=outputs)))


class StandInClient:
    """What `AsyncLLM` needs of `AsyncMPClient`, over ZMQ to the stand-in engine."""

    def __init__(self, in_addr: str, out_addr: str, pooling: bool):
        import zmq
        import zmq.asyncio

        from vllm.v1.engine import EngineCoreOutputs, EngineCoreRequestType
        from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

        # The message kinds, looked up once: the server's loop sends one a request and is
        # asked to abort (mostly nothing) after every step's outputs.
        self.add_kind = EngineCoreRequestType.ADD.value
        self.abort_kind = EngineCoreRequestType.ABORT.value
        self.ctx = zmq.asyncio.Context()
        self.input_socket = self.ctx.socket(zmq.PUSH)
        self.input_socket.connect(in_addr)
        self.output_socket = self.ctx.socket(zmq.PULL)
        self.output_socket.connect(out_addr)
        self.encoder = MsgpackEncoder()
        self.decoder = MsgpackDecoder(EngineCoreOutputs)
        self.engine_ranks_managed = [0]
        self.tasks = ("encode", "embed") if pooling else ("generate",)
        self.resources = type("Resources", (), {"engine_dead": False})()

    async def get_output_async(self):
        frames = await self.output_socket.recv_multipart(copy=False)
        return self.decoder.decode(frames)

    async def add_request_async(self, request) -> None:
        await self.input_socket.send_multipart((self.add_kind, *self.encoder.encode(request)), copy=False)

    async def abort_requests_async(self, request_ids) -> None:
        if request_ids:
            await self.input_socket.send_multipart((self.abort_kind, *self.encoder.encode(list(request_ids))))

    async def get_supported_tasks_async(self):
        return self.tasks

    async def reset_mm_cache_async(self) -> None:
        return None

    async def reset_prefix_cache_async(self) -> None:
        return None

    async def is_sleeping_async(self) -> bool:
        return False

    async def profile_async(self, is_start: bool = True) -> None:
        return None

    def dp_engines_running(self) -> bool:
        return False

    def shutdown(self) -> None:
        self.ctx.destroy(linger=0)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def write_stats(path: str, engine_pid: int) -> None:
    while True:
        stats = {"server_cpu_s": cpu_seconds(os.getpid()), "engine_cpu_s": cpu_seconds(engine_pid),
                 "wall_s": time.monotonic()}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f)
        os.replace(tmp, path)
        await asyncio.sleep(0.2)


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("usage: frontend_probe.py [--step-ms MS] [--stats PATH] [--prelude IDS] -- MODEL [vllm serve flags]")
    split = argv.index("--")
    probe = argparse.ArgumentParser()
    probe.add_argument("--step-ms", type=float, default=15.0)
    probe.add_argument("--stats", default="/tmp/frontend_probe_stats.json")
    probe.add_argument("--prelude", default="", help="token ids every output opens with, comma-separated")
    probe.add_argument("--pooling", type=int, default=0, help="serve a pooling model of this hidden size")
    mine = probe.parse_args(argv[:split])
    serve_argv = argv[split + 1:]

    import vllm.platforms as platforms
    platforms.builtin_platform_plugins["cpu"] = lambda: "vllm.platforms.cpu.CpuPlatform"

    tag = f"{os.getpid()}"
    in_addr, out_addr = f"ipc:///tmp/fe_probe_in_{tag}", f"ipc:///tmp/fe_probe_out_{tag}"
    engine = multiprocessing.get_context("spawn").Process(
        target=engine_main,
        args=(in_addr, out_addr, mine.step_ms / 1e3, [int(t) for t in mine.prelude.split(",") if t], mine.pooling),
        daemon=True)
    engine.start()

    from vllm.v1.engine import core_client
    core_client.EngineCoreClient.make_async_mp_client = staticmethod(
        lambda *a, **k: StandInClient(in_addr, out_addr, mine.pooling > 0))

    import uvloop

    from vllm.entrypoints.openai.api_server import run_server
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    args = parser.parse_args(["--model", serve_argv[0], *serve_argv[1:]])
    validate_parsed_serve_args(args)

    async def serve() -> None:
        stats = asyncio.create_task(write_stats(mine.stats, engine.pid))
        try:
            await run_server(args)
        finally:
            stats.cancel()

    try:
        uvloop.run(serve())
    finally:
        engine.kill()


if __name__ == "__main__":
    main()
