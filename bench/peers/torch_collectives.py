#!/usr/bin/env python3
"""torch.distributed's gloo allreduce, timed the way kolo-bench collectives
times kolo's, so that kolo's cross-host figures have PyTorch's beside them.

The world. Under torchrun (or anything that sets RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT) the process group comes from those variables.
Under kolorun, which sets KOLO_RANK and KOLO_SIZE, the rank and size come
from there and the rendezvous is a TCP store at --master-addr:--master-port
(rank 0 hosts it). Gloo picks its interface from GLOO_SOCKET_IFNAME, or else
from the address the hostname resolves to.

  kolorun -H h1:2,h2:2 --env GLOO_SOCKET_IFNAME=eth1 python3 \\
      bench/peers/torch_collectives.py --master-addr 10.1.0.1 \\
      --master-port 29500 -b 4K -e 256M -f 4 --json out.json

The sweep. Sizes from --minbytes to --maxbytes, multiplied by --stepfactor,
as kolo-bench sweeps them: rounded down to whole float32 elements and to a
multiple of the world size, and iterations and warm-up capped so that one
size moves at most 1 GiB per rank. Each size runs --warmup untimed calls,
a barrier, then --iters calls each timed alone; an iteration's time is the
slowest rank's (a max-allreduce of the times after the loop), and the row
reports the median over iterations (and the mean and minimum beside it).
algbw = bytes / time; busbw = algbw * 2(n-1)/n, the bytes a ring allreduce
moves per rank, as nccl-tests defines it. torch's allreduce works in place,
so every figure is an in-place one.

Checking. After timing, each rank fills element i with rank + 1 + i % 7 and
allreduces once more; every element must then equal n(n+1)/2 + n * (i % 7),
exact in float32. A wrong element makes the script exit 2.

Output: an nccl-tests-style table on rank 0 and, with --json FILE, one record
appended to the array in FILE: {"tool": "torch_collectives.py", "benchmark":
"torch-collectives", "backend": "gloo", "np", "config", "rows": [{"collective",
"size", "count", "type", "redop", "in_place": {"time_us", "mean_us", "min_us",
"algbw_gbps", "busbw_gbps", "wrong"}}], "wrong", "environment"}. It names
itself as a tool, so kolo-bench report passes over it rather than taking it
for one of kolo's collectives records.

Exit status: 0 right, 1 error, 2 wrong results (or bad flags).
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback

import torch
import torch.distributed as dist

# The DDP peer beside this file writes its results the same way.
from torch_ddp import write_json

BYTES_PER_SIZE_BUDGET = 1 << 30  # as kolo-bench's kBytesPerSizeBudget
ELEMENT_BYTES = 4  # float32


def byte_size(text):
    """'4K', '256M', '1G' (powers of 1024) or plain bytes, as kolo-bench."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    scale = 1
    if text and text[-1].upper() in units:
        scale = units[text[-1].upper()]
        text = text[:-1]
    try:
        value = int(text) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def size_sweep(min_bytes, max_bytes, step_factor):
    sizes = []
    size = max(min_bytes, 1)
    while size <= max_bytes:
        sizes.append(size)
        size *= step_factor
    return sizes


def capped(requested, size):
    """kolo-bench's CappedIterations: at most 1 GiB moved per size, but
    never below one unless 0 was requested."""
    if size <= 0:
        return requested
    return min(requested, max(1, BYTES_PER_SIZE_BUDGET // size))


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def world_from_env(args):
    """(rank, size, init_method) from torchrun's variables or kolorun's."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        for name in ("MASTER_ADDR", "MASTER_PORT"):
            if name not in os.environ:
                raise SystemExit(f"torch_collectives: RANK is set but {name} "
                                 "is not: start it with torchrun")
        return (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                "env://")
    if "KOLO_RANK" in os.environ and "KOLO_SIZE" in os.environ:
        if not args.master_addr or not args.master_port:
            raise SystemExit("torch_collectives: under kolorun (KOLO_RANK is "
                             "set) give --master-addr and --master-port, "
                             "where rank 0 hosts the rendezvous")
        return (int(os.environ["KOLO_RANK"]), int(os.environ["KOLO_SIZE"]),
                f"tcp://{args.master_addr}:{args.master_port}")
    raise SystemExit("torch_collectives: no world: start it with torchrun "
                     "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or kolorun "
                     "(KOLO_RANK, KOLO_SIZE) with --master-addr/--master-port")


def fill_check_input(buffer, rank):
    pattern = torch.arange(buffer.numel(), dtype=torch.int64) % 7
    buffer.copy_(pattern.to(torch.float32) + (rank + 1))


def count_wrong(buffer, n):
    pattern = torch.arange(buffer.numel(), dtype=torch.int64) % 7
    expected = pattern.to(torch.float32) * n + n * (n + 1) // 2
    return int((buffer != expected).sum().item())


def run_row(size_bytes, n, rank, args):
    """One size: warm-up, timed iterations, then the check. Returns the row,
    or None when the size rounds to no elements."""
    elements = size_bytes // ELEMENT_BYTES
    elements -= elements % n
    if elements == 0:
        return None
    size = elements * ELEMENT_BYTES
    iters = capped(args.iters, size)
    warmup = capped(args.warmup, size)
    buffer = torch.ones(elements, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(buffer)
    dist.barrier()
    seconds = torch.zeros(iters, dtype=torch.float64)
    for i in range(iters):
        start = time.perf_counter()
        dist.all_reduce(buffer)
        seconds[i] = time.perf_counter() - start
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    wrong = None
    if args.check:
        fill_check_input(buffer, rank)
        dist.all_reduce(buffer)
        counted = torch.tensor([count_wrong(buffer, n)], dtype=torch.int64)
        dist.all_reduce(counted)
        wrong = int(counted.item())
    slowest = seconds.tolist()
    time_s = median(slowest)
    algbw = size / time_s / 1e9 if time_s > 0 else 0.0
    return {
        "collective": "allreduce", "size": size, "count": elements,
        "type": "float32", "redop": "sum", "root": -1,
        "iters": iters, "warmup": warmup,
        "in_place": {
            "time_us": time_s * 1e6,
            "mean_us": sum(slowest) / len(slowest) * 1e6,
            "min_us": min(slowest) * 1e6,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * 2 * (n - 1) / n,
            "wrong": wrong,
        },
    }


COLUMNS = (("collective", "", 13, True), ("size", "(B)", 12, False),
           ("count", "(elements)", 12, False), ("type", "", 8, False),
           ("redop", "", 6, False), ("time", "(us)", 11, False),
           ("mean", "(us)", 11, False), ("algbw", "(GB/s)", 7, False),
           ("busbw", "(GB/s)", 7, False), ("#wrong", "", 6, False))


def table_line(lead, cells):
    parts = []
    for (_, _, width, left), cell in zip(COLUMNS, cells):
        parts.append(f"{cell:<{width}}" if left else f"{cell:>{width}}")
    return (lead + " " + " ".join(parts)).rstrip()


def print_header(args, n):
    print(f"# torch_collectives: torch {torch.__version__} gloo allreduce, "
          f"np {n}, minbytes {args.minbytes}, maxbytes {args.maxbytes}, "
          f"stepfactor {args.stepfactor}, iters {args.iters}, warmup "
          f"{args.warmup}, check {int(args.check)}")
    print("# in place (torch's allreduce); time is the median over iters of "
          "the slowest rank, mean beside it; iters capped at 1 GiB per size")
    print("#")
    print(table_line("#", [c[0] for c in COLUMNS]))
    print(table_line("#", [c[1] for c in COLUMNS]))
    sys.stdout.flush()


def row_cells(row):
    m = row["in_place"]
    return [row["collective"], str(row["size"]), str(row["count"]),
            row["type"], row["redop"], f"{m['time_us']:.2f}",
            f"{m['mean_us']:.2f}", f"{m['algbw_gbps']:.2f}",
            f"{m['busbw_gbps']:.2f}",
            "n/a" if m["wrong"] is None else str(m["wrong"])]


def environment():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu_model": cpu, "cores": os.cpu_count(),
            "kernel": platform.release(), "python3_torch": torch.__version__,
            "host": platform.node()}


def append_json(path, record):
    """Appends `record` to the array in `path` (a missing file starts one;
    a file holding one object becomes the array's first record), written
    through a temporary file renamed over `path`."""
    records = []
    if os.path.exists(path):
        with open(path) as file:
            existing = json.load(file)
        if isinstance(existing, list):
            records = existing
        elif isinstance(existing, dict):
            records = [existing]
        else:
            raise SystemExit(f"torch_collectives: --json {path} holds neither "
                             "a record nor an array of them; not overwriting")
    records.append(record)
    write_json(path, records)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="torch.distributed gloo allreduce over a sweep of sizes, "
                    "in kolo-bench collectives' terms.")
    parser.add_argument("-b", "--minbytes", type=byte_size, default="4K")
    parser.add_argument("-e", "--maxbytes", type=byte_size, default="256M")
    parser.add_argument("-f", "--stepfactor", type=int, default=2)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-c", "--check", type=int, choices=(0, 1), default=1)
    parser.add_argument("--master-addr",
                        help="under kolorun: the address where rank 0 hosts "
                             "the rendezvous")
    parser.add_argument("--master-port", type=int,
                        help="under kolorun: the rendezvous port")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds a rank waits for the others")
    parser.add_argument("--json", help="append the results to this file "
                                       "(rank 0)")
    args = parser.parse_args(argv)
    if args.stepfactor < 2:
        parser.error(f"--stepfactor {args.stepfactor} must be at least 2")
    if args.iters < 1:
        parser.error(f"--iters {args.iters} must be at least 1")
    if args.warmup < 0:
        parser.error(f"--warmup {args.warmup} must not be negative")
    if args.minbytes > args.maxbytes:
        parser.error(f"--minbytes {args.minbytes} is larger than --maxbytes "
                     f"{args.maxbytes}")
    if args.json and not os.path.isdir(os.path.dirname(
            os.path.abspath(args.json))):
        parser.error(f"--json {args.json}: no such directory")
    return args


def run(args):
    rank, n, init_method = world_from_env(args)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=init_method, rank=rank, world_size=n,
        timeout=datetime.timedelta(seconds=args.timeout))
    if rank == 0:
        print_header(args, n)
    rows = []
    for size in size_sweep(args.minbytes, args.maxbytes, args.stepfactor):
        row = run_row(size, n, rank, args)
        if row is None or (rows and rows[-1]["size"] == row["size"]):
            continue
        rows.append(row)
        if rank == 0:
            print(table_line(" ", row_cells(row)), flush=True)
    wrong = sum(row["in_place"]["wrong"] or 0 for row in rows)
    if rank == 0:
        print(f"# Out of bounds values : {wrong} "
              f"{'OK' if wrong == 0 else 'FAILED'}")
        average = (sum(row["in_place"]["busbw_gbps"] for row in rows) /
                   len(rows)) if rows else 0.0
        print(f"# Avg bus bandwidth    : {average:.3f}\n#", flush=True)
        if args.json:
            append_json(args.json, {
                "tool": "torch_collectives.py",
                "benchmark": "torch-collectives", "kind": "torch-collectives",
                "backend": "gloo", "np": n,
                "config": {"minbytes": args.minbytes,
                           "maxbytes": args.maxbytes,
                           "stepfactor": args.stepfactor,
                           "iters": args.iters, "warmup": args.warmup,
                           "check": bool(args.check),
                           "torch_version": torch.__version__},
                "rows": rows, "wrong": wrong,
                "environment": environment()})
    return 0 if wrong == 0 else 2


def main(argv=None):
    args = parse_args(argv)
    try:
        status = run(args)
    except SystemExit as stop:
        print(stop, file=sys.stderr)
        status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    # Leave without destructors: tearing down the gloo process group can
    # hang at exit (pytorch/pytorch#56297; see torch_ddp.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
