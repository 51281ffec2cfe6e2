#!/usr/bin/env python3
"""Draws the library, the raw-call floor and the peer per operation, from one benchmark run.

Usage: bench-chart.py OUT_PNG PIPELINE_JSON BENCHMARK_JSON... (needs matplotlib). Rows, floors and
peers are read as bench-report.py reads them: a row and its floor and peer from the same file.
"""
import importlib.util
import json
import os
import sys

def load_report():
    spec = importlib.util.spec_from_file_location(
        "bench_report", os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LABELS = {
    "BM_Hop3_Library": "3-consumer hop",
    "BM_Handoff_Library": "hand-off",
    "BM_SetReadinessStream": "set_readiness_stream",
    "BM_SetDeallocationStream": "set_deallocation_stream",
    "BM_SynchronizeForConsumer_OtherStream": "synchronize_for_consumer",
    "BM_ImportAndDestroy_Host4D": "import + destroy",
    "BM_ExportAndDelete_Host4D": "export + deleter",
    "BM_TensorCopyAndDestroy": "Tensor copy",
}


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out, pipeline_path, *bench_paths = sys.argv[1:]
    bench = load_report()
    runs = [bench.load(path) for path in bench_paths]
    names, ours, floors, peers = [], [], [], []
    for name, label in LABELS.items():
        found = next((run for run in runs if run[0].get(name) is not None), None)
        if found is None:
            continue
        times = found[0]
        floor_rows, peer_row, _, _ = bench.ROWS[name]
        names.append(label)
        ours.append(times[name])
        floors.append(sum(times.get(f) or 0.0 for f in floor_rows) if floor_rows else 0.0)
        peers.append(times.get(peer_row) or 0.0 if peer_row else 0.0)

    with open(pipeline_path) as f:
        pipeline = json.load(f)

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9))
    x = range(len(names))
    width = 0.27
    top.bar([i - width for i in x], ours, width, label="holoscan-dlpack")
    top.bar(list(x), floors, width, label="raw CUDA / atomic floor")
    top.bar([i + width for i in x], peers, width, label="PyTorch 2.11")
    top.set_xticks(list(x))
    top.set_xticklabels(names, rotation=20, ha="right")
    top.set_ylabel("ns per operation (median)")
    top.set_yscale("log")
    top.set_title("Per operation, one H200 run (same process for library, floor and peer)")
    top.legend()

    cases = [(r["kernel"], r["consumers"]) for r in pipeline if r["ordering"] == "events"]
    by = {(r["kernel"], r["consumers"], r["ordering"]): r["ns_per_frame"] for r in pipeline}
    labels = [f"{kernel} kernels, {n} consumer(s)" for kernel, n in cases]
    x = range(len(cases))
    for offset, ordering in ((-width, "host-sync"), (0, "events"), (width, "library")):
        bottom.bar([i + offset for i in x],
                   [by[(k, n, ordering)] / by[(k, n, "events")] for k, n in cases], width,
                   label=ordering)
    bottom.axhline(1.0, color="grey", linewidth=0.8)
    bottom.set_xticks(list(x))
    bottom.set_xticklabels(labels, rotation=20, ha="right")
    bottom.set_ylabel("time per frame / hand-written events")
    bottom.set_title("Pipeline: 1 producer, N consumers, 4 buffers, every read checked")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
