#!/usr/bin/python3
"""gloo all-reduce reference for bench/transport_bench.py (torch 1.13 via /usr/bin/python3).

The parent serves a TCPStore on 127.0.0.1 (ephemeral port) and starts WORLD child processes; each
joins a gloo process group (GLOO_SOCKET_IFNAME=lo, torch.set_num_threads(1)) and runs the same
schedule as ncclsmoke's sweep (transports/sweep.cpp) for each size min, 2*min, ... <= max, float32
sum: fill rank-dependent values, one checked all_reduce (wrong elements counted), WARMUP
all_reduces, a one-element all_reduce to line the ranks up, then ITERS back-to-back timed
all_reduces; each rank's mean iteration time. gloo's all_reduce is in place (the only form it
has). Rank 0 prints one JSON line per size: bytes, max and mean over ranks of the per-rank mean
time (µs), wrong elements summed over ranks.

    /usr/bin/python3 gloo_allreduce.py --min-bytes 1048576 --max-bytes 67108864 --warmup 2 --iters 10
"""

import argparse
import datetime
import json
import multiprocessing as mp
import os
import sys
import time


def worker(rank, world, port, args):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=args.timeout)
    store = dist.TCPStore("127.0.0.1", port, world, False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    expect4 = torch.tensor([float(sum(1 + (r + k) % 4 for r in range(world))) for k in range(4)])
    mine4 = torch.tensor([float(1 + (rank + k) % 4) for k in range(4)])

    def pattern(four, count):  # element i = four[i % 4], built without index tensors
        return four.repeat((count + 3) // 4)[:count].contiguous()

    tiny = torch.ones(1)
    bytes_ = args.min_bytes
    while bytes_ <= args.max_bytes:
        count = bytes_ // 4
        buf = pattern(mine4, count)
        dist.all_reduce(buf)
        wrong = int((buf != pattern(expect4, count)).sum())
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        dist.all_reduce(tiny)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        us = (time.perf_counter() - t0) * 1e6 / args.iters
        stats = torch.tensor([us, us, float(wrong)], dtype=torch.float64)
        mx = stats[:1].clone()
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        sm = stats[1:].clone()
        dist.all_reduce(sm)
        if rank == 0:
            print(json.dumps({"bytes": bytes_, "time_us_max": round(float(mx[0]), 3),
                              "time_us_mean": round(float(sm[0]) / world, 3),
                              "wrong": int(sm[1])}), flush=True)
        del buf
        bytes_ *= 2
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120, help="store / collective timeout (s)")
    args = ap.parse_args()
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, args.world, True,
                          timeout=datetime.timedelta(seconds=args.timeout), wait_for_workers=False)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, args.world, store.port, args))
             for r in range(args.world)]
    for p in procs:
        p.start()
    rc = 0
    for p in procs:
        p.join()
        rc = rc or p.exitcode
    if rc:
        for p in procs:
            if p.is_alive():
                p.kill()
        print(f"gloo_allreduce: a rank exited with {rc}", file=sys.stderr)
    sys.exit(1 if rc else 0)


if __name__ == "__main__":
    main()
