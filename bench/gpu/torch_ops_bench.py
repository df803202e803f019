#!/usr/bin/env python3
"""Times PyTorch's own eager ops on the shapes and dtypes of cuda_kernels_bench's rows.

Reads the JSON lines that `cuda_kernels_bench --json FILE` wrote (the one source of the shapes),
times the PyTorch counterpart of each row the same way (CUDA events after warm-up, median of
--iters runs, L2 flushed before each run, random inputs) and prints one JSON object per row:
{"model", "op", "torch_ms", "torch_what"}. Needs PyTorch with CUDA (the GPU machine has it).
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


def median_ms(fn, warmup, iters):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for i in range(iters):
        flush.fill_(i & 0xFF)
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def rand(*shape, lo=-1.0, hi=1.0, dtype=BF16):
    return (torch.rand(*shape, device="cuda", dtype=torch.float32) * (hi - lo) + lo).to(dtype)


def matmul_case(row, backward):
    s = row["shape"]
    bt, c, oc = s["BT"], s["C"], s["OC"]
    x, w, b, dout = rand(bt, c), rand(oc, c, lo=-0.05, hi=0.05), rand(oc), rand(bt, oc)
    with_bias = "lm head" not in row["op"]
    if backward:
        def run():
            dout @ w                       # dinp
            dout.t() @ x                   # dweight
            if with_bias:
                dout.sum(0)                # dbias
        return run, "matmuls for dinp and dweight (+ dout.sum for dbias), bf16"
    if "+gelu" in row["op"]:
        return (lambda: F.gelu(F.linear(x, w, b), approximate="tanh"),
                "F.gelu(F.linear(x, w, b), approximate='tanh'), bf16")
    return (lambda: F.linear(x, w, b if with_bias else None)), "F.linear, bf16"


def layernorm_case(row):
    s = row["shape"]
    bt, c = s["BT"], s["C"]
    x, x2, w, b, dout = rand(bt, c, lo=-2, hi=2), rand(bt, c), rand(c, lo=0.5, hi=1.5), rand(c), rand(bt, c)
    if row["op"] == "layernorm fwd":
        return (lambda: F.layer_norm(x, (c,), w, b, 1e-5)), "F.layer_norm, bf16"
    if row["op"] == "residual+layernorm fwd":
        return (lambda: F.layer_norm(x + x2, (c,), w, b, 1e-5)), "x + y, F.layer_norm, bf16"
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [c], w, b, 1e-5)
    return (lambda: torch.ops.aten.native_layer_norm_backward(
        dout, x, [c], mean, rstd, w, b, [True, True, True])), "aten.native_layer_norm_backward, bf16"


def attention_case(row):
    s = row["shape"]
    q, k, v = (rand(s["B"], s["NH"], s["T"], s["HS"]).requires_grad_() for _ in range(3))
    if row["op"] == "attention fwd":
        def run():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return run, "F.scaled_dot_product_attention(is_causal=True), bf16"
    dout = rand(s["B"], s["NH"], s["T"], s["HS"])
    if row["op"] == "attention bwd":
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return (lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)), \
            "autograd of scaled_dot_product_attention, bf16"
    def run():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.autograd.grad(out, (q, k, v), dout)
    return run, "scaled_dot_product_attention forward + autograd backward, bf16"


def elementwise_case(row):
    n = row["shape"]["N"]
    if row["op"] == "gelu fwd":
        x = rand(n, lo=-3, hi=3)
        return (lambda: F.gelu(x, approximate="tanh")), "F.gelu(approximate='tanh'), bf16"
    if row["op"] == "gelu bwd":
        x, dout = rand(n, lo=-3, hi=3), rand(n)
        return (lambda: torch.ops.aten.gelu_backward(dout, x, approximate="tanh")), \
            "aten.gelu_backward(approximate='tanh'), bf16"
    a, b = rand(n), rand(n)
    return (lambda: a + b), "a + b, bf16"


def encoder_case(row):
    s = row["shape"]
    bsz, t, c, v = s["B"], s["T"], s["C"], s["V"]
    tokens = torch.randint(0, v, (bsz, t), device="cuda")
    wte, wpe, dout = rand(v, c), rand(t, c), rand(bsz, t, c)
    if row["op"] == "encoder fwd":
        return (lambda: F.embedding(tokens, wte) + wpe), "F.embedding + wpe, bf16"
    return (lambda: (torch.ops.aten.embedding_dense_backward(dout, tokens, v, -1, False),
                     dout.sum(0))), "aten.embedding_dense_backward + dout.sum(0), bf16"


def cross_entropy_case(row):
    s = row["shape"]
    logits = rand(s["BT"], s["V"], lo=-4, hi=4).requires_grad_()
    targets = torch.randint(0, s["V"], (s["BT"],), device="cuda")
    def run():
        loss = F.cross_entropy(logits, targets)
        torch.autograd.grad(loss, logits)
    return run, "F.cross_entropy forward + autograd backward, bf16 logits"


def optimizer_case(row):
    n = row["shape"]["N"]
    grads = rand(n, lo=-0.1, hi=0.1, dtype=torch.float32)
    if row["op"] == "global norm":
        return (lambda: torch.linalg.vector_norm(grads).item()), "torch.linalg.vector_norm, fp32"
    param = torch.nn.Parameter(rand(n, dtype=torch.float32))
    param.grad = grads
    optimizer = torch.optim.AdamW([param], lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    copy = torch.empty(n, dtype=BF16, device="cuda")
    def run():
        optimizer.step()
        copy.copy_(param.detach())
    return run, "torch.optim.AdamW(fused=True).step() + bf16 copy, fp32 state"


def case_for(row):
    op = row["op"]
    if op.startswith("matmul fwd"):
        return matmul_case(row, backward=False)
    if op.startswith("matmul bwd"):
        return matmul_case(row, backward=True)
    if "layernorm" in op:
        return layernorm_case(row)
    if op.startswith("attention"):
        return attention_case(row)
    if op.startswith("gelu") or op.startswith("residual"):
        return elementwise_case(row)
    if op.startswith("encoder"):
        return encoder_case(row)
    if op.startswith("softmax cross-entropy"):
        return cross_entropy_case(row)
    return optimizer_case(row)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cuda_rows", help="JSON lines from cuda_kernels_bench --json")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    with open(args.cuda_rows) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        if row["op"] == "ceiling":
            continue
        run, what = case_for(row)
        ms = median_ms(run, args.warmup, args.iters)
        print(json.dumps({"model": row["model"], "op": row["op"], "torch_ms": ms,
                          "torch_what": what}), flush=True)
        print(f"torch {row['model']} {row['op']}: {ms:.4f} ms", file=sys.stderr)
        del run
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
