// The scheduler of the SIMT emulator: runs each block's threads as fibers, round robin, each until
// it waits at a barrier or a warp-wide instruction, and reports what a GPU would leave undefined
// (a warp-wide instruction that not every lane reaches, __syncthreads after a thread returned, a
// block where every thread waits) as a fault of the kernel.
#include "tests/support/simt/grid.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <vector>

#include "tests/support/simt/fiber.h"
#include "tests/support/simt/simt.h"

namespace tessel::simt {
namespace {

constexpr size_t kStackBytes = 64 * 1024;

const char* instruction_name(Collective kind) {
  switch (kind) {
    case Collective::kShuffleXor:
      return "__shfl_xor_sync";
    case Collective::kLdmatrix:
      return "ldmatrix.x4";
    case Collective::kLdmatrixTrans:
      return "ldmatrix.x4.trans";
    case Collective::kMma:
      return "mma.m16n8k16";
  }
  return "?";
}

std::string format(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

struct AsyncCopy {
  void* dst;
  const void* src;
  bool valid;
};

struct Thread {
  Context context;
  ThreadCoordinates coordinates;
  int linear = 0;
  enum class State { kReady, kWaiting, kDone } state = State::kReady;
  const char* waiting_at = nullptr;  // for the message when every thread waits
  std::vector<AsyncCopy> copies;     // cp.async copies not yet done, oldest first
  std::vector<size_t> group_ends;    // committed groups: their ends in `copies`
};

struct Warp {
  int lanes = 0;
  int exited = 0;
  int arrived = 0;
  Collective kind{};
  uint64_t step = 0;         // warp-wide instructions completed
  WarpStep steps[2];         // the current and the previous instruction's operands and results
  std::vector<int> waiting;  // threads of this warp waiting at the current instruction
};

// What the race check remembers of 4 bytes of dynamic shared memory in the current epoch (the
// span between two __syncthreads of the block).
struct ChunkAccess {
  uint64_t write_epoch = 0;
  int writer = -1;
  uint64_t read_epoch = 0;
  int reader = -1;  // kSeveralReaders when more than one thread read it
};
constexpr int kSeveralReaders = -2;
constexpr size_t kChunkBytes = 4;  // the smallest store the kernels make to shared memory

// The state of the block that is running, and of its host thread.
struct BlockRun {
  Context scheduler;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  int running = -1;
  int exited = 0;
  int sync_arrived = 0;
  std::vector<int> sync_waiting;
  unsigned char* shared = nullptr;
  size_t shared_bytes = 0;
  uint64_t epoch = 1;
  std::vector<ChunkAccess> chunks;  // of the dynamic shared memory
  const std::function<void()>* body = nullptr;
  bool faulted = false;
  std::string fault;
};

thread_local BlockRun* active = nullptr;

Thread& current_thread() { return active->threads[size_t(active->running)]; }

std::map<const void*, size_t>& max_dynamic_shared() {
  static std::map<const void*, size_t> limits;
  return limits;
}

// One grid at a time in the process: a kernel's static __shared__ arrays exist once, and the
// limits above are shared by every host thread.
std::mutex& device_mutex() {
  static std::mutex m;
  return m;
}

// Back to the scheduler; returns when this thread is resumed.
void yield_thread(const char* waiting_at) {
  Thread& t = current_thread();
  t.state = Thread::State::kWaiting;
  t.waiting_at = waiting_at;
  Context::switch_to(t.context, active->scheduler);
}

void release(std::vector<int>& waiting) {
  for (const int i : waiting) active->threads[size_t(i)].state = Thread::State::kReady;
  waiting.clear();
}

void complete_copies(Thread& t, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const AsyncCopy& c = t.copies[i];
    if (c.valid) {
      std::memcpy(c.dst, c.src, 16);
    } else {
      std::memset(c.dst, 0, 16);
    }
  }
  t.copies.erase(t.copies.begin(), t.copies.begin() + std::ptrdiff_t(count));
}

// What fault() throws on the faulting thread's own stack, caught by its thread_entry: the
// thread's frames unwind (nothing they hold is lost) before it leaves for good.
struct KernelFault {};

// After the kernel body returned on this thread.
void finish_thread() {
  Thread& t = current_thread();
  complete_copies(t, t.copies.size());  // copies still in flight land all the same
  Warp& warp = active->warps[size_t(t.linear / 32)];
  if (warp.arrived > 0) {
    fault("returned while " + std::to_string(warp.arrived) + " lane(s) of its warp wait at " +
          instruction_name(warp.kind));
  }
  if (active->sync_arrived > 0) {
    fault("returned while " + std::to_string(active->sync_arrived) +
          " thread(s) of the block wait at __syncthreads");
  }
  ++warp.exited;
  ++active->exited;
  t.state = Thread::State::kDone;
}

void thread_entry() {
  Context::entered(active->scheduler);
  try {
    (*active->body)();
    finish_thread();
  } catch (const KernelFault&) {
    // The block has faulted (fault() said why); the scheduler ends the launch.
  }
  Context::switch_to(current_thread().context, active->scheduler);
}

std::string waiting_summary(const BlockRun& run) {
  std::map<std::string, int> counts;
  for (const Thread& t : run.threads) {
    if (t.state == Thread::State::kWaiting) ++counts[t.waiting_at];
  }
  std::string s;
  for (const auto& [where, n] : counts) {
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " at " + where;
  }
  return s;
}

// Runs one block; false when it faulted (run.fault says why).
bool run_block(BlockRun& run, StackPool& stacks) {
  for (Thread& t : run.threads) {
    t.context.start(stacks.top(size_t(t.linear)), stacks.stack_bytes(), &thread_entry);
    t.state = Thread::State::kReady;
    t.copies.clear();
    t.group_ends.clear();
  }
  for (Warp& w : run.warps) {
    w.exited = w.arrived = 0;
    w.step = 0;
    w.waiting.clear();
  }
  run.exited = run.sync_arrived = 0;
  run.sync_waiting.clear();
  std::memset(run.shared, 0xFF, run.shared_bytes);
  run.epoch = 1;
  run.chunks.assign((run.shared_bytes + kChunkBytes - 1) / kChunkBytes, ChunkAccess{});
  while (run.exited < int(run.threads.size())) {
    bool progressed = false;
    for (Thread& t : run.threads) {
      if (t.state != Thread::State::kReady) continue;
      run.running = t.linear;
      Context::switch_to(run.scheduler, t.context);
      if (run.faulted) return false;
      progressed = true;
    }
    if (!progressed) {
      run.fault = "deadlock: every thread of block " + format(run.threads[0].coordinates.block) +
                  " waits (" + waiting_summary(run) + ")";
      return false;
    }
  }
  return true;
}

}  // namespace

const ThreadCoordinates& coordinates() { return current_thread().coordinates; }

unsigned char* dynamic_shared() { return active->shared; }

bool in_dynamic_shared(const void* p, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  return c >= active->shared && c + bytes <= active->shared + active->shared_bytes;
}

void fault(const std::string& what) {
  BlockRun& run = *active;
  const Thread& t = current_thread();
  run.faulted = true;
  run.fault = "block " + format(t.coordinates.block) + " thread " + format(t.coordinates.thread) +
              ": " + what;
  throw KernelFault{};
}

void sync_threads() {
  BlockRun& run = *active;
  if (run.exited > 0) {
    fault("__syncthreads after " + std::to_string(run.exited) +
          " thread(s) of the block returned (the barrier would count them)");
  }
  if (++run.sync_arrived == int(run.threads.size())) {
    run.sync_arrived = 0;
    ++run.epoch;
    release(run.sync_waiting);
    return;
  }
  run.sync_waiting.push_back(run.running);
  yield_thread("__syncthreads");
}

namespace {

// The race-check records of the chunks that [p, p + bytes) of dynamic shared memory touches.
std::span<ChunkAccess> chunks_of(const void* p, size_t bytes) {
  const size_t offset = size_t(static_cast<const unsigned char*>(p) - active->shared);
  const size_t first = offset / kChunkBytes;
  const size_t last = (offset + bytes + kChunkBytes - 1) / kChunkBytes;
  return std::span(active->chunks).subspan(first, last - first);
}

std::string thread_name(int linear) {
  return format(active->threads[size_t(linear)].coordinates.thread);
}

// A fault when another thread wrote the chunk since the last __syncthreads.
void require_no_other_writer(const ChunkAccess& c, const char* access) {
  if (c.write_epoch == active->epoch && c.writer != active->running) {
    fault(std::string("shared-memory race: ") + access + " bytes that thread " +
          thread_name(c.writer) + " wrote with no __syncthreads between");
  }
}

}  // namespace

void note_shared_write(const void* p, size_t bytes) {
  BlockRun& run = *active;
  for (ChunkAccess& c : chunks_of(p, bytes)) {
    require_no_other_writer(c, "writes");
    if (c.read_epoch == run.epoch && c.reader != run.running) {
      fault("shared-memory race: writes bytes that " +
            (c.reader == kSeveralReaders ? std::string("other threads")
                                         : "thread " + thread_name(c.reader)) +
            " read with no __syncthreads between");
    }
    c.write_epoch = run.epoch;
    c.writer = run.running;
  }
}

void note_shared_read(const void* p, size_t bytes) {
  BlockRun& run = *active;
  for (ChunkAccess& c : chunks_of(p, bytes)) {
    require_no_other_writer(c, "reads");
    c.reader = c.read_epoch == run.epoch && c.reader != run.running ? kSeveralReaders : run.running;
    c.read_epoch = run.epoch;
  }
}

const Slot& warp_step(Collective kind, unsigned mask, const void* operands, size_t bytes,
                      void (*compute)(WarpStep&)) {
  BlockRun& run = *active;
  Thread& t = current_thread();
  Warp& warp = run.warps[size_t(t.linear / 32)];
  const int lane_index = t.linear % 32;
  const unsigned all = warp.lanes == 32 ? 0xffffffffu : (1u << warp.lanes) - 1;
  if (mask != all) {
    fault(std::string(instruction_name(kind)) + " with mask " + std::to_string(mask) +
          ": the emulator takes only the full mask of the warp");
  }
  if (warp.exited > 0) {
    fault(std::string(instruction_name(kind)) + " after " + std::to_string(warp.exited) +
          " lane(s) of the warp returned");
  }
  if (warp.arrived == 0) {
    warp.kind = kind;
  } else if (warp.kind != kind) {
    fault(std::string("lanes of one warp diverge: this lane is at ") + instruction_name(kind) +
          " while " + std::to_string(warp.arrived) + " lane(s) wait at " +
          instruction_name(warp.kind));
  }
  WarpStep& step = warp.steps[warp.step % 2];
  std::memcpy(step.in[lane_index].bytes, operands, bytes);
  const uint64_t my_step = warp.step;
  if (++warp.arrived == warp.lanes) {
    step.lanes = warp.lanes;
    compute(step);
    warp.arrived = 0;
    ++warp.step;
    release(warp.waiting);
  } else {
    warp.waiting.push_back(run.running);
    yield_thread(instruction_name(kind));
  }
  // Lanes reuse this step's slots only two instructions later, after every lane has read them.
  return warp.steps[my_step % 2].out[lane_index];
}

uint64_t shuffle_xor_bits(unsigned mask, uint64_t bits, int lane_mask, int width) {
  struct Operands {
    uint64_t bits;
    int lane_mask, width;
  } const operands{bits, lane_mask, width};
  const Slot& out =
      warp_step(Collective::kShuffleXor, mask, &operands, sizeof operands, [](WarpStep& step) {
        for (int l = 0; l < step.lanes; ++l) {
          Operands o;
          std::memcpy(&o, step.in[l].bytes, sizeof o);
          // Outside the lane's segment of `width` lanes, its own value.
          int source = l ^ o.lane_mask;
          if (source / o.width != l / o.width || source >= step.lanes) {
            source = l;
          }
          std::memcpy(step.out[l].bytes, step.in[source].bytes, 8);
        }
      });
  uint64_t result;
  std::memcpy(&result, out.bytes, sizeof result);
  return result;
}

void cp_async16(void* dst, const void* src, bool valid) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0) {
    fault("cp.async of 16 bytes with an address off a 16-byte boundary");
  }
  if (!in_dynamic_shared(dst, 16))
    fault("cp.async to an address outside the block's shared memory");
  note_shared_write(dst, 16);  // the bytes may land any time until the wait
  current_thread().copies.push_back({dst, src, valid});
}

void cp_async_commit() {
  Thread& t = current_thread();
  t.group_ends.push_back(t.copies.size());
}

void cp_async_wait(int pending) {
  Thread& t = current_thread();
  // Complete every committed group but the newest `pending` ones; uncommitted copies stay.
  if (int(t.group_ends.size()) <= pending) return;
  const size_t done_groups = t.group_ends.size() - size_t(pending);
  const size_t count = t.group_ends[done_groups - 1];
  complete_copies(t, count);
  t.group_ends.erase(t.group_ends.begin(), t.group_ends.begin() + std::ptrdiff_t(done_groups));
  for (size_t& end : t.group_ends) end -= count;
}

void set_max_dynamic_shared_bytes(const void* kernel, size_t bytes) {
  const std::lock_guard lock(device_mutex());
  max_dynamic_shared()[kernel] = bytes;
}

LaunchResult run_grid(const char* kernel, const void* kernel_address, const LaunchConfig& config,
                      const std::function<void()>& body, std::string& error) {
  const dim3 g = config.grid, b = config.block;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.z > 64 || g.x == 0 || g.y == 0 ||
      g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    error = "invalid configuration: grid " + format(uint3{g.x, g.y, g.z}) + ", block " +
            format(uint3{b.x, b.y, b.z});
    return LaunchResult::kInvalidConfiguration;
  }
  const std::lock_guard lock(device_mutex());
  const auto limit = max_dynamic_shared().find(kernel_address);
  const size_t shared_limit =
      limit == max_dynamic_shared().end() ? kDefaultDynamicSharedBytes : limit->second;
  if (config.shared_bytes > shared_limit) {
    error = std::to_string(config.shared_bytes) + " bytes of dynamic shared memory, above the " +
            std::to_string(shared_limit) +
            " the kernel may use (cudaFuncAttributeMaxDynamicSharedMemorySize)";
    return LaunchResult::kInvalidValue;
  }

  thread_local StackPool stacks(kStackBytes);
  auto run = std::make_unique<BlockRun>();
  run->body = &body;
  run->threads.resize(threads);
  run->warps.resize(size_t((threads + 31) / 32));
  for (size_t w = 0; w < run->warps.size(); ++w) {
    run->warps[w].lanes = int(std::min<uint64_t>(32, threads - 32 * w));
  }
  // Exactly the launch's bytes: AddressSanitizer reports an access past them.
  void* shared_memory = nullptr;
  if (posix_memalign(&shared_memory, 128, std::max<size_t>(config.shared_bytes, 1)) != 0) {
    throw std::bad_alloc();
  }
  const std::unique_ptr<unsigned char, decltype(&std::free)> shared(
      static_cast<unsigned char*>(shared_memory), &std::free);
  run->shared = shared.get();
  run->shared_bytes = config.shared_bytes;

  BlockRun* const outer = active;
  active = run.get();
  bool ok = true;
  for (unsigned bz = 0; bz < g.z && ok; ++bz) {
    for (unsigned by = 0; by < g.y && ok; ++by) {
      for (unsigned bx = 0; bx < g.x && ok; ++bx) {
        for (int i = 0; i < int(threads); ++i) {
          Thread& t = run->threads[size_t(i)];
          t.linear = i;
          t.coordinates = {
              uint3{unsigned(i) % b.x, unsigned(i) / b.x % b.y, unsigned(i) / (b.x * b.y)},
              uint3{bx, by, bz}, b, g};
        }
        ok = run_block(*run, stacks);
      }
    }
  }
  active = outer;
  if (!ok) {
    error = std::string(kernel) + ": " + run->fault;
    return LaunchResult::kFault;
  }
  return LaunchResult::kOk;
}

}  // namespace tessel::simt
