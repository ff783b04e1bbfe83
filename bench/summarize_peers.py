"""Medians per tool and size from compare_peers.sh's raw rows, and hvd's ratio to each peer.

Ratio = peer time / hvd time: above 1.0 means hvd is faster."""
import json
import statistics
import sys
from collections import defaultdict

raw, json_out, md_out = sys.argv[1:4]
times = defaultdict(list)
busbw = defaultdict(list)
for line in open(raw):
    line = line.strip()
    if not line.startswith("{"):
        continue
    row = json.loads(line)
    times[(row["tool"], row["size"])].append(row["time_us"])
    busbw[(row["tool"], row["size"])].append(row["busbw_gbps"])

sizes = sorted({size for _, size in times})
mpi = "openmpi-shm" if any(tool == "openmpi-shm" for tool, _ in times) else "openmpi-tcp"
tools = ["hvd", mpi, "gloo"]
rows = []
for size in sizes:
    med = {t: statistics.median(times[(t, size)]) for t in tools if (t, size) in times}
    bw = {t: statistics.median(busbw[(t, size)]) for t in tools if (t, size) in busbw}
    peers = [t for t in tools[1:] if t in med]
    best_peer = min(med[t] for t in peers) if peers else None
    rows.append({
        "size": size,
        "median_time_us": med,
        "median_busbw_gbps": bw,
        "ratio_vs_best_peer": best_peer / med["hvd"] if best_peer and "hvd" in med else None,
        "ratio_vs_gloo": med["gloo"] / med["hvd"] if "gloo" in med and "hvd" in med else None,
        "rounds": len(times[("hvd", size)]),
    })
json.dump({"rows": rows}, open(json_out, "w"), indent=2)


def human(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


mpi_name = "OpenMPI-shm" if mpi == "openmpi-shm" else "OpenMPI-TCP"
lines = [f"| size | hvd us | {mpi_name} us | Gloo us | hvd busbw GB/s | MPI busbw | Gloo busbw "
         "| hvd vs best peer | hvd vs Gloo |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]


def micros(d, t):
    """Three significant digits at least: shared memory's small sizes take tenths of a us."""
    if t not in d:
        return "-"
    return f"{d[t]:.3f}" if d[t] < 1 else f"{d[t]:.2f}" if d[t] < 10 else f"{d[t]:.1f}"


for r in rows:
    m, b = r["median_time_us"], r["median_busbw_gbps"]
    cell = lambda d, t, f: f.format(d[t]) if t in d else "-"
    ratio = lambda x: f"{x:.2f}x" if x else "-"
    lines.append(f"| {human(r['size'])} | {micros(m, 'hvd')} | "
                 f"{micros(m, mpi)} | {micros(m, 'gloo')} | "
                 f"{cell(b, 'hvd', '{:.2f}')} | {cell(b, mpi, '{:.2f}')} | "
                 f"{cell(b, 'gloo', '{:.2f}')} | {ratio(r['ratio_vs_best_peer'])} | "
                 f"{ratio(r['ratio_vs_gloo'])} |")
open(md_out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
