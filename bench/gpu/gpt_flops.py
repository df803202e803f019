"""The one FLOPs count and MFU used for every row of the training benchmark (tessel and PyTorch).

Model FLOPs per trained token, the formula of PaLM (Chowdhery et al. 2022, appendix B) as nanoGPT
writes it (model.py, estimate_mfu):

    6 N + 12 L h T

  N  every parameter except the position table: the transformer blocks (matrices, biases,
     layernorms), the final layernorm and the token table. The token table is tied to the LM head,
     so 6 V h of the 6 N is the head's matmul (forward 2 V h, backward 4 V h per token); the
     embedding lookup itself costs nothing.
  12 L h T  the attention scores and the weighted sum, forward and backward, counted over the
     full T x T matrix (not halved for the causal mask), as PaLM, nanoGPT and Megatron count it.

A stage that holds only some layers plus the head (the 1.3B-shaped stage) is counted the same way
with L its layers: its blocks and its head, nothing for layers it does not hold. No recomputation
is counted (model FLOPs, not hardware FLOPs).

MFU = tokens/s x flops_per_token / peak. The benchmark reports it against two peaks: the bf16
GEMM it measured on this H200 (8192^3, 784.3 TFLOP/s, docs/benchmarks.md) and the datasheet's
dense bf16 peak (989 TFLOP/s, H100/H200 SXM).
"""

MEASURED_PEAK_TFLOPS = 784.3  # bf16 GEMM 8192x8192x8192 on the H200 (docs/benchmarks.md)
DATASHEET_PEAK_TFLOPS = 989.0  # H200 SXM dense bf16, no sparsity


def parameters_per_layer(hidden, ffn):
    """One block, as GptConfig::parameters_per_layer: ln_1, ln_2 (2h each), qkv (3h x h + 3h),
    attention projection (h x h + h), MLP fc (f x h + f), MLP projection (h x f + h)."""
    h, f = hidden, ffn
    return 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (f * h + f) + (h * f + h)


def counted_parameters(layers, hidden, ffn, vocab):
    """N above: the blocks, ln_f (2h) and the tied token table / LM head (V h); no position table."""
    return layers * parameters_per_layer(hidden, ffn) + 2 * hidden + vocab * hidden


def flops_per_token(layers, hidden, ffn, seq_len, vocab):
    return 6 * counted_parameters(layers, hidden, ffn, vocab) + 12 * layers * hidden * seq_len


def mfu(tokens_per_s, layers, hidden, ffn, seq_len, vocab, peak_tflops):
    return tokens_per_s * flops_per_token(layers, hidden, ffn, seq_len, vocab) / (peak_tflops * 1e12)
