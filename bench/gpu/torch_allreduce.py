#!/usr/bin/env python3
"""torch.distributed all_reduce reference for bench/gpu/check.sh.

Runs N ranks of torch.distributed (NCCL backend) as processes on this machine, all on one GPU
(synthetic mode, as `ncclsmoke --nccl-share-gpu` does: a distinct NCCL_HOSTID per rank for
NCCL <= 2.29, NCCL_MULTI_RANK_GPU_ENABLE=1 for >= 2.30), and prints the all-reduce bus bandwidth
(GB/s = 1e9 B/s; busbw = algbw * 2(n-1)/n, as nccl-tests) for each size. Each rank times `iters`
in-place float32 all_reduces with CUDA events after `warmup` untimed ones. The figure compared
with ncclsmoke's sweep is the MEAN of the ranks' times (what the sweep and nccl-tests report by
default); the slowest rank's (MAX) is printed and written next to it. The first all_reduce of
every size is checked (sum of rank+1 fills).

  python3 torch_allreduce.py --ranks 2 --sizes 64M,256M --iters 20 --warmup 5 --json out.json
  python3 torch_allreduce.py --probe       # torch/NCCL/cudart versions and library paths as JSON
  python3 torch_allreduce.py --backend gloo --ranks 2 --sizes 1M   # CPU dry run of the script
                                           # itself (gloo, host tensors, wall-clock timing)

The NCCL environment (NCCL_SOCKET_IFNAME, NCCL_DEBUG*, ...) is inherited from the caller, so the
same settings apply as for ncclsmoke.
"""
import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time


def parse_size(text):
    text = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if text[-1:] in "KMG" else text) * mult


def loaded_library(fragment):
    """Path of the first mapped shared object whose name contains `fragment` (or None)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if fragment in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def probe():
    import torch
    info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available()}
    try:
        v = torch.cuda.nccl.version()
        info["nccl_version"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as e:  # noqa: BLE001 - report any failure as text
        info["nccl_version_error"] = str(e)
    if info["cuda_available"]:
        torch.cuda.init()
        info["device"] = torch.cuda.get_device_name(0)
        info["device_count"] = torch.cuda.device_count()
    info["libnccl"] = loaded_library("libnccl.so")
    info["libcudart"] = loaded_library("libcudart.so")
    return info


def nccl_version_tuple(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - unknown: treat as <= 2.29 (NCCL_HOSTID)
        return (0, 0, 0)
    return v if isinstance(v, tuple) else (v // 10000, (v // 100) % 100, v % 100)


def bandwidth_row(size, n, mean_s, max_s, wrong):
    """One size's figures: from the mean of the ranks' times (compared with ncclsmoke) and from
    the slowest rank's."""
    factor = 2.0 * (n - 1) / n
    algbw, algbw_max = size / mean_s / 1e9, size / max_s / 1e9
    return {"bytes": size, "time_us": mean_s * 1e6, "algbw_gbps": algbw,
            "busbw_gbps": algbw * factor, "time_max_us": max_s * 1e6,
            "algbw_max_gbps": algbw_max, "busbw_max_gbps": algbw_max * factor, "wrong": wrong}


def worker(args):
    import torch
    import torch.distributed as dist

    rank = args.rank
    if args.backend == "gloo":  # CPU dry run: host tensors, wall-clock timing, same arithmetic
        return worker_run(args, torch, dist, torch.device("cpu"), cuda=False)
    if nccl_version_tuple(torch) < (2, 30, 0):
        os.environ["NCCL_HOSTID"] = "torchref-synthetic-%d" % rank
    else:
        os.environ["NCCL_MULTI_RANK_GPU_ENABLE"] = "1"
        os.environ["NCCL_P2P_DISABLE"] = "1"
        os.environ["NCCL_SHM_DISABLE"] = "1"
    torch.cuda.set_device(args.gpu)
    return worker_run(args, torch, dist, torch.device("cuda", args.gpu), cuda=True)


def worker_run(args, torch, dist, dev, cuda):
    rank, n = args.rank, args.ranks
    dist.init_process_group(args.backend, rank=rank, world_size=n,
                            init_method="tcp://127.0.0.1:%d" % args.port,
                            timeout=datetime.timedelta(seconds=args.op_timeout))

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    rows = []
    for size in args.sizes:
        count = size // 4
        x = torch.full((count,), float(rank + 1), dtype=torch.float32, device=dev)
        dist.all_reduce(x)
        sync()
        expected = n * (n + 1) / 2
        wrong = int((x != expected).sum().item())
        x.fill_(1.0 / n)  # keeps values bounded over many sums
        for _ in range(args.warmup):
            dist.all_reduce(x)
        barrier = torch.zeros(1, device=dev)
        dist.all_reduce(barrier)
        sync()
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                dist.all_reduce(x)
            end.record()
            end.synchronize()
            mine = start.elapsed_time(end) / 1000.0 / args.iters
        else:
            t0 = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(x)
            mine = (time.perf_counter() - t0) / args.iters
        # Every rank's time, so the mean (the sweep's and nccl-tests' figure) and the max agree
        # on one set of numbers; float64 keeps microseconds exact.
        t_sum = torch.tensor([mine], dtype=torch.float64, device=dev)
        t_max = t_sum.clone()
        dist.all_reduce(t_sum)
        dist.all_reduce(t_max, op=dist.ReduceOp.MAX)
        w = torch.tensor([wrong], dtype=torch.int64, device=dev)
        dist.all_reduce(w)
        rows.append(bandwidth_row(size, n, float(t_sum.item()) / n, float(t_max.item()),
                                  int(w.item())))
    if rank == 0:
        out = {"ranks": n, "torch": torch.__version__, "backend": args.backend,
               "timing": "mean over ranks (busbw_gbps, time_us); slowest rank (*_max_*)",
               "nccl_version": ".".join(str(v) for v in nccl_version_tuple(torch)),
               "libnccl": loaded_library("libnccl.so"), "rows": rows}
        for r in rows:
            print("torch all_reduce %4d MiB: mean over ranks: time %10.1f us  algbw %7.2f GB/s  "
                  "busbw %7.2f GB/s | slowest rank: time %10.1f us  busbw %7.2f GB/s | wrong %d"
                  % (r["bytes"] >> 20, r["time_us"], r["algbw_gbps"], r["busbw_gbps"],
                     r["time_max_us"], r["busbw_max_gbps"], r["wrong"]), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--probe", action="store_true", help="print versions and library paths as JSON")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="64M,256M")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                   help="gloo: CPU dry run of this script (host tensors, wall-clock timing)")
    p.add_argument("--op-timeout", type=float, default=60)
    p.add_argument("--timeout", type=float, default=120, help="whole run, seconds")
    p.add_argument("--json", default="")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:
        print(json.dumps(probe()))
        return 0
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    if args.rank >= 0:
        worker(args)
        return 0

    with socket.socket() as s:  # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [sys.executable, os.path.abspath(__file__), "--ranks", str(args.ranks),
            "--sizes", ",".join(str(x) for x in args.sizes), "--iters", str(args.iters),
            "--warmup", str(args.warmup), "--gpu", str(args.gpu), "--op-timeout", str(args.op_timeout),
            "--backend", args.backend,
            "--port", str(port)] + (["--json", args.json] if args.json else [])
    procs = [subprocess.Popen(base + ["--rank", str(r)]) for r in range(args.ranks)]
    deadline = time.monotonic() + args.timeout
    codes = [None] * len(procs)
    while time.monotonic() < deadline and any(c is None for c in codes):
        for i, proc in enumerate(procs):
            if codes[i] is None:
                codes[i] = proc.poll()
        if any(c not in (None, 0) for c in codes):
            break  # one rank failed: the others would wait for it until their own timeout
        time.sleep(0.2)
    for i, proc in enumerate(procs):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            print("torch_allreduce: rank %d killed after %.0f s" % (i, args.timeout), file=sys.stderr)
        codes[i] = proc.returncode
    if any(c != 0 for c in codes):
        print("torch_allreduce: ranks' exit codes %s" % codes, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
