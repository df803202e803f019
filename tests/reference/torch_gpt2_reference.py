#!/usr/bin/python3
"""tessel's CPU GPT (noderuntime/stage/gpt_chunk.cpp) against GPT-2 in PyTorch, as llm.c's
test_gpt2 checks itself against PyTorch.

    torch_gpt2_reference.py --program build/tests/reference/gpt-reference-dump
    torch_gpt2_reference.py dump.safetensors

The file (gpt_reference_dump.cpp writes it; --program runs it into a temporary folder) holds
the weights, a micro-batch, and tessel's loss and gradients. This script builds GPT-2 from
torch.nn.functional ops on those weights in float64, takes the loss and every gradient by
autograd, and compares. The model is tessel's, op for op (kernels/cpu):
  x = wte[tokens] + wpe[:T]
  per block: x += proj(attention(qkv(ln_1(x)))); x += mlp.proj(gelu_tanh(mlp.fc(ln_2(x))))
    (every linear has a bias; qkv's output is q | k | v, head h in columns h*HS..h*HS+HS-1;
    scores scaled by 1/sqrt(HS), causal)
  logits = ln_f(x) @ wte^T (tied head, no bias); loss = mean cross-entropy over the B*T targets
  layernorms: eps 1e-5, biased variance.

Tolerances. tessel computes in float32 (unit roundoff u = 2^-24 = 6.0e-8); the reference in
float64 on the same float32 weights, so its own error (~1e-16) is nil and what differs is
tessel's rounding. A sum of n float32 terms is off by at most n*u relative (the worst case:
every rounding the same way) and by about sqrt(n)*u in practice (roundings of both signs
cancel; Higham and Mary, "A new approach to probabilistic rounding error analysis", 2019). The
longest sums here are n = 256 (the MLP's width, the vocabulary; 64 positions into a weight
gradient): sqrt(256)*u = 1e-6 per op. A gradient passes through up to ~8L+6 = 30 such ops,
whose errors add like a random walk: sqrt(30) * 1e-6 = 5.5e-6. So:
  GRADIENT_TOLERANCE = 1e-5  on ||g_tessel - g_torch|| / ||g_torch||, per tensor
  LOSS_TOLERANCE     = 1e-6  on |loss_tessel - loss_torch| / loss_torch (one 256-term
                             logsumexp per position, averaged: sqrt(256)*u = 1e-6)
This test measures 1e-7 to 3.4e-7 on the gradients and 1e-8 on the loss, 30x and 100x inside.
The worst-case bound (n*u per op, 8e-5 over 30 ops) would be too loose to be useful: a wrong
model can cost less. Checked by breaking this reference on purpose: GELU by erf instead of
tanh misses by 3.2e-4 (32x the tolerance), a GELU cubic of 0.045 for 0.044715 by 1.5e-4, a
layernorm eps of 1e-6 for 1e-5 by 6e-3, an untied head by 1e2 on wte.
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

GRADIENT_TOLERANCE = 1e-5
LOSS_TOLERANCE = 1e-6
LAYERNORM_EPS = 1e-5  # kernels/cpu/layernorm.h
INSTALL_HINT = "run scripts/install-deps.sh (it installs python3-torch and python3-numpy)"


class ReferenceError(Exception):
    pass


def import_torch():
    """numpy and torch, or a ReferenceError saying how to install them."""
    try:
        import numpy
        import torch
    except ImportError as e:
        raise ReferenceError(
            f"PyTorch or numpy is missing for {sys.executable} ({e}): {INSTALL_HINT}")
    return numpy, torch


def read_safetensors(path, np):
    """(metadata, {name: numpy array}) of a safetensors file (F32, F64 and I32 tensors)."""
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32}
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ReferenceError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ReferenceError(f"{path}: header length {header_len} runs past the file's "
                             f"{len(blob)} bytes")
    header = json.loads(blob[8:8 + header_len])
    if not isinstance(header, dict):
        raise ReferenceError(f"{path}: the header is not a JSON object")
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, entry in header.items():
        try:
            dtype_name = entry["dtype"]
            shape = tuple(entry["shape"])
            begin, end = entry["data_offsets"]
            count = math.prod(shape)
        except (KeyError, TypeError, ValueError) as e:
            raise ReferenceError(f"{path}: tensor '{name}': header entry {entry} lacks a dtype, "
                                 f"a shape or two data_offsets ({e!r})")
        dtype = dtypes.get(dtype_name)
        if dtype is None:
            raise ReferenceError(f"{path}: tensor '{name}': dtype {dtype_name} not one of "
                                 f"{sorted(dtypes)}")
        if not 0 <= begin <= end <= len(data) or end - begin != count * np.dtype(dtype).itemsize:
            raise ReferenceError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] do not "
                                 f"hold shape {list(shape)} of {dtype_name} in a buffer of "
                                 f"{len(data)} bytes")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
    return metadata, tensors


def expected_parameters(cfg):
    """Name -> shape of every parameter of the whole model (stage/parameter_layout.h)."""
    C, F, V, T = cfg["channels"], cfg["ffn"], cfg["vocab"], cfg["seq_len"]
    shapes = {"wte.weight": (V, C), "wpe.weight": (T, C),
              "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(cfg["layers"]):
        h = f"h.{l}."
        shapes.update({
            h + "ln_1.weight": (C,), h + "ln_1.bias": (C,),
            h + "attn.qkv.weight": (3 * C, C), h + "attn.qkv.bias": (3 * C,),
            h + "attn.proj.weight": (C, C), h + "attn.proj.bias": (C,),
            h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
            h + "mlp.fc.weight": (F, C), h + "mlp.fc.bias": (F,),
            h + "mlp.proj.weight": (C, F), h + "mlp.proj.bias": (C,),
        })
    return shapes


def check_contents(path, cfg, tensors):
    """Every parameter and gradient present with its shape, nothing else, the batch in range."""
    shapes = expected_parameters(cfg)
    wanted = {"tokens": (cfg["batch"], cfg["seq_len"]), "targets": (cfg["batch"], cfg["seq_len"]),
              "loss": (1,)}
    for name, shape in shapes.items():
        wanted["param/" + name] = shape
        wanted["grad/" + name] = shape
    missing = sorted(set(wanted) - set(tensors))
    extra = sorted(set(tensors) - set(wanted))
    if missing or extra:
        raise ReferenceError(f"{path}: tensors missing {missing}, unexpected {extra}")
    for name, shape in wanted.items():
        if tensors[name].shape != shape:
            raise ReferenceError(f"{path}: tensor '{name}' has shape {list(tensors[name].shape)}, "
                                 f"expected {list(shape)}")
    for name in ("tokens", "targets"):
        ids = tensors[name]
        if ids.min() < 0 or ids.max() >= cfg["vocab"]:
            raise ReferenceError(f"{path}: {name} outside [0, {cfg['vocab']}): "
                                 f"{ids.min()}..{ids.max()}")
    return list(shapes)


def gpt2_loss(torch, p, tokens, targets, cfg):
    """GPT-2's mean loss from the parameters p (name -> float64 tensor), op for op as tessel."""
    F = torch.nn.functional
    B, T = tokens.shape
    C, NH = cfg["channels"], cfg["heads"]
    HS = C // NH
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    def layernorm(x, name):
        return F.layer_norm(x, (C,), p[name + ".weight"], p[name + ".bias"], eps=LAYERNORM_EPS)

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p[name + ".bias"])

    def attention(qkv):
        q, k, v = qkv.split(C, dim=-1)
        q, k, v = (a.view(B, T, NH, HS).transpose(1, 2) for a in (q, k, v))  # (B, NH, T, HS)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        return (att @ v).transpose(1, 2).reshape(B, T, C)

    x = p["wte.weight"][tokens] + p["wpe.weight"][:T]
    for l in range(cfg["layers"]):
        h = f"h.{l}."
        x = x + linear(attention(linear(layernorm(x, h + "ln_1"), h + "attn.qkv")),
                       h + "attn.proj")
        x = x + linear(F.gelu(linear(layernorm(x, h + "ln_2"), h + "mlp.fc"), approximate="tanh"),
                       h + "mlp.proj")
    logits = layernorm(x, "ln_f") @ p["wte.weight"].T  # the tied head
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def compare(path):
    """Recomputes the file's loss and gradients; prints the table; returns the failures."""
    np, torch = import_torch()
    metadata, tensors = read_safetensors(path, np)
    try:
        cfg = {k: int(metadata[k])
               for k in ("layers", "channels", "heads", "ffn", "seq_len", "vocab", "batch")}
    except (KeyError, ValueError) as e:
        raise ReferenceError(f"{path}: metadata {metadata} lacks a whole-number model field ({e})")
    names = check_contents(path, cfg, tensors)

    p = {n: torch.tensor(tensors["param/" + n], dtype=torch.float64, requires_grad=True)
         for n in names}
    tokens = torch.tensor(tensors["tokens"], dtype=torch.long)
    targets = torch.tensor(tensors["targets"], dtype=torch.long)
    loss = gpt2_loss(torch, p, tokens, targets, cfg)
    loss.backward()

    rows = []  # (name, ||torch||, relative error)
    loss_ref = loss.item()
    loss_tessel = float(tensors["loss"][0])
    rows.append(("loss", abs(loss_ref), abs(loss_tessel - loss_ref) / abs(loss_ref)))
    for n in names:
        ref = p[n].grad.numpy()
        norm = float(np.linalg.norm(ref))
        diff = float(np.linalg.norm(tensors["grad/" + n].astype(np.float64) - ref))
        rows.append((n, norm, diff / norm if norm > 0 else diff))

    print(f"tessel CPU GPT vs PyTorch {torch.__version__} (float64): L={cfg['layers']} "
          f"C={cfg['channels']} NH={cfg['heads']} F={cfg['ffn']} T={cfg['seq_len']} "
          f"V={cfg['vocab']} B={cfg['batch']}; loss {loss_tessel:.9f} vs {loss_ref:.9f}")
    print(f"{'tensor':<24} {'norm (torch)':>13} {'relative error':>15}")
    failures = []
    for name, norm, rel in rows:
        tolerance = LOSS_TOLERANCE if name == "loss" else GRADIENT_TOLERANCE
        # not (rel <= tolerance): a NaN fails too.
        over = not rel <= tolerance
        mark = f"  OVER {tolerance:.0e}" if over else ""
        print(f"{name:<24} {norm:13.6e} {rel:15.3e}{mark}")
        if over:
            failures.append((rel / tolerance if rel == rel else math.inf, name, rel, tolerance))
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", nargs="?", help="a file gpt-reference-dump wrote")
    source.add_argument("--program", help="gpt-reference-dump: run it, then compare its file")
    args = parser.parse_args()
    try:
        import_torch()  # before running anything: a missing PyTorch is the first thing to say
        if args.program is None:
            failures = compare(args.file)
        else:
            with tempfile.TemporaryDirectory(prefix="tessel-torch-reference-") as folder:
                path = os.path.join(folder, "gpt_reference.safetensors")
                run = subprocess.run([args.program, path])
                if run.returncode != 0:
                    raise ReferenceError(f"{args.program} exited with status {run.returncode}")
                failures = compare(path)
    except (ReferenceError, OSError, json.JSONDecodeError) as e:
        print(f"torch_gpt2_reference: {e}", file=sys.stderr)
        return 1
    if failures:
        _, name, rel, tolerance = max(failures)
        print(f"torch_gpt2_reference: FAILED: {len(failures)} tensor(s) over tolerance; worst "
              f"'{name}': relative error {rel:.3e} > {tolerance:.0e}", file=sys.stderr)
        return 1
    print("torch_gpt2_reference: the loss and every gradient match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
