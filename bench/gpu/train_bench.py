#!/usr/bin/env python3
"""The training benchmark for one GPU call: tessel-stage's CUDA backend against PyTorch.

Runs, in this order, each under its own timeout and all within one budget (--budget-s, 270 s):
  tessel-gpt2          GPT-2 124M, one stage: tessel-stage --device cuda, bf16
  torch-eager          the same model, batch and steps in PyTorch eager (torch_gpt_train.py)
  tessel-1.3b          a GPT-3 1.3B-shaped stage: 4 of its layers (hidden 2048, 16 heads, ffn
                       8192, seq 2048) with the embedding and the head, one stage
  pipeline-overlap     GPT-2 124M as a 2-stage 1F1B pipeline: two tessel-stage processes on the
                       one GPU talking over 127.0.0.1, overlap on
  pipeline-no-overlap  the same with --no-overlap
  small-loss           a small model (2 layers, hidden 128, seq 64, byte vocabulary) trained
                       30 steps from one job file with --device cuda and with --device cpu:
                       both loss curves and their largest relative difference
  torch-compile        the GPT-2 124M of torch-eager under torch.compile (mode "default")
  torch-1.3b-eager     PyTorch eager on the 1.3B-shaped stage, for context (last: only when
                       budget is left)
torch.compile's compilation is the slowest and least predictable part, so it runs after every
tessel measurement and gets what is left of the budget (at most its own timeout).

The vocabulary is 50304, GPT-2's 50257 padded to a multiple of 128 as nanoGPT and llm.c do:
the LM head's GEMMs (V is their N or K) then tile evenly on the tensor cores with no ragged
last tile, and both implementations train the same padded shape. The data are tessel's
synthetic corpus (byte tokens) for tessel and uniformly random ids for PyTorch: the work of a
step does not depend on the token values.

Throughput: tokens per step / the median step time over the steps after the warm-up ones (the
first SKIP of --plan: CUDA context, allocator, autotuning, compilation); for a pipeline a
step's time is its slowest rank's. tessel's rows say too the rate the wall clock gives between
the arrivals of its step lines, a check of the step_s it reports. MFU: bench/gpu/gpt_flops.py,
one formula for every row (6 N + 12 L h T per token), against the measured bf16 GEMM peak
(--peak-tflops) and the 989 TFLOP/s datasheet peak.

Writes to --out (default $OUT, else build-gpu/out) three files: train_benchmark.md (the table),
train_results.json (every number) and train_logs.tar.gz (every job file, stdout and stderr).
Exits 1 when a stage failed or timed out (the table still lists what ran).

tessel-stage: --tessel-stage, else $TESSEL_STAGE, else build/noderuntime/stage/tessel-stage.
--smoke: tiny shapes on the CPU (--device cpu, fp32), for testing this script without a GPU; the
PyTorch stages run only when `torch` is importable.
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the tree (it would travel to the GPU machine)
sys.path.insert(0, HERE)
import gpt_flops  # noqa: E402


@dataclass
class Shape:
    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    seq_len: int
    vocab: int

    def flops_per_token(self):
        return gpt_flops.flops_per_token(self.layers, self.hidden, self.ffn, self.seq_len, self.vocab)

    def text(self):
        return f"L{self.layers} h{self.hidden} a{self.heads} f{self.ffn} T{self.seq_len} V{self.vocab}"


@dataclass
class Batch:
    micro_batch: int  # B
    micro_batches: int  # m per step (one replica)
    steps: int
    skip: int  # first steps left out of the medians

    @property
    def global_batch(self):
        return self.micro_batch * self.micro_batches


# The full benchmark (an H200) and the smoke run (this machine's CPUs).
GPU_PLAN = {
    "gpt2": (Shape("GPT-2 124M", 12, 768, 12, 3072, 1024, 50304), Batch(16, 2, 15, 3)),
    "gpt3": (Shape("GPT-3 1.3B shape, 4 layers", 4, 2048, 16, 8192, 2048, 50304), Batch(4, 2, 12, 3)),
    "pipeline": (Shape("GPT-2 124M", 12, 768, 12, 3072, 1024, 50304), Batch(8, 8, 10, 3)),
    "small": (Shape("small", 2, 128, 2, 512, 64, 256), Batch(8, 2, 30, 0)),
}
SMOKE_PLAN = {
    "gpt2": (Shape("tiny (smoke)", 2, 64, 2, 256, 32, 256), Batch(2, 2, 6, 3)),
    "gpt3": (Shape("tiny wide (smoke)", 1, 128, 2, 512, 64, 256), Batch(1, 2, 5, 3)),
    "pipeline": (Shape("tiny (smoke)", 2, 64, 2, 256, 32, 256), Batch(2, 4, 5, 3)),
    "small": (Shape("small (smoke)", 2, 64, 2, 256, 32, 256), Batch(4, 2, 8, 0)),
}

# Seconds each stage may take at most (the overall budget may cut them shorter).
STAGE_TIMEOUTS = {
    "tessel-gpt2": 60, "torch-eager": 60, "tessel-1.3b": 60, "pipeline-overlap": 45,
    "pipeline-no-overlap": 45, "small-loss": 60, "torch-compile": 150, "torch-1.3b-eager": 45,
}
STAGES = list(STAGE_TIMEOUTS)  # the order they run in
# The order of the table's rows: each model's tessel rows next to PyTorch's.
DISPLAY_ORDER = ["tessel-gpt2", "torch-eager", "torch-compile", "pipeline-overlap",
                 "pipeline-no-overlap", "tessel-1.3b", "torch-1.3b-eager", "small-loss"]
MIN_STAGE_S = 10  # a stage is skipped when less than this is left of the budget
MIN_WALL_SPAN_S = 0.25  # shorter spans are too close to the reader thread's wake-up latency
KILL_GRACE_S = 5  # after SIGTERM (tessel-stage stops after the current step), then SIGKILL


def log(message):
    print(f"train_bench: {message}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percent(x):
    return f"{100 * x:.1f}%" if x >= 1e-3 else f"{100 * x:.2g}%"


def median(values):
    return statistics.median(values) if values else None


# ---------------------------------------------------------------------------------------------
# Processes under a deadline

@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    out_path: str
    err_path: str
    reader: threading.Thread = None
    arrivals: list = field(default_factory=list)  # (time.monotonic(), stdout line)
    returncode: object = None  # int; "timeout"; "stopped" (after a peer failed)


def start(name, cmd, cwd, env=None):
    """Starts cmd in its own process group; its stderr goes to NAME.err, its stdout to NAME.out
    through a thread that also notes when each line arrived."""
    out_path = os.path.join(cwd, f"{name}.out")
    err_path = os.path.join(cwd, f"{name}.err")
    with open(err_path, "w") as err:
        err.write("$ " + " ".join(cmd) + "\n")
        err.flush()
        popen = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=err,
                                 stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    proc = Proc(name, popen, out_path, err_path)

    def pump():
        with open(out_path, "w") as out:
            for raw in popen.stdout:
                line = raw.decode(errors="replace")
                proc.arrivals.append((time.monotonic(), line))
                out.write(line)
                out.flush()

    proc.reader = threading.Thread(target=pump, daemon=True)
    proc.reader.start()
    return proc


def stop(proc):
    """SIGTERM to the process group (tessel-stage stops after the current step), SIGKILL after
    KILL_GRACE_S."""
    if proc.popen.poll() is not None:
        return
    try:
        os.killpg(proc.popen.pid, signal.SIGTERM)
        proc.popen.wait(KILL_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    if proc.popen.poll() is None:
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.popen.wait()


def wait_all(procs, timeout_s):
    """Waits for every process until timeout_s; when one fails, the others get KILL_GRACE_S more
    (their peer is gone), then are stopped. Sets each returncode."""
    deadline = time.monotonic() + timeout_s
    peer_failed = False
    while True:
        codes = [p.popen.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c not in (None, 0) for c in codes) and not peer_failed:
            peer_failed = True
            deadline = min(deadline, time.monotonic() + KILL_GRACE_S)
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for p in procs:
        if p.popen.poll() is None:
            stop(p)
            p.returncode = "stopped" if peer_failed else "timeout"
        else:
            p.returncode = p.popen.returncode
        p.reader.join(KILL_GRACE_S)


def read_json_lines(path):
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return events


def tail(path, lines=3):
    with open(path, errors="replace") as f:
        text = [l.rstrip() for l in f if l.strip() and not l.startswith("$ ")]
    return " / ".join(text[-lines:])


# ---------------------------------------------------------------------------------------------
# tessel-stage jobs

@dataclass
class StageResult:
    ok: bool
    note: str = ""  # why it failed, or what to know
    tokens_per_s: float = None
    step_ms: float = None
    losses: list = field(default_factory=list)  # by step, from step 1
    bubble: float = None
    parameters: int = None  # rank 0's, from its start event
    extra: dict = field(default_factory=dict)


class Tessel:
    def __init__(self, binary, device_flag):
        self.binary = binary
        self.device_flag = device_flag  # tessel-stage takes --device

    @staticmethod
    def probe(binary):
        """Whether `binary --help` lists --device."""
        try:
            done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            sys.exit(f"train_bench: {binary} --help failed: {e}")
        return "--device" in done.stdout + done.stderr


def job_document(shape, batch, precision, stages, threads, learning_rate=3e-4, seed=1337):
    ports = [free_port() for _ in range(stages)]
    return {
        "format_version": 1,
        "workload": {
            "model": {"name": shape.name, "layers": shape.layers, "hidden": shape.hidden,
                      "ffn_hidden": shape.ffn, "heads": shape.heads, "seq_len": shape.seq_len,
                      "vocab": shape.vocab, "precision": precision,
                      "recompute_activations": False},
            "training": {"micro_batch": batch.micro_batch, "global_batch": batch.global_batch},
        },
        "training": {"steps": batch.steps, "learning_rate": learning_rate, "weight_decay": 0.1,
                     "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "grad_clip": 1.0, "seed": seed,
                     "threads": threads},
        # Enough bytes that a step's sequences do not repeat within the run (it wraps anyway).
        "data": {"kind": "synthetic", "seed": 1,
                 "bytes": max(1 << 20, batch.global_batch * (shape.seq_len + 1) * batch.steps + 1)},
        "schedule": {"kind": "1f1b", "overlap": True},
        "pipeline": {"stages": stages, "replicas": 1},
        "ranks": [{"stage": s, "replica": 0, "host": "127.0.0.1", "port": ports[s]}
                  for s in range(stages)],
        "timeouts": {"connect_s": 60, "io_s": 120},
    }


def run_tessel_job(tessel, folder, job, device, timeout_s, extra_args=()):
    os.makedirs(folder, exist_ok=True)
    job_path = os.path.join(folder, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f, indent=1)
    if device != "cpu" and not tessel.device_flag:
        return None, f"this tessel-stage has no --device flag (cannot ask for {device})"
    ranks = len(job["ranks"])
    device_args = ["--device", device] if tessel.device_flag else []
    procs = [start(f"rank{r}", [tessel.binary, "--job", "job.json", "--rank", str(r)] +
                   device_args + list(extra_args), folder) for r in range(ranks)]
    wait_all(procs, timeout_s)
    return procs, ""


def wall_clock_rate(procs, steps, complete, skip):
    """Tokens/s between the arrivals of the step lines (every rank's): from the end of step
    `skip` (or of the first timed step when there is no warm-up) to the end of the last step.
    A check of the step_s the runtime reports, measured outside it."""
    arrival = {}  # step -> when the last rank's line for it arrived
    for p in procs:
        for when, line in p.arrivals:
            if '"event":"step"' in line.replace(" ", ""):
                try:
                    step = json.loads(line)["step"]
                except (json.JSONDecodeError, KeyError):
                    continue
                arrival[step] = max(arrival.get(step, 0), when)
    timed = [s for s in complete if s in arrival]
    anchor = skip if skip in arrival and skip in steps and len(steps[skip]) == len(procs) else None
    if anchor is None and timed:
        anchor = timed.pop(0)
    if not timed or timed[-1] <= anchor or arrival[timed[-1]] - arrival[anchor] < MIN_WALL_SPAN_S:
        return None
    tokens = sum(steps[s][0]["tokens"] for s in timed)
    return tokens / (arrival[timed[-1]] - arrival[anchor])


def summarize_tessel(procs, skip):
    events = [read_json_lines(p.out_path) for p in procs]
    errors = [e.get("message", "") for ev in events for e in ev if e.get("event") == "error"]
    steps = {}
    for rank_events in events:
        for e in rank_events:
            if e.get("event") == "step":
                steps.setdefault(e["step"], []).append(e)
    result = StageResult(ok=False)
    start_events = [e for e in events[0] if e.get("event") == "start"]
    if start_events:
        result.parameters = start_events[0].get("parameters")
    result.losses = [steps[s][0]["loss"] for s in sorted(steps)]
    complete = [s for s in sorted(steps) if s > skip and len(steps[s]) == len(procs)]
    if complete:
        step_s = [max(e["step_s"] for e in steps[s]) for s in complete]
        tokens = steps[complete[0]][0]["tokens"]
        result.step_ms = median(step_s) * 1e3
        result.tokens_per_s = tokens / median(step_s)  # as torch_gpt_train.py computes it
        result.bubble = median([statistics.mean(e["bubble_fraction"] for e in steps[s])
                                for s in complete])
        result.extra = {"timed_steps": complete, "tokens_per_step": tokens,
                        "step_s": step_s}
    wall = wall_clock_rate(procs, steps, complete, skip)
    if wall is not None:
        result.extra["wall_tokens_per_s"] = wall
    failures = []
    for p in procs:
        if p.returncode == "timeout":
            failures.append(f"{p.name} timed out after {len(steps)} steps")
        elif p.returncode == "stopped":
            failures.append(f"{p.name} stopped after its peer failed")
        elif p.returncode != 0:
            failures.append(f"{p.name} exited {p.returncode}")
    if failures:
        culprit = next((p for p in procs if isinstance(p.returncode, int)
                        and p.returncode != 0), None) or next(p for p in procs
                                                               if p.returncode != 0)
        detail = errors[0] if errors else tail(culprit.err_path)
        result.note = "; ".join(failures) + (f": {detail}" if detail else "")
    elif not complete:
        result.note = f"no step after the first {skip} reported by every rank"
    else:
        result.ok = True
    return result


# ---------------------------------------------------------------------------------------------
# The benchmark

class Bench:
    def __init__(self, args):
        self.args = args
        self.plan = dict(SMOKE_PLAN if args.smoke else GPU_PLAN)
        for key, batch in args.plan.items():
            self.plan[key] = (self.plan[key][0], batch)
        self.device = "cpu" if args.smoke else "cuda"
        self.precision = args.cpu_precision if args.smoke else args.cuda_precision
        self.threads = max(1, min(8, os.cpu_count() or 1))
        self.deadline = time.monotonic() + args.budget_s
        self.rows = []  # the table
        self.stage = ""  # the stage running, which add_row files its rows under
        self.results = {}  # stage -> everything measured
        self.failed = []
        if args.python == sys.executable:
            self.torch_available = importlib.util.find_spec("torch") is not None
        else:
            self.torch_available = self.probe_torch()
        binary = args.tessel_stage
        if args.device_flag == "auto":
            self.tessel = Tessel(binary, Tessel.probe(binary))
        else:
            self.tessel = Tessel(binary, args.device_flag == "yes")

    def probe_torch(self):
        code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
        try:
            return subprocess.run([self.args.python, "-c", code], timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def timeout_for(self, stage):
        """The stage's own timeout, cut to what is left of the budget less the time stopping a
        process can take (SIGTERM, SIGKILL, the output reader)."""
        left = self.deadline - time.monotonic() - 2 * KILL_GRACE_S
        return min(self.args.stage_timeout.get(stage, STAGE_TIMEOUTS[stage]), left)

    def folder(self, stage):
        return os.path.join(self.args.work, stage)

    def add_row(self, impl, shape, tokens_per_s, step_ms, notes, ok=True):
        row = {"stage": self.stage, "impl": impl, "model": shape.name, "shape": shape.text(),
               "tokens_per_s": tokens_per_s, "step_ms": step_ms, "notes": notes, "ok": ok}
        if tokens_per_s is not None:
            row["mfu"] = tokens_per_s * shape.flops_per_token() / (self.args.peak_tflops * 1e12)
            row["mfu_datasheet"] = (tokens_per_s * shape.flops_per_token() /
                                    (gpt_flops.DATASHEET_PEAK_TFLOPS * 1e12))
        self.rows.append(row)

    def tessel_impl(self, suffix=""):
        return f"tessel ({self.device}, {self.precision}{suffix})"

    @staticmethod
    def wall_note(r):
        wall = r.extra.get("wall_tokens_per_s")
        return [f"{wall:,.0f} tokens/s by the wall clock between step lines"] if wall else []

    def batch_note(self, batch, skip=True):
        text = f"B={batch.micro_batch} m={batch.micro_batches}, {batch.steps} steps"
        if skip:
            text += f", median of steps {batch.skip + 1}-{batch.steps}"
        return text

    # -- stages ---------------------------------------------------------------------------------

    def tessel_single(self, stage, key, impl_suffix=""):
        shape, batch = self.plan[key]
        job = job_document(shape, batch, self.precision, 1, self.threads)
        procs, why = run_tessel_job(self.tessel, self.folder(stage), job, self.device,
                                    self.timeout_for(stage))
        if procs is None:
            return self.fail(stage, self.tessel_impl(impl_suffix), shape, why)
        r = summarize_tessel(procs, batch.skip)
        self.results[stage] = vars(r) | {"shape": vars(shape), "batch": vars(batch)}
        expected = gpt_flops.counted_parameters(shape.layers, shape.hidden, shape.ffn,
                                                shape.vocab) + shape.seq_len * shape.hidden
        notes = [self.batch_note(batch)]
        if key == "gpt3":
            notes.append(f"FLOPs of its {shape.layers} layers and the head only")
        notes += self.wall_note(r)
        if r.losses:
            notes.append(f"loss {r.losses[0]:.3f} -> {r.losses[-1]:.3f}")
        if r.parameters is not None and r.parameters != expected:
            notes.append(f"WARNING: tessel reports {r.parameters} parameters, the FLOPs count "
                         f"assumes {expected}")
        if not r.ok:
            return self.fail(stage, self.tessel_impl(impl_suffix), shape, r.note, notes)
        self.add_row(self.tessel_impl(impl_suffix), shape, r.tokens_per_s, r.step_ms,
                     "; ".join(notes))

    def pipeline(self, stage, overlap):
        shape, batch = self.plan["pipeline"]
        job = job_document(shape, batch, self.precision, 2, max(1, self.threads // 2))
        extra = [] if overlap else ["--no-overlap"]
        suffix = ", 2 stages 1F1B, overlap " + ("on" if overlap else "off")
        procs, why = run_tessel_job(self.tessel, self.folder(stage), job, self.device,
                                    self.timeout_for(stage), extra)
        if procs is None:
            return self.fail(stage, self.tessel_impl(suffix), shape, why)
        r = summarize_tessel(procs, batch.skip)
        self.results[stage] = vars(r) | {"shape": vars(shape), "batch": vars(batch)}
        notes = [self.batch_note(batch) + "; two processes on one "
                 + ("GPU" if self.device == "cuda" else "CPU")]
        notes += self.wall_note(r)
        if r.bubble is not None:
            notes.append(f"idle fraction {r.bubble:.2f} (mean over ranks)")
        if not r.ok:
            return self.fail(stage, self.tessel_impl(suffix), shape, r.note, notes)
        self.add_row(self.tessel_impl(suffix), shape, r.tokens_per_s, r.step_ms, "; ".join(notes))

    def small_loss(self, stage):
        """One small job file run with --device cuda and with --device cpu (the CPU backend
        computes in fp32 whatever the precision), loss by step. Smoke: the CPU with 1 thread and
        with several."""
        shape, batch = self.plan["small"]
        if self.args.smoke:
            runs = [("cpu 1 thread", "cpu", 1), (f"cpu {self.threads} threads", "cpu", self.threads)]
        else:
            runs = [("cuda", "cuda", self.threads), ("cpu", "cpu", self.threads)]
        job = job_document(shape, batch, self.precision, 1, self.threads, learning_rate=1e-3)
        curves = {}
        stage_deadline = time.monotonic() + self.timeout_for(stage)
        for label, device, threads in runs:
            job["training"]["threads"] = threads
            timeout = (stage_deadline - time.monotonic()) / (2 if not curves else 1)
            procs, why = run_tessel_job(self.tessel, os.path.join(self.folder(stage), device
                                        + ("" if not self.args.smoke else f"-{threads}t")),
                                        job, device, timeout)
            r = summarize_tessel(procs, 0) if procs else StageResult(False, why)
            curves[label] = r
            if not r.ok or len(r.losses) != batch.steps:
                why = r.note or f"{len(r.losses)} of {batch.steps} steps reported"
                self.results[stage] = {"curves": {k: v.losses for k, v in curves.items()}}
                return self.fail(stage, f"tessel small-model loss, {label}", shape, why)
        (a_label, a), (b_label, b) = curves.items()  # b is the reference (the CPU)
        rel = [abs(x - y) / abs(y) for x, y in zip(a.losses, b.losses)]
        worst = max(range(len(rel)), key=rel.__getitem__)
        self.results[stage] = {
            "shape": vars(shape), "batch": vars(batch),
            "labels": [a_label, b_label],
            "curves": {a_label: a.losses, b_label: b.losses},
            "relative_difference": rel, "max_relative_difference": rel[worst],
            "worst_step": worst + 1,
        }
        for label, r in curves.items():
            note = (f"{self.batch_note(batch, skip=False)}, lr 1e-3; loss {r.losses[0]:.4f} -> "
                    f"{r.losses[-1]:.4f}")
            if label == a_label:
                note += (f"; largest relative loss difference from {b_label} {rel[worst]:.2e} "
                         f"(step {worst + 1})")
            self.add_row(f"tessel ({label}, small-model loss check)", shape, r.tokens_per_s,
                         r.step_ms, note)

    def torch_run(self, stage, mode, key):
        shape, batch = self.plan[key]
        impl = f"pytorch-{mode} (bf16 autocast)"
        if not self.torch_available:
            return self.fail(stage, impl, shape, f"PyTorch is not installed for {self.args.python}",
                             counts=not self.args.smoke)
        folder = self.folder(stage)
        os.makedirs(folder, exist_ok=True)
        cmd = [self.args.python, os.path.join(HERE, "torch_gpt_train.py"), "--mode", mode,
               "--layers", str(shape.layers), "--channels", str(shape.hidden),
               "--heads", str(shape.heads), "--ffn", str(shape.ffn),
               "--seq-len", str(shape.seq_len), "--vocab", str(shape.vocab),
               "--batch", str(batch.micro_batch), "--accum", str(batch.micro_batches),
               "--steps", str(batch.steps), "--warmup", str(batch.skip),
               "--peak-tflops", str(self.args.peak_tflops), "--label", shape.name]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        proc = start("torch", cmd, folder, env)
        wait_all([proc], self.timeout_for(stage))
        events = read_json_lines(proc.out_path)
        summary = next((e for e in reversed(events) if "impl" in e and "event" not in e), None)
        self.results[stage] = {"summary": summary,
                               "steps": [e for e in events if e.get("event") == "step"]}
        if proc.returncode != 0 or summary is None:
            why = "timed out" if proc.returncode == "timeout" else f"exited {proc.returncode}"
            return self.fail(stage, impl, shape, f"{why}: {tail(proc.err_path)}")
        notes = (f"{self.batch_note(batch)}; loss {summary['loss_first']:.3f} -> "
                 f"{summary['loss_last']:.3f} (random ids); warm-up {summary['warmup_s']:.1f} s; "
                 f"{summary['max_memory_gib']:.1f} GiB peak; torch {summary['torch']}")
        self.add_row(impl, shape, summary["tokens_per_s"], summary["step_ms"], notes)

    def fail(self, stage, impl, shape, why, notes=(), counts=True):
        log(f"{stage}: {why}")
        if counts:
            self.failed.append(stage)
        self.add_row(impl, shape, None, None, "NOT MEASURED: " + "; ".join([why, *notes]),
                     ok=False)

    def run(self):
        stages = {
            "tessel-gpt2": lambda s: self.tessel_single(s, "gpt2"),
            "torch-eager": lambda s: self.torch_run(s, "eager", "gpt2"),
            "tessel-1.3b": lambda s: self.tessel_single(s, "gpt3"),
            "pipeline-overlap": lambda s: self.pipeline(s, True),
            "pipeline-no-overlap": lambda s: self.pipeline(s, False),
            "small-loss": self.small_loss,
            "torch-compile": lambda s: self.torch_run(s, "compile", "gpt2"),
            "torch-1.3b-eager": lambda s: self.torch_run(s, "eager", "gpt3"),
        }
        for stage in STAGES:
            if stage not in self.args.stages:
                continue
            left = self.deadline - time.monotonic() - 2 * KILL_GRACE_S
            if left < MIN_STAGE_S:
                log(f"{stage}: skipped, {max(0.0, left):.0f} s of the budget left")
                self.results[stage] = {"skipped": f"{max(0.0, left):.0f} s of the budget left"}
                if stage != "torch-1.3b-eager":
                    self.failed.append(stage)
                continue
            began = time.monotonic()
            log(f"{stage}: running (at most {self.timeout_for(stage):.0f} s)")
            self.stage = stage
            stages[stage](stage)
            log(f"{stage}: {time.monotonic() - began:.1f} s")

    # -- output ---------------------------------------------------------------------------------

    def markdown(self, gpu):
        a = self.args
        lines = [f"GPU: {gpu}" if gpu else f"Device: {self.device} (no GPU seen by nvidia-smi)"]
        built = commit(a.tessel_stage)
        at = f" built at commit {built}" if built else ""
        lines.append(f"tessel-stage: {a.tessel_stage}{at} (--device {self.device}, workload "
                     f"precision {self.precision}); {a.python}; "
                     f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        lines.append(f"MFU = tokens/s x (6 N + 12 L h T) / peak (bench/gpu/gpt_flops.py: N every "
                     f"parameter but the position table, the tied head counted once); peaks: the "
                     f"measured bf16 GEMM {a.peak_tflops:g} TFLOP/s and the datasheet's "
                     f"{gpt_flops.DATASHEET_PEAK_TFLOPS:g} TFLOP/s.")
        lines.append("")
        lines.append(f"| impl | model | tokens/s | MFU ({a.peak_tflops:g}) | "
                     f"MFU ({gpt_flops.DATASHEET_PEAK_TFLOPS:g}) | step ms | notes |")
        lines.append("|---|---|---|---|---|---|---|")
        ordered = sorted(self.rows, key=lambda r: DISPLAY_ORDER.index(r["stage"]))
        for r in ordered:
            measured = r["tokens_per_s"] is not None
            cells = [r["impl"], f"{r['model']} ({r['shape']})",
                     f"{r['tokens_per_s']:,.0f}" if measured else "-",
                     percent(r["mfu"]) if measured else "-",
                     percent(r["mfu_datasheet"]) if measured else "-",
                     f"{r['step_ms']:.1f}" if measured else "-",
                     r["notes"].replace("|", "/")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.extend(self.comparisons())
        small = self.results.get("small-loss", {})
        if "relative_difference" in small:
            a_label, b_label = small["labels"]
            lines.append("")
            lines.append(f"Small-model loss curves ({self.plan['small'][0].text()}): the largest "
                         f"relative difference {a_label} vs {b_label} is "
                         f"{small['max_relative_difference']:.2e} (step {small['worst_step']}).")
            lines.append("")
            lines.append(f"| step | {a_label} | {b_label} | relative difference |")
            lines.append("|---|---|---|---|")
            curve_a, curve_b = small["curves"][a_label], small["curves"][b_label]
            for i, (x, y, d) in enumerate(zip(curve_a, curve_b, small["relative_difference"])):
                lines.append(f"| {i + 1} | {x:.5f} | {y:.5f} | {d:.2e} |")
        skipped = [s for s in STAGES if "skipped" in self.results.get(s, {})]
        if skipped:
            lines.append("")
            lines.append("Not run for lack of budget: " + ", ".join(skipped) + ".")
        return "\n".join(lines) + "\n"


    def comparisons(self):
        """The issue's targets, from the rows measured: tessel >= PyTorch eager, within 10% of
        torch.compile, MFU >= 45% (measured peak) at the 1.3B shapes; overlap on vs off."""
        by_stage = {r["stage"]: r for r in self.rows if r["tokens_per_s"] is not None}
        lines = []

        def ratio(a, b, what, target):
            if a in by_stage and b in by_stage:
                x = by_stage[a]["tokens_per_s"] / by_stage[b]["tokens_per_s"]
                lines.append(f"- {what}: {x:.3f}x ({target})")

        ratio("tessel-gpt2", "torch-eager", "tessel / PyTorch eager, GPT-2 124M tokens/s",
              "target >= 1")
        ratio("tessel-gpt2", "torch-compile", "tessel / torch.compile, GPT-2 124M tokens/s",
              "target >= 0.9")
        if "tessel-1.3b" in by_stage:
            lines.append(f"- tessel MFU at the 1.3B shapes: {percent(by_stage['tessel-1.3b']['mfu'])} "
                         f"of {self.args.peak_tflops:g} TFLOP/s (target >= 45%, moonshot 50%)")
        ratio("pipeline-overlap", "pipeline-no-overlap",
              "2-stage pipeline, overlap on / off tokens/s", "above 1: the overlap helps")
        return [""] + lines if lines else []


def commit(tessel_stage=""):
    """The commit the executable was built at (the bundle's record beside it), else this tree's."""
    recorded = os.path.join(os.path.dirname(os.path.dirname(tessel_stage)), "commit") if tessel_stage else ""
    if recorded and os.path.isfile(recorded):
        with open(recorded) as f:
            return f.read().strip()[:7]
    try:
        done = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def gpu_name():
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return ""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--tessel-stage", default=os.environ.get("TESSEL_STAGE") or
                   os.path.join(ROOT, "build", "noderuntime", "stage", "tessel-stage"))
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "build-gpu", "out"))
    p.add_argument("--work", default="", help="folder for job files and logs (emptied first); "
                   "default build-gpu/train-bench[-smoke]")
    p.add_argument("--python", default=sys.executable, help="the Python that has PyTorch")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    p.add_argument("--budget-s", type=float, default=270,
                   help="all stages together (default 270: a 300 s call with time to spare)")
    p.add_argument("--peak-tflops", type=float, default=gpt_flops.MEASURED_PEAK_TFLOPS)
    p.add_argument("--device-flag", choices=["auto", "yes", "no"], default="auto",
                   help="pass --device to tessel-stage: auto (when its --help lists it), yes, no "
                        "(then only the CPU runs work)")
    p.add_argument("--cuda-precision", default="bf16", help="the workload precision of the GPU runs")
    p.add_argument("--cpu-precision", default="fp32",
                   help="the workload precision of the --smoke runs (fp32: any tessel-stage takes it)")
    p.add_argument("--only", default="", help="comma-separated stages: " + ",".join(STAGES))
    p.add_argument("--skip", default="", help="comma-separated stages to leave out")
    p.add_argument("--stage-timeout", action="append", default=[], metavar="STAGE=S",
                   help="override one stage's timeout (repeatable)")
    p.add_argument("--plan", action="append", default=[], metavar="KEY=B,m,STEPS,SKIP",
                   help="override the batch of one model (" + ", ".join(GPU_PLAN) + "): micro-"
                        "batch B, micro-batches per step m, steps, warm-up steps left out "
                        "(repeatable); e.g. --plan gpt2=8,4,15,3")
    a = p.parse_args()

    def names(text, flag):
        chosen = [s for s in text.split(",") if s]
        unknown = [s for s in chosen if s not in STAGES]
        if unknown:
            p.error(f"{flag}: unknown stage {', '.join(unknown)} (stages: {', '.join(STAGES)})")
        return chosen

    only = names(a.only, "--only") or STAGES
    skip = names(a.skip, "--skip")
    a.stages = [s for s in only if s not in skip]
    timeouts = {}
    for item in a.stage_timeout:
        stage, _, seconds = item.partition("=")
        if stage not in STAGES:
            p.error(f"--stage-timeout {item}: unknown stage {stage!r}")
        try:
            timeouts[stage] = float(seconds)
        except ValueError:
            p.error(f"--stage-timeout {item}: expected STAGE=SECONDS")
        if timeouts[stage] <= 0:
            p.error(f"--stage-timeout {item}: must be > 0")
    a.stage_timeout = timeouts
    plans = {}
    for item in a.plan:
        key, _, numbers = item.partition("=")
        if key not in GPU_PLAN:
            p.error(f"--plan {item}: unknown model {key!r} (models: {', '.join(GPU_PLAN)})")
        try:
            b, m, steps, skip = (int(x) for x in numbers.split(","))
        except ValueError:
            p.error(f"--plan {item}: expected {key}=B,m,STEPS,SKIP (four integers)")
        if min(b, m, steps) < 1 or not 0 <= skip < steps:
            p.error(f"--plan {item}: B, m and STEPS must be >= 1 and 0 <= SKIP < STEPS")
        plans[key] = Batch(b, m, steps, skip)
    a.plan = plans
    if a.budget_s <= 0 or a.peak_tflops <= 0:
        p.error("--budget-s and --peak-tflops must be > 0")
    if not (os.path.isfile(a.tessel_stage) and os.access(a.tessel_stage, os.X_OK)):
        p.error(f"--tessel-stage / TESSEL_STAGE: {a.tessel_stage} is not an executable file")
    a.tessel_stage = os.path.abspath(a.tessel_stage)
    a.work = os.path.abspath(a.work or os.path.join(
        ROOT, "build-gpu", "train-bench-smoke" if a.smoke else "train-bench"))
    a.out = os.path.abspath(a.out)
    return a


def main():
    args = parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    os.makedirs(args.out, exist_ok=True)
    bench = Bench(args)
    if not bench.tessel.device_flag:
        log(f"{args.tessel_stage} has no --device flag" +
            ("; the CPU runs leave it out" if args.smoke else "; the tessel stages cannot run"))
    gpu = gpu_name()
    try:
        bench.run()
    finally:
        table = bench.markdown(gpu)
        with open(os.path.join(args.out, "train_benchmark.md"), "w") as f:
            f.write(table)
        with open(os.path.join(args.out, "train_results.json"), "w") as f:
            json.dump({"gpu": gpu, "device": bench.device, "precision": bench.precision,
                       "peak_tflops": args.peak_tflops, "rows": bench.rows,
                       "stages": bench.results, "failed": bench.failed}, f, indent=1)
        with tarfile.open(os.path.join(args.out, "train_logs.tar.gz"), "w:gz") as tar:
            tar.add(args.work, arcname="train-bench")
        print(table, flush=True)
    if bench.failed:
        log("failed or not run: " + ", ".join(bench.failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
