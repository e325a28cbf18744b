#!/usr/bin/env python3
"""The figures issue 15 asks for, from what bench/multihost/run.sh wrote.

  python3 bench/multihost/summarize.py OUTDIR

OUTDIR holds one folder per configuration ("1gbit-2x2"): link.json
(kolo-bench link), kolo-{small,large}.json (kolo-bench collectives under
kolorun, kolo's default allreduce with the raw engines as --peer),
kolo-flat-*.json (2x2: the hierarchical allreduce off), mpirun-*.json
(kolo-bench collectives under mpirun with --peer mpi), torch-*.json
(torch_collectives.py), train-kolo-MODEL-COMPRESSION.json (kolo-train) and
train-ddp-MODEL-COMPRESSION.json (torch_ddp.py), meta.json and steps.tsv.
A missing file is a missing figure, shown as "-", never estimated.

Printed, nccl-tests style ('#' lines are headers):
  - the link: TCP round trip (median of 4 KiB ping-pongs) and stream rate;
  - per configuration, allreduce bus bandwidth at every size for kolo and
    each peer, kolo over each of the issue's peers (mpirun's MPI, torch's
    gloo) and over the better of the two, and kolo's busbw over the link's
    stream rate;
  - the targets: busbw at 16, 64 and 256 MiB against 1.3x the best peer,
    the 4 KiB allreduce against 4x the round trip;
  - training throughput, kolo against DDP with and without compression,
    and the resnet18 target of 1.2x DDP;
  - every step that failed.
Every figure is in place (how training moves gradients; torch's allreduce
has no other form) and is the bench's own: kolo-bench's time is the mean
over iterations of the slowest rank, torch_collectives.py's the median.

Also writes OUTDIR/summary.json (everything above) and, per configuration,
report-input.json: one collectives record kolo-bench report draws (kolo's
rows, the raw engines, mpirun's MPI and torch's gloo as peers, in-place
figures in both columns since that is what is compared) and one training
record per compression.
"""

import csv
import json
import os
import sys

MIB = 1 << 20
TARGET_SIZES = (16 * MIB, 64 * MIB, 256 * MIB)
BUSBW_TARGET = 1.3  # kolo busbw over the best peer's, 16-256 MiB
LATENCY_TARGET = 4.0  # 4 KiB allreduce time over the TCP round trip
TRAIN_TARGET = 1.2  # resnet18 images/s over DDP's
ISSUE_PEERS = ("mpi", "torch")  # the peers the targets are measured against


def load(path):
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def records(path):
    data = load(path)
    if data is None:
        return []
    return data if isinstance(data, list) else [data]


def rows_by_size(rows):
    """{size: in-place measurement} of a kolo-bench or torch row list."""
    return {row["size"]: row["in_place"] for row in rows
            if row.get("collective", "allreduce") == "allreduce"}


def collectives(folder, stem):
    """kolo's rows, the raw peers' rows and the record's backend, merged
    over the small and the large sweep."""
    kolo, peers, backend = {}, {}, None
    for part in ("small", "large"):
        for record in records(os.path.join(folder, f"{stem}-{part}.json")):
            backend = record.get("backend", backend)
            kolo.update(rows_by_size(record.get("rows", [])))
            for peer in record.get("peers", []):
                peers.setdefault(peer["engine"], {}).update(
                    rows_by_size(peer.get("rows", [])))
    return kolo, peers, backend


def torch_rows(folder):
    rows = {}
    for part in ("small", "large"):
        for record in records(os.path.join(folder, f"torch-{part}.json")):
            rows.update(rows_by_size(record.get("rows", [])))
    return rows


def train_figure(path):
    record = load(path)
    if not isinstance(record, dict) or "result" not in record:
        return None
    result = record["result"]
    return {"images_per_second": result.get("images_per_second"),
            "step_ms": result.get("step_ms")}


def read_configuration(folder):
    meta = load(os.path.join(folder, "meta.json")) or {}
    name = os.path.basename(folder.rstrip("/"))
    rate, _, layout = name.partition("-")
    link_records = records(os.path.join(folder, "link.json"))
    link = link_records[-1] if link_records else None
    kolo, raw, backend = collectives(folder, "kolo")
    flat, _, _ = collectives(folder, "kolo-flat")
    mpirun_kolo, mpirun_peers, mpirun_backend = collectives(folder, "mpirun")
    series = {"kolo": kolo}
    if flat:
        series["kolo flat"] = flat
    for engine, rows in raw.items():
        series[f"raw {engine}"] = rows
    series["mpi"] = mpirun_peers.get("mpi", {})
    series["torch"] = torch_rows(folder)
    train = {}
    for model in ("lenet", "resnet18"):
        for compression in ("none", "fp16", "bf16"):
            for framework in ("kolo", "ddp"):
                figure = train_figure(os.path.join(
                    folder, f"train-{framework}-{model}-{compression}.json"))
                if figure:
                    train[(model, compression, framework)] = figure
        for mode in ("sync", "async"):
            figure = train_figure(os.path.join(
                folder, f"train-ps-{model}-{mode}.json"))
            if figure:
                train[(model, mode, "ps")] = figure
    steps = []
    try:
        with open(os.path.join(folder, "steps.tsv")) as file:
            steps = [row for row in csv.reader(file, delimiter="\t") if row]
    except OSError:
        pass
    return {"name": name, "rate": meta.get("rate", rate),
            "layout": meta.get("layout", layout), "meta": meta, "link": link,
            "backend": backend, "mpirun_backend": mpirun_backend,
            "mpirun_kolo": mpirun_kolo, "series": series, "train": train,
            "steps": steps}


# ---- Formatting -------------------------------------------------------------


def fixed(value, decimals=2):
    return "-" if value is None else f"{value:.{decimals}f}"


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def table(title_lines, columns, rows):
    """'#' header lines, then the rows, every cell right-aligned to its
    column's width (the first column left-aligned)."""
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows))
              if rows else len(str(c)) for i, c in enumerate(columns)]
    lines = [f"# {line}" for line in title_lines]

    def line(lead, cells):
        parts = [str(cells[0]).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return (lead + " " + "  ".join(parts)).rstrip()

    lines.append(line("#", columns))
    lines += [line(" ", row) for row in rows]
    return "\n".join(lines) + "\n#"


def size_label(size):
    if size >= MIB and size % MIB == 0:
        return f"{size // MIB}M"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024}K"
    return str(size)


def busbw(series, size):
    m = series.get(size)
    return None if m is None else m.get("busbw_gbps")


def time_us(series, size):
    m = series.get(size)
    return None if m is None else m.get("time_us")


def best_peer(config, size):
    """The issue's peer with the higher busbw at `size`: (name, busbw)."""
    best = (None, None)
    for name in ISSUE_PEERS:
        value = busbw(config["series"].get(name, {}), size)
        if value is not None and (best[1] is None or value > best[1]):
            best = (name, value)
    return best


def link_figures(config):
    link = config["link"]
    if not link:
        return None, None
    return link["round_trip"]["median_us"], link["stream"]["gbps"]


def verdict(value, target, at_least=True):
    if value is None:
        return "-"
    return "met" if (value >= target if at_least else value <= target) \
        else "MISSED"


# ---- The tables -------------------------------------------------------------


def link_table(configs):
    rows = []
    for c in configs:
        link = c["link"]
        meta = c["meta"]
        if link:
            rt, st = link["round_trip"], link["stream"]
            rows.append([c["name"], fixed(rt["median_us"]), fixed(rt["min_us"]),
                         fixed(rt["p90_us"]), fixed(st["gbps"], 3),
                         fixed(st["gbit_per_s"], 3), st["wrong"] + rt["wrong"],
                         meta.get("loadavg_before", "-"),
                         meta.get("loadavg_after", "-")])
        else:
            rows.append([c["name"], "-", "-", "-", "-", "-", "-",
                         meta.get("loadavg_before", "-"),
                         meta.get("loadavg_after", "-")])
    return table(
        ["link: plain TCP between two hosts' cluster addresses (kolo-bench "
         "link); rtt: 4 KiB ping-pong, TCP_NODELAY; stream: one direction",
         "load: the machine's 1/5/15-minute load average before and after "
         "the configuration's runs"],
        ["config", "rtt(us)", "min(us)", "p90(us)", "stream(GB/s)",
         "(Gbit/s)", "#wrong", "load before", "load after"], rows)


def busbw_table(config):
    series = config["series"]
    names = [n for n in series if series[n]]
    sizes = sorted({s for n in names for s in series[n]})
    _, stream = link_figures(config)
    rows = []
    for size in sizes:
        kolo = busbw(series.get("kolo", {}), size)
        best_name, best = best_peer(config, size)
        row = [size_label(size)] + [fixed(busbw(series[n], size), 3)
                                    for n in names]
        row += [fixed(ratio(kolo, busbw(series.get(p, {}), size)))
                for p in ISSUE_PEERS]
        row += [best_name or "-", fixed(ratio(kolo, best)),
                fixed(ratio(kolo, stream))]
        rows.append(row)
    engine = config["meta"].get("backend", "default")
    hierarchical = config["layout"] == "2x2"
    notes = [
        f"{config['name']}: allreduce busbw (GB/s, in place) = 2(n-1)/n * "
        f"bytes / time; kolo: kolorun's {engine} engine (kolo-bench reports "
        f"backend {config['backend'] or '?'})"
        + (", hierarchical allreduce; kolo flat: "
           "KOLO_HIERARCHICAL_ALLREDUCE=0" if hierarchical else ""),
        "mpi: MPI_Allreduce under mpirun (kolo-bench --peer mpi); torch: "
        "torch.distributed gloo; raw X: kolo's X engine without its runtime",
        f"kolo/link = kolo busbw / link stream ({fixed(stream, 3)} GB/s)"]
    if hierarchical:
        notes.append(
            "ceilings at 2x2: a flat ring puts 2(n-1)/n * bytes on each "
            "host's link, busbw = link; the hierarchical allreduce only "
            "bytes (2 hosts), busbw = 1.5 x link")
    return table(
        notes,
        ["size"] + names + [f"kolo/{p}" for p in ISSUE_PEERS] +
        ["best", "kolo/best", "kolo/link"], rows)


def latency_table(configs):
    rows = []
    names = []
    for c in configs:
        for n in c["series"]:
            if n not in names:
                names.append(n)
    for c in configs:
        rtt, _ = link_figures(c)
        row = [c["name"], fixed(rtt)]
        for n in names:
            row.append(fixed(time_us(c["series"].get(n, {}), 4096)))
        kolo = time_us(c["series"].get("kolo", {}), 4096)
        row += [fixed(ratio(kolo, rtt), 3), verdict(ratio(kolo, rtt),
                                                 LATENCY_TARGET, False)]
        rows.append(row)
    return table(
        ["4 KiB allreduce time (us, in place) against the TCP round trip; "
         f"target: kolo <= {LATENCY_TARGET:g}x rtt"],
        ["config", "rtt"] + names + ["kolo/rtt", "target"], rows)


def target_table(configs):
    rows = []
    for c in configs:
        _, stream = link_figures(c)
        variants = [("kolo", "kolo")]
        if c["series"].get("kolo flat"):
            variants.append(("kolo flat", "kolo flat"))
        for label, key in variants:
            for size in TARGET_SIZES:
                kolo = busbw(c["series"].get(key, {}), size)
                best_name, best = best_peer(c, size)
                r = ratio(kolo, best)
                rows.append([c["name"], label, size_label(size), fixed(kolo, 3),
                             best_name or "-", fixed(best, 3), fixed(r, 3),
                             verdict(r, BUSBW_TARGET), fixed(stream, 3),
                             fixed(ratio(kolo, stream))])
    return table(
        [f"target: kolo busbw at 16-256 MiB >= {BUSBW_TARGET:g}x the best of "
         "mpirun's MPI and torch's gloo; link = stream GB/s"],
        ["config", "kolo", "size", "busbw", "best peer", "busbw", "kolo/best",
         "target", "link", "kolo/link"], rows)


def train_table(configs):
    rows = []
    verdicts = []
    for c in configs:
        if not c["train"]:
            continue
        for model in ("lenet", "resnet18"):
            ddp_none = c["train"].get((model, "none", "ddp"))
            for compression in ("none", "fp16", "bf16"):
                kolo = c["train"].get((model, compression, "kolo"))
                ddp = c["train"].get((model, compression, "ddp"))
                k = kolo and kolo["images_per_second"]
                d = ddp and ddp["images_per_second"]
                d0 = ddp_none and ddp_none["images_per_second"]
                same = ratio(k, d)
                rows.append([c["name"], model, compression, fixed(k, 0),
                             fixed(kolo and kolo["step_ms"], 1), fixed(d, 0),
                             fixed(ddp and ddp["step_ms"], 1), fixed(same, 3),
                             fixed(ratio(k, d0), 3),
                             verdict(same if same is not None else
                                     ratio(k, d0), TRAIN_TARGET)
                             if model == "resnet18" else ""])
            best_kolo = max((f["images_per_second"] for (m, _, fw), f in
                             c["train"].items() if m == model and fw == "kolo"
                             and f["images_per_second"]), default=None)
            best_ddp = max((f["images_per_second"] for (m, _, fw), f in
                            c["train"].items() if m == model and fw == "ddp"
                            and f["images_per_second"]), default=None)
            if model == "resnet18":
                verdicts.append(
                    f"{c['name']} resnet18: best kolo {fixed(best_kolo, 0)} / "
                    f"best DDP {fixed(best_ddp, 0)} images/s = "
                    f"{fixed(ratio(best_kolo, best_ddp), 3)} "
                    f"({verdict(ratio(best_kolo, best_ddp), TRAIN_TARGET)})")
    if not rows:
        return "# training: no figures\n#"
    text = table(
        ["training throughput at 4 ranks on 2 hosts (images/s, all ranks); "
         "kolo-train --benchmark-steps against torch_ddp.py under torchrun",
         "kolo/ddp: same compression (DDP's fp16_compress_hook; DDP has no "
         "bf16 hook on CPU); kolo/ddp-none: against DDP sending fp32",
         f"target: resnet18 >= {TRAIN_TARGET:g}x DDP (same compression, or "
         "DDP fp32 where it has none)"],
        ["config", "model", "compression", "kolo", "ms/step", "ddp",
         "ms/step", "kolo/ddp", "kolo/ddp-none", "target"], rows)
    return text + "\n" + "\n".join(f"# {v}" for v in verdicts) + "\n#"


def ps_table(configs):
    rows = []
    for c in configs:
        for model in ("lenet", "resnet18"):
            allreduce = c["train"].get((model, "none", "kolo"))
            a = allreduce and allreduce["images_per_second"]
            for mode in ("sync", "async"):
                ps = c["train"].get((model, mode, "ps"))
                if not ps:
                    continue
                p = ps["images_per_second"]
                rows.append([c["name"], model, mode, fixed(p, 0),
                             fixed(ps["step_ms"], 1), fixed(a, 0),
                             fixed(ratio(p, a), 3)])
    if not rows:
        return "# parameter server: no figures\n#"
    return table(
        ["parameter server against allreduce at 4 workers on 2 hosts "
         "(images/s, all workers); one server process on h2",
         "kolo-train --parameter-servers 1 under kolorun --servers 1 against "
         "kolo-train's allreduce (no compression)"],
        ["config", "model", "mode", "ps", "ms/step", "allreduce", "ps/allreduce"],
        rows)


def failures(configs):
    failed = [f"{c['name']}/{step[0]}: exit {step[1]}" for c in configs
              for step in c["steps"]
              if len(step) > 1 and step[1] not in ("0", "skipped")]
    skipped = [f"{c['name']}/{step[0]}" for c in configs
               for step in c["steps"] if len(step) > 1 and step[1] == "skipped"]
    lines = ["# steps that failed: " + (", ".join(failed) or "none")]
    if skipped:
        lines.append("# skipped: " + ", ".join(skipped))
    return "\n".join(lines)


# ---- kolo-bench report's input ----------------------------------------------


def report_rows(series):
    rows = []
    for size in sorted(series):
        m = series[size]
        measurement = {"time_us": m.get("time_us"),
                       "algbw_gbps": m.get("algbw_gbps"),
                       "busbw_gbps": m.get("busbw_gbps"),
                       "wrong": m.get("wrong")}
        rows.append({"collective": "allreduce", "size": size,
                     "count": size // 4, "type": "float32", "redop": "sum",
                     "root": -1, "out_of_place": measurement,
                     "in_place": measurement})
    return rows


def report_input(config):
    series = config["series"]
    kolo_name = config["meta"].get("backend", "default")
    if config["layout"] == "2x2":
        kolo_name += " hierarchical"
    peers = [{"engine": name.replace("raw ", ""), "rows": report_rows(rows)}
             for name, rows in series.items()
             if name != "kolo" and rows]
    out = [{"benchmark": "collectives", "backend": kolo_name, "np": 4,
            "rows": report_rows(series.get("kolo", {})), "peers": peers}]
    for compression in ("none", "fp16", "bf16"):
        rows = []
        for framework, label in (("kolo", "kolo"), ("ddp", "torch-ddp")):
            for model in ("lenet", "resnet18"):
                figure = config["train"].get((model, compression, framework))
                if figure and figure["images_per_second"]:
                    rows.append((model, {
                        "framework": label, "np": 4,
                        "images_per_second_mean": figure["images_per_second"],
                        "step_ms_mean": figure["step_ms"]}))
        for model in ("lenet", "resnet18"):
            model_rows = [r for m, r in rows if m == model]
            if model_rows:
                out.append({"tool": "kolo-bench train",
                            "study": f"{config['name']} compression "
                                     f"{compression}",
                            "config": {"model": model,
                                       "dataset": ("fashion-mnist"
                                                   if model == "lenet"
                                                   else "synthetic"),
                                       "batch_size": (128 if model == "lenet"
                                                      else 32),
                                       "scaling": "weak", "threads": 1},
                            "rows": model_rows})
    return out


def main(argv):
    if len(argv) != 2:
        print("usage: summarize.py OUTDIR", file=sys.stderr)
        return 2
    outdir = argv[1]
    folders = sorted(
        (os.path.join(outdir, d) for d in os.listdir(outdir)
         if os.path.isdir(os.path.join(outdir, d)) and "-" in d),
        key=lambda f: (int("".join(ch for ch in os.path.basename(f)
                                   .split("-")[0] if ch.isdigit()) or 0),
                       os.path.basename(f)))
    configs = [read_configuration(f) for f in folders]
    if not configs:
        print(f"summarize.py: no configuration folders in {outdir}",
              file=sys.stderr)
        return 1
    print(link_table(configs))
    for c in configs:
        print(busbw_table(c))
    print(latency_table(configs))
    print(target_table(configs))
    print(train_table(configs))
    print(ps_table(configs))
    print(failures(configs))
    summary = []
    for c in configs:
        summary.append({
            "config": c["name"], "rate": c["rate"], "layout": c["layout"],
            "meta": c["meta"], "backend": c["backend"], "link": c["link"],
            "series": {n: {str(s): m for s, m in rows.items()}
                       for n, rows in c["series"].items()},
            "train": [{"model": m, "compression": comp, "framework": fw,
                       **figure} for (m, comp, fw), figure in
                      c["train"].items()],
            "steps": c["steps"]})
        with open(os.path.join(outdir, c["name"], "report-input.json"),
                  "w") as file:
            json.dump(report_input(c), file, indent=2)
    with open(os.path.join(outdir, "summary.json"), "w") as file:
        json.dump(summary, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
