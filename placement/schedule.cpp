#include "placement/schedule.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "placement/limits.h"
#include "placement/schedule_walk.h"

namespace tessel::placement {

const char* to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe:
      return "gpipe";
    case ScheduleKind::OneFOneB:
      return "1f1b";
    case ScheduleKind::Interleaved:
      return "interleaved";
  }
  return "unknown";
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}) {
    if (name == to_string(kind)) return kind;
  }
  throw std::invalid_argument("unknown schedule '" + name +
                              "' (expected gpipe, 1f1b or interleaved)");
}

const char* to_string(Op op) {
  switch (op) {
    case Op::Forward:
      return "Forward";
    case Op::Backward:
      return "Backward";
    case Op::SendActivation:
      return "SendActivation";
    case Op::RecvActivation:
      return "RecvActivation";
    case Op::SendGradient:
      return "SendGradient";
    case Op::RecvGradient:
      return "RecvGradient";
    case Op::AllReduce:
      return "AllReduce";
    case Op::OptimizerStep:
      return "OptimizerStep";
  }
  return "unknown";
}

namespace {

bool is_send(Op op) { return op == Op::SendActivation || op == Op::SendGradient; }
bool is_recv(Op op) { return op == Op::RecvActivation || op == Op::RecvGradient; }

int group_size(const ScheduleSpec& spec) {
  return spec.microbatch_group > 0 ? spec.microbatch_group : spec.stages;
}

std::string spec_name(const ScheduleSpec& spec) {
  return std::string(to_string(spec.kind)) + " schedule (p=" + std::to_string(spec.stages) +
         ", m=" + std::to_string(spec.micro_batches) + ", v=" + std::to_string(spec.chunks) + ")";
}

}  // namespace

std::string to_string(const Instruction& instruction) {
  std::string text = to_string(instruction.op);
  if (instruction.micro_batch >= 0) {
    text +=
        " mb" + std::to_string(instruction.micro_batch) + " c" + std::to_string(instruction.chunk);
  }
  if (is_send(instruction.op)) text += " to " + std::to_string(instruction.peer);
  if (is_recv(instruction.op)) text += " from " + std::to_string(instruction.peer);
  return text;
}

void validate_schedule_spec(const ScheduleSpec& spec) {
  const std::string name = spec_name(spec);
  auto fail = [&](const std::string& why) { throw std::invalid_argument(name + ": " + why); };
  if (spec.stages < 1) fail("needs at least 1 stage");
  if (spec.micro_batches < 1) fail("needs at least 1 micro-batch");
  if (spec.chunks < 1) fail("chunks (v) must be >= 1, got " + std::to_string(spec.chunks));
  // Bounds before any arithmetic on them: the lists and the replay take memory in proportion
  // to p x m x v.
  if (spec.stages > kMaxStages) {
    fail("stages (p) must be at most " + std::to_string(kMaxStages) + ", got " +
         std::to_string(spec.stages));
  }
  if (spec.micro_batches > kMaxMicroBatches) {
    fail("micro-batches (m) must be at most " + std::to_string(kMaxMicroBatches) + ", got " +
         std::to_string(spec.micro_batches));
  }
  if (spec.chunks > kMaxChunks) {
    fail("chunks (v) must be at most " + std::to_string(kMaxChunks) + ", got " +
         std::to_string(spec.chunks));
  }
  const int64_t cells = int64_t{spec.stages} * spec.micro_batches * spec.chunks;  // < 2^51
  if (cells > kMaxScheduleCells) {
    fail("p x m x v = " + std::to_string(cells) + " (rank, micro-batch, chunk) cells, more than " +
         "the limit of " + std::to_string(kMaxScheduleCells) + " (about " +
         format_bytes(double(kMaxScheduleCells * kScheduleBytesPerCell)) + " of lists)");
  }
  if (const std::string shortfall = memory_shortfall(double(cells * kScheduleBytesPerCell));
      !shortfall.empty()) {
    fail("the instruction lists of " + std::to_string(cells) + " cells " + shortfall);
  }
  if (spec.kind != ScheduleKind::Interleaved) {
    if (spec.chunks != 1) fail("chunks (v) must be 1; only the interleaved schedule uses v > 1");
    if (spec.microbatch_group != 0)
      fail("microbatch_group applies to the interleaved schedule only");
    return;
  }
  if (spec.stages < 2) fail("the interleaved schedule needs at least 2 stages");
  if (spec.chunks < 2) fail("the interleaved schedule needs chunks (v) >= 2");
  if (spec.microbatch_group < 0) fail("microbatch_group must be 0 (meaning p) or positive");
  // Megatron's rules: G in [p, m]; a last group smaller than p would wait on itself
  // ("dependency bubbles"), so m mod G must be 0 or at least p. With G = p: m a multiple of p.
  const int g = group_size(spec);
  if (g < spec.stages || g > spec.micro_batches) {
    fail("micro-batch group G=" + std::to_string(g) + " must lie in [p, m]" +
         (spec.microbatch_group == 0 ? " (G defaults to p, so m must be at least p)" : ""));
  }
  const int last_group = spec.micro_batches % g;
  if (last_group != 0 && last_group < spec.stages) {
    fail("m mod G = " + std::to_string(last_group) + " must be 0 or at least p" +
         (spec.microbatch_group == 0 ? " (G defaults to p: m must be a multiple of p)" : ""));
  }
}

int warmup_forwards(const ScheduleSpec& spec, int rank) {
  const int p = spec.stages, m = spec.micro_batches, v = spec.chunks;
  switch (spec.kind) {
    case ScheduleKind::GPipe:
      return m;
    case ScheduleKind::OneFOneB:
      return std::min(p - rank - 1, m);
    case ScheduleKind::Interleaved:
      return std::min((p - rank - 1) * 2 + (v - 1) * group_size(spec), m * v);
  }
  return m;
}

bool is_first_virtual_stage(const ScheduleSpec&, int rank, int chunk) {
  return rank == 0 && chunk == 0;
}

bool is_last_virtual_stage(const ScheduleSpec& spec, int rank, int chunk) {
  return rank == spec.stages - 1 && chunk == spec.chunks - 1;
}

ChunkRef activation_destination(const ScheduleSpec& spec, int rank, int chunk) {
  const int next = chunk * spec.stages + rank + 1;
  return {next % spec.stages, next / spec.stages};
}

ChunkRef gradient_destination(const ScheduleSpec& spec, int rank, int chunk) {
  const int previous = chunk * spec.stages + rank - 1;
  return {(previous + spec.stages) % spec.stages, previous < 0 ? -1 : previous / spec.stages};
}

int activation_hop(const ScheduleSpec&, int rank) { return rank; }

int gradient_hop(const ScheduleSpec& spec, int rank) {
  return (rank + spec.stages - 1) % spec.stages;
}

namespace {

// Megatron's get_schedule_table(): the order of the (micro-batch, chunk) forwards on every
// rank. Groups of G micro-batches run chunk 0, then chunk 1, ...; the last group takes the
// remainder. For v = 1 it is simply micro-batches 0..m-1.
std::vector<std::pair<int, int>> forward_order(const ScheduleSpec& spec) {
  const int m = spec.micro_batches, v = spec.chunks;
  const int g = spec.kind == ScheduleKind::Interleaved ? group_size(spec) : m;
  std::vector<std::pair<int, int>> order;
  order.reserve(static_cast<size_t>(m) * v);
  for (int first = 0; first < m; first += g) {
    const int end = std::min(first + g, m);
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int mb = first; mb < end; ++mb) order.emplace_back(mb, chunk);
    }
  }
  return order;
}

class RankListBuilder {
 public:
  RankListBuilder(const ScheduleSpec& spec, int rank) : spec_(spec), rank_(rank) {}

  void forward(int mb, int chunk) {
    if (!is_first_virtual_stage(spec_, rank_, chunk)) {
      const int from = gradient_destination(spec_, rank_, chunk).rank;
      list_.push_back({Op::RecvActivation, mb, chunk, from});
    }
    list_.push_back({Op::Forward, mb, chunk, -1});
    if (!is_last_virtual_stage(spec_, rank_, chunk)) {
      list_.push_back(
          {Op::SendActivation, mb, chunk, activation_destination(spec_, rank_, chunk).rank});
    }
  }

  void backward(int mb, int chunk) {
    if (!is_last_virtual_stage(spec_, rank_, chunk)) {
      const int from = activation_destination(spec_, rank_, chunk).rank;
      list_.push_back({Op::RecvGradient, mb, chunk, from});
    }
    list_.push_back({Op::Backward, mb, chunk, -1});
    if (!is_first_virtual_stage(spec_, rank_, chunk)) {
      list_.push_back(
          {Op::SendGradient, mb, chunk, gradient_destination(spec_, rank_, chunk).rank});
    }
  }

  std::vector<Instruction> finish() {
    list_.push_back({Op::AllReduce, -1, -1, -1});
    list_.push_back({Op::OptimizerStep, -1, -1, -1});
    return std::move(list_);
  }

 private:
  const ScheduleSpec& spec_;
  int rank_;
  std::vector<Instruction> list_;
};

}  // namespace

std::vector<std::vector<Instruction>> generate_schedule(const ScheduleSpec& spec) {
  validate_schedule_spec(spec);
  const auto order = forward_order(spec);
  const int total = static_cast<int>(order.size());
  std::vector<std::vector<Instruction>> lists;
  for (int rank = 0; rank < spec.stages; ++rank) {
    RankListBuilder builder(spec, rank);
    // Backward k mirrors forward k's chunk (v-1-c): the last chunk's backward comes first.
    auto forward = [&](int k) { builder.forward(order[k].first, order[k].second); };
    auto backward = [&](int k) {
      builder.backward(order[k].first, spec.chunks - 1 - order[k].second);
    };
    // Warm-up forwards, steady state of one forward and one backward, cool-down backwards.
    const int warmup = warmup_forwards(spec, rank);
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k < total - warmup; ++k) {
      forward(warmup + k);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
    lists.push_back(builder.finish());
  }
  return lists;
}

int max_in_flight_activations(const std::vector<Instruction>& rank_list) {
  int in_flight = 0, most = 0;
  for (const Instruction& instruction : rank_list) {
    if (instruction.op == Op::Forward) most = std::max(most, ++in_flight);
    if (instruction.op == Op::Backward) --in_flight;
  }
  return most;
}

namespace {

// What the replay checker does with each instruction of the walk (schedule_walk.h): it records
// which inputs arrived and which computes ran, and reports every violation.
class Replay : public InstructionHandler {
 public:
  Replay(const ScheduleSpec& spec, const std::vector<std::vector<Instruction>>& lists)
      : spec_(spec), lists_(lists), ranks_(lists.size()) {
    const size_t cells = static_cast<size_t>(spec.micro_batches) * spec.chunks;
    for (RankState& state : ranks_) {
      state.forwards.assign(cells, 0);
      state.backwards.assign(cells, 0);
      state.activation_in.assign(cells, false);
      state.gradient_in.assign(cells, false);
    }
  }

  ReplayReport run() {
    if (static_cast<int>(lists_.size()) != spec_.stages) {
      error("expected " + std::to_string(spec_.stages) + " rank lists, got " +
            std::to_string(lists_.size()));
      return std::move(report_);
    }
    for (size_t rank = 0; rank < lists_.size(); ++rank) check_ending(static_cast<int>(rank));
    const WalkOutcome outcome = walk_schedule(lists_, *this);
    report_.stuck = outcome.stuck;
    if (report_.deadlocked()) {
      std::string text = "deadlock:";
      for (const StuckRank& stuck : report_.stuck) {
        text += " rank " + std::to_string(stuck.rank) + " waits at #" +
                std::to_string(stuck.index) + " " + to_string(stuck.instruction) + ";";
      }
      text.pop_back();
      error(text);
    } else {
      for (const InstructionRef& send : outcome.unreceived) {
        error("rank " + std::to_string(send.rank) + "'s " +
              to_string(lists_[send.rank][send.index]) + " is never received");
      }
      check_complete();
    }
    return std::move(report_);
  }

  // False when the instruction names a micro-batch, chunk or peer that cannot be right; the
  // replay then reports it and skips it.
  bool well_formed(const InstructionRef& at, const Instruction& instruction) override {
    if (instruction.op == Op::AllReduce || instruction.op == Op::OptimizerStep) return true;
    if (instruction.micro_batch < 0 || instruction.micro_batch >= spec_.micro_batches ||
        instruction.chunk < 0 || instruction.chunk >= spec_.chunks) {
      error(where(at) + ": micro-batch or chunk out of range");
      return false;
    }
    if (is_send(instruction.op) || is_recv(instruction.op)) {
      const int peer = expected_peer(at.rank, instruction);
      if (peer < 0) {
        error(where(at) + ": this virtual stage has no such message");
        return false;
      }
      if (instruction.peer != peer) {
        error(where(at) + ": the peer must be rank " + std::to_string(peer));
        return false;
      }
    }
    return true;
  }

  void forward(const InstructionRef& at, const Instruction& instruction) override {
    RankState& state = ranks_[at.rank];
    const size_t c = cell(instruction);
    if (!is_first_virtual_stage(spec_, at.rank, instruction.chunk) && !state.activation_in[c]) {
      error(where(at) + ": runs before its RecvActivation");
    }
    if (++state.forwards[c] > 1) error(where(at) + ": second Forward of this micro-batch");
  }

  void backward(const InstructionRef& at, const Instruction& instruction) override {
    RankState& state = ranks_[at.rank];
    const size_t c = cell(instruction);
    if (state.forwards[c] == 0) error(where(at) + ": runs before its Forward");
    if (!is_last_virtual_stage(spec_, at.rank, instruction.chunk) && !state.gradient_in[c]) {
      error(where(at) + ": runs before its RecvGradient");
    }
    if (++state.backwards[c] > 1) error(where(at) + ": second Backward of this micro-batch");
  }

  void send(const InstructionRef& at, const Instruction& instruction) override {
    const RankState& state = ranks_[at.rank];
    const size_t c = cell(instruction);
    const bool activation = instruction.op == Op::SendActivation;
    if (activation ? state.forwards[c] == 0 : state.backwards[c] == 0) {
      error(where(at) + ": sends before the " + (activation ? "Forward" : "Backward") +
            " that produces it");
    }
  }

  void receive(const InstructionRef& at, const Instruction& instruction,
               const InstructionRef& matched_send) override {
    const Instruction& sent = lists_[matched_send.rank][matched_send.index];
    const ChunkRef to = sent.op == Op::SendActivation
                            ? activation_destination(spec_, matched_send.rank, sent.chunk)
                            : gradient_destination(spec_, matched_send.rank, sent.chunk);
    if (sent.micro_batch != instruction.micro_batch || to.chunk != instruction.chunk) {
      error(where(at) + ": matched rank " + std::to_string(instruction.peer) + "'s " +
            to_string(sent) + " (sends and receives pair up in a different order)");
    }
    RankState& state = ranks_[at.rank];
    (instruction.op == Op::RecvActivation ? state.activation_in
                                          : state.gradient_in)[cell(instruction)] = true;
  }

  // Where they stand in the list is checked once, by check_ending.
  void all_reduce(const InstructionRef&, const Instruction&) override {}
  bool optimizer_step(const InstructionRef&, const Instruction&) override { return true; }

 private:
  struct RankState {
    std::vector<int> forwards, backwards;          // per (mb, chunk) cell
    std::vector<bool> activation_in, gradient_in;  // received
  };

  void error(std::string text) { report_.errors.push_back(std::move(text)); }

  std::string where(const InstructionRef& at) const {
    return "rank " + std::to_string(at.rank) + " #" + std::to_string(at.index) + " " +
           to_string(lists_[at.rank][at.index]);
  }

  size_t cell(const Instruction& instruction) const {
    return static_cast<size_t>(instruction.micro_batch) * spec_.chunks + instruction.chunk;
  }

  void check_ending(int rank) {
    const auto& list = lists_[rank];
    const size_t n = list.size();
    const bool ends_right =
        n >= 2 && list[n - 2].op == Op::AllReduce && list[n - 1].op == Op::OptimizerStep;
    const auto tail_ops = std::count_if(list.begin(), list.end(), [](const Instruction& i) {
      return i.op == Op::AllReduce || i.op == Op::OptimizerStep;
    });
    if (!ends_right || tail_ops != 2) {
      error("rank " + std::to_string(rank) +
            ": the list must end with AllReduce, OptimizerStep and hold them once each");
    }
  }

  // The rank this (rank, chunk) exchanges `op`'s message with, or -1 when it has none.
  int expected_peer(int rank, const Instruction& instruction) const {
    const int chunk = instruction.chunk;
    switch (instruction.op) {
      case Op::SendActivation:
        return is_last_virtual_stage(spec_, rank, chunk)
                   ? -1
                   : activation_destination(spec_, rank, chunk).rank;
      case Op::RecvGradient:
        return is_last_virtual_stage(spec_, rank, chunk)
                   ? -1
                   : activation_destination(spec_, rank, chunk).rank;
      case Op::SendGradient:
      case Op::RecvActivation:
        return is_first_virtual_stage(spec_, rank, chunk)
                   ? -1
                   : gradient_destination(spec_, rank, chunk).rank;
      default:
        return -1;
    }
  }

  void check_complete() {
    for (size_t rank = 0; rank < ranks_.size(); ++rank) {
      for (int mb = 0; mb < spec_.micro_batches; ++mb) {
        for (int chunk = 0; chunk < spec_.chunks; ++chunk) {
          const size_t c = static_cast<size_t>(mb) * spec_.chunks + chunk;
          const std::string what = "rank " + std::to_string(rank) + " mb" + std::to_string(mb) +
                                   " c" + std::to_string(chunk);
          if (ranks_[rank].forwards[c] == 0) error(what + ": no Forward");
          if (ranks_[rank].backwards[c] == 0) error(what + ": no Backward");
        }
      }
    }
  }

  const ScheduleSpec& spec_;
  const std::vector<std::vector<Instruction>>& lists_;
  std::vector<RankState> ranks_;
  ReplayReport report_;
};

}  // namespace

ReplayReport replay_schedule(const ScheduleSpec& spec,
                             const std::vector<std::vector<Instruction>>& lists) {
  validate_schedule_spec(spec);
  return Replay(spec, lists).run();
}

}  // namespace tessel::placement
