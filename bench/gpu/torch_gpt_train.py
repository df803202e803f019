#!/usr/bin/env python3
"""Trains the stage runtime's GPT-2 in PyTorch, the baseline of bench/gpu/train_bench.py.

The model is tessel's (noderuntime/stage/parameter_layout.h), written out: learned token and
position tables, pre-LayerNorm blocks (eps 1e-5) with a fused qkv projection (bias), causal
attention (F.scaled_dot_product_attention, is_causal=True), an output projection (bias), an MLP
of width ffn with tanh GELU (biases), a final LayerNorm, and the LM head tied to the token table.
Initialisation as parameter_init.h: matrices and tables normal(0, 0.02), the two residual
projections normal(0, 0.02 / sqrt(2 L)), biases 0, layernorm gains 1.

Training as tessel's CUDA backend does it: fp32 master weights, bf16 autocast for the forward
and backward, fp32 gradients accumulated over --accum micro-batches of --batch sequences, the
mean loss over the step's tokens, gradient clipping by global norm (1.0), AdamW (fused) with
weight decay on the matrices and tables only (dim >= 2; biases and layernorms none), lr 3e-4,
betas (0.9, 0.95), eps 1e-8, weight decay 0.1, constant learning rate.

Data: a fixed stream of uniformly random token ids (seeded), a new slice every micro-batch; the
loss therefore stays near ln(vocab) (about 10.8 for 50304): a check of the initialisation, not of
learning.

--mode eager | compile (torch.compile(model, mode="default"); not max-autotune, whose
autotuning would take minutes). Every step is timed with
torch.cuda.synchronize() and time.perf_counter(); the first --warmup steps (which hold the
compilation) are left out of the medians. Prints one JSON line per step, then a summary line:
{"impl": "pytorch-eager" | "pytorch-compile", "tokens_per_s", "mfu", "mfu_datasheet", "step_ms",
"loss_first", "loss_last", ...}; MFU as bench/gpu/gpt_flops.py counts it.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_flops  # noqa: E402


class Block(nn.Module):
    def __init__(self, channels, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(channels, eps=1e-5)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.ln_2 = nn.LayerNorm(channels, eps=1e-5)
        self.fc = nn.Linear(channels, ffn)
        self.fc_proj = nn.Linear(ffn, channels)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        hs = c // self.heads
        q = q.view(b, t, self.heads, hs).transpose(1, 2)
        k = k.view(b, t, self.heads, hs).transpose(1, 2)
        v = v.view(b, t, self.heads, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        x = x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, layers, channels, heads, ffn, seq_len, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(seq_len, channels)
        self.h = nn.ModuleList([Block(channels, heads, ffn) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(channels, eps=1e-5)
        self.lm_head = nn.Linear(channels, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        std = 0.02
        residual_std = std / math.sqrt(2 * layers)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):  # h.<l>.proj (attention) and h.<l>.fc_proj (MLP)
                nn.init.normal_(p, 0.0, residual_std)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.ones_(p)  # layernorm gains

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--channels", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ffn", type=int, default=0, help="MLP width; 0: 4 x channels")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--batch", type=int, default=16, help="sequences per micro-batch (B)")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per step (m)")
    p.add_argument("--steps", type=int, default=15, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of the medians")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--peak-tflops", type=float, default=gpt_flops.MEASURED_PEAK_TFLOPS,
                   help="bf16 dense peak for MFU (default: the measured 8192^3 GEMM)")
    p.add_argument("--time-limit-s", type=float, default=0,
                   help="stop after the step that passes this many seconds of timed steps "
                        "(warm-up excluded); 0: no limit")
    p.add_argument("--label", default="", help="model name echoed in the summary")
    a = p.parse_args()
    if a.ffn == 0:
        a.ffn = 4 * a.channels
    for name in ("layers", "channels", "heads", "ffn", "seq_len", "vocab", "batch", "accum", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(a, name)}")
    if a.channels % a.heads:
        p.error(f"--heads {a.heads} must divide --channels {a.channels}")
    if not 0 <= a.warmup < a.steps:
        p.error(f"--warmup must be in [0, --steps), got {a.warmup} with --steps {a.steps}")
    if a.peak_tflops <= 0:
        p.error(f"--peak-tflops must be > 0, got {a.peak_tflops}")
    return a


def main():
    a = parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_gpt_train.py: no CUDA device visible to PyTorch")
    torch.manual_seed(a.seed)
    device = "cuda"

    model = GPT(a.layers, a.channels, a.heads, a.ffn, a.seq_len, a.vocab).to(device)
    n_params = sum(p.numel() for p in model.parameters())  # the tied table once
    counted = gpt_flops.counted_parameters(a.layers, a.channels, a.ffn, a.vocab)
    if n_params - a.seq_len * a.channels != counted:
        sys.exit(f"torch_gpt_train.py: the model has {n_params} parameters, gpt_flops counts "
                 f"{counted} + the position table {a.seq_len * a.channels}: they disagree")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model, mode="default") if a.mode == "compile" else model

    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    rows_per_step = a.accum * a.batch
    stream = torch.randint(0, a.vocab, (a.steps * rows_per_step, a.seq_len + 1), generator=gen)
    # One tensor of its own per micro-batch (B, T), as a data loader hands them over.
    micro_batches = [(rows[:, :-1].contiguous().to(device), rows[:, 1:].contiguous().to(device))
                     for rows in stream.split(a.batch)]

    tokens_per_step = rows_per_step * a.seq_len
    flops_token = gpt_flops.flops_per_token(a.layers, a.channels, a.ffn, a.seq_len, a.vocab)
    impl = "pytorch-" + a.mode
    losses, times = [], []
    warmup_s = 0.0
    timed_s = 0.0
    torch.cuda.synchronize()
    for step in range(a.steps):
        start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        for j in range(a.accum):
            x, y = micro_batches[step * a.accum + j]
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(x, y) / a.accum
            loss.backward()
            loss_sum += loss.detach()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        loss_value = loss_sum.item()
        losses.append(loss_value)
        warm = step < a.warmup
        if warm:
            warmup_s += seconds
        else:
            times.append(seconds)
            timed_s += seconds
        print(json.dumps({"event": "step", "impl": impl, "step": step + 1, "loss": loss_value,
                          "step_ms": seconds * 1e3, "tokens_per_s": tokens_per_step / seconds,
                          "warmup": warm}), flush=True)
        if not math.isfinite(loss_value):
            sys.exit(f"torch_gpt_train.py: the loss is {loss_value} at step {step + 1}")
        if a.time_limit_s > 0 and timed_s > a.time_limit_s:
            break

    step_s = statistics.median(times)
    tokens_per_s = tokens_per_step / step_s
    print(json.dumps({
        "impl": impl,
        "model": a.label or f"L{a.layers} C{a.channels} H{a.heads} F{a.ffn} T{a.seq_len} V{a.vocab}",
        "tokens_per_s": tokens_per_s,
        "mfu": tokens_per_s * flops_token / (a.peak_tflops * 1e12),
        "mfu_datasheet": tokens_per_s * flops_token / (gpt_flops.DATASHEET_PEAK_TFLOPS * 1e12),
        "peak_tflops": a.peak_tflops,
        "step_ms": step_s * 1e3,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "steps": len(losses),
        "timed_steps": len(times),
        "warmup_s": warmup_s,
        "tokens_per_step": tokens_per_step,
        "batch": a.batch,
        "accum": a.accum,
        "flops_per_token": flops_token,
        "parameters": n_params,
        "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
    }), flush=True)


if __name__ == "__main__":
    main()
