// Fibers for the SIMT emulator: each emulated GPU thread runs on its own stack, and control
// passes between them only at the points where a GPU thread waits for others (a barrier or a
// warp-wide instruction), so one host thread runs a whole block deterministically.
#pragma once

#include <cstddef>
#include <vector>

namespace tessel::simt {

// A pool of equally sized stacks, each below a guard page, reused from one block to the next.
class StackPool {
 public:
  explicit StackPool(size_t stack_bytes);
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // The top (highest address, 16-byte aligned) of stack i, created on first use.
  void* top(size_t i);
  size_t stack_bytes() const { return stack_bytes_; }

 private:
  struct Region {
    void* base;
    size_t bytes;
  };
  size_t stack_bytes_;
  std::vector<Region> regions_;
  std::vector<void*> tops_;
};

// An execution context: either the scheduler's own (the host thread) or a fiber that runs
// `entry` on a stack from the pool. A fiber's entry must never return through the stack: when it
// is done it switches away for good. Under AddressSanitizer the switches are announced to it, so
// that it checks each fiber's stack as a stack.
class Context {
 public:
  Context() = default;
  // Prepares the context to run entry() on the stack [stack_top - stack_bytes, stack_top).
  void start(void* stack_top, size_t stack_bytes, void (*entry)());
  // Saves the current context into `from` and resumes `to`.
  static void switch_to(Context& from, const Context& to);
  // The first call of every fiber's entry: completes the switch from `from`.
  static void entered(Context& from);

 private:
  void* stack_pointer_ = nullptr;
  const void* stack_bottom_ = nullptr;  // for AddressSanitizer; the host thread's is learnt
  size_t stack_size_ = 0;
};

}  // namespace tessel::simt
