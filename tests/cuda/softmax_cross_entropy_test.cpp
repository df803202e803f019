// Cases for the fused softmax + cross-entropy + logits gradient: GPT-2's odd vocabulary (rows
// that start off a 16-byte boundary), tiny and aligned vocabularies, ignored targets, in place,
// and the loss alone.
#include "kernels/cpu/softmax_cross_entropy.h"

#include "kernels/cuda/softmax_cross_entropy.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda::testing {
namespace {

struct CrossEntropyShape {
  int B, T, V;
};

enum class Mode { kSeparate, kInPlace, kLossOnly, kIgnoreMinusOne };

const char* variant_name(Mode mode) {
  switch (mode) {
    case Mode::kSeparate:
      return "";
    case Mode::kInPlace:
      return "in_place";
    case Mode::kLossOnly:
      return "loss_only";
    case Mode::kIgnoreMinusOne:
      return "ignore_minus_one";
  }
  return "";
}

OpCase make_case(CrossEntropyShape s, Mode mode) {
  return {
      "softmax_cross_entropy",
      {{"B", s.B}, {"T", s.T}, {"V", s.V}},
      variant_name(mode),
      "bf16 logits, dlogits; int targets; fp32 losses",
      [s, mode](Rng& rng, Context& ctx) {
        const int64_t rows = int64_t(s.B) * s.T;
        const auto logits = random_values(rng, rows * s.V, -4, 4, true);
        auto targets = cpu::testing::random_ints(rng, rows, s.V);
        const auto ignore =
            mode == Mode::kIgnoreMinusOne ? IgnoreTarget::kMinusOne : IgnoreTarget::kNone;
        if (ignore == IgnoreTarget::kMinusOne) {
          for (int64_t i = 0; i < rows; i += 3) targets[size_t(i)] = -1;
        }
        const float dloss = 1.0f / float(rows);
        std::vector<float> losses(static_cast<size_t>(rows)), dlogits(logits.size());
        cpu::softmax_cross_entropy(losses.data(), dlogits.data(), logits.data(), targets.data(),
                                   dloss, s.B, s.T, s.V, ignore);
        Bf16Buffer d_logits(logits), d_dlogits(rows * s.V);
        DeviceBuffer<int> d_targets(targets);
        DeviceBuffer<float> d_losses(rows);
        d_losses.poison();
        d_dlogits.poison();
        bf16* out = mode == Mode::kInPlace    ? d_logits.bf16_data()
                    : mode == Mode::kLossOnly ? nullptr
                                              : d_dlogits.bf16_data();
        softmax_cross_entropy(d_losses.get(), out, d_logits.bf16_data(), d_targets.get(), dloss,
                              s.B, s.T, s.V, ignore, ctx);
        std::vector<Comparison> result = {
            compare("losses", d_losses.download(), losses, kFp32Tolerance)};
        if (mode == Mode::kInPlace) {
          result.push_back(compare("dlogits", d_logits.download_floats(), dlogits, kBf16Tolerance));
        } else if (mode != Mode::kLossOnly) {
          result.push_back(
              compare("dlogits", d_dlogits.download_floats(), dlogits, kBf16Tolerance));
        }
        return result;
      }};
}

std::vector<OpCase> cross_entropy_cases() {
  std::vector<OpCase> cases;
  for (const CrossEntropyShape s : {CrossEntropyShape{2, 37, 50257}, CrossEntropyShape{1, 5, 7},
                                    CrossEntropyShape{2, 8, 1024}}) {
    cases.push_back(make_case(s, Mode::kSeparate));
  }
  for (const Mode mode : {Mode::kInPlace, Mode::kLossOnly, Mode::kIgnoreMinusOne}) {
    cases.push_back(make_case({2, 9, 50257}, mode));
  }
  return cases;
}

const bool registered = register_op_cases(cross_entropy_cases());

}  // namespace
}  // namespace tessel::kernels::cuda::testing
