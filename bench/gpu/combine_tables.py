#!/usr/bin/env python3
"""Combines cuda_kernels_bench's rows with torch_ops_bench.py's into one markdown table.

Usage: combine_tables.py CUDA_JSONL [TORCH_JSONL] [--tests-summary TEXT] [--gpu TEXT]
Columns: time, achieved TFLOP/s or GB/s, the fraction of the ceilings measured in the same run,
the target, PyTorch eager's time on the same shapes and dtypes, and tessel's speed relative to
it (above 1: tessel is faster).
"""
import argparse
import json


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def shape_text(shape):
    return " ".join(f"{k}={v}" for k, v in shape.items())


def table(cuda_rows, torch_rows, tests_summary, gpu):
    ceiling = next(r for r in cuda_rows if r["op"] == "ceiling")
    torch_by_key = {(r["model"], r["op"]): r for r in torch_rows}
    n = ceiling["gemm_n"]
    lines = []
    if gpu:
        lines.append(f"GPU: {gpu}")
    lines.append(f"Measured ceilings in this run: device-to-device copy {ceiling['copy_gbps']:.0f} GB/s "
                 f"(bytes read + written), bf16 GEMM {n}x{n}x{n} {ceiling['gemm_tflops']:.1f} TFLOP/s.")
    if tests_summary:
        lines.append(f"CUDA tests (tests/cuda against the CPU twins): {tests_summary}")
    lines.append("")
    lines.append("| model | op | shape | ms | TFLOP/s | GB/s | of ceiling | target | met | "
                 "PyTorch ms | vs PyTorch |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in cuda_rows:
        if r["op"] == "ceiling":
            continue
        seconds = r["ms"] * 1e-3
        tflops = r["flops"] / seconds / 1e12 if r["flops"] else None
        gbps = r["bytes"] / seconds / 1e9 if r["bytes"] else None
        fraction = tflops / ceiling["gemm_tflops"] if r["bound"] == "compute" else gbps / ceiling["copy_gbps"]
        target = r["target"] or "-"
        met = "-"
        if r["target"]:
            needed = float(r["target"].split("%")[0].strip(">= ")) / 100
            met = "yes" if fraction >= needed else "no"
        t = torch_by_key.get((r["model"], r["op"]))
        torch_ms = f"{t['torch_ms']:.4f}" if t else "-"
        versus = f"{t['torch_ms'] / r['ms']:.2f}x" if t else "-"
        lines.append(
            f"| {r['model']} | {r['op']} | {shape_text(r['shape'])} | {r['ms']:.4f} | "
            f"{f'{tflops:.1f}' if tflops else '-'} | {f'{gbps:.0f}' if gbps else '-'} | "
            f"{100 * fraction:.1f}% | {target} | {met} | {torch_ms} | {versus} |")
    if torch_rows:
        lines.append("")
        lines.append("PyTorch's ops: " + "; ".join(
            sorted({f"{r['op']}: {r['torch_what']}" for r in torch_rows})))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cuda_rows")
    parser.add_argument("torch_rows", nargs="?")
    parser.add_argument("--tests-summary", default="")
    parser.add_argument("--gpu", default="")
    args = parser.parse_args()
    torch_rows = load(args.torch_rows) if args.torch_rows else []
    print(table(load(args.cuda_rows), torch_rows, args.tests_summary, args.gpu), end="")


if __name__ == "__main__":
    main()
