#include "tests/support/simt/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// switch_stacks(save, load): pushes the callee-saved registers, stores the stack pointer in
// *save, loads `load` as the stack pointer and pops the registers saved there. Everything else
// the System V ABI lets a call clobber, so the compiler keeps nothing live across it.
#if defined(__x86_64__)
asm(R"(
  .text
  .p2align 4
  .globl tessel_simt_switch_stacks
  .hidden tessel_simt_switch_stacks
  .type tessel_simt_switch_stacks, @function
tessel_simt_switch_stacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tessel_simt_switch_stacks, .-tessel_simt_switch_stacks
  .section .note.GNU-stack,"",@progbits
)");
#else
#error "the SIMT emulator's stack switch is written for x86-64 only"
#endif

extern "C" void tessel_simt_switch_stacks(void** save, void* load);

namespace tessel::simt {

namespace {
size_t page_size() { return size_t(sysconf(_SC_PAGESIZE)); }
}  // namespace

StackPool::StackPool(size_t stack_bytes)
    : stack_bytes_((stack_bytes + page_size() - 1) / page_size() * page_size()) {}

StackPool::~StackPool() {
  for (const Region& r : regions_) munmap(r.base, r.bytes);
}

void* StackPool::top(size_t i) {
  if (i < tops_.size()) return tops_[i];
  // Grow in chunks of 64 stacks, each with an inaccessible page below it: an overflow faults
  // instead of writing into the neighbouring thread's stack.
  constexpr size_t kChunk = 64;
  const size_t slot = stack_bytes_ + page_size();
  const size_t bytes = kChunk * slot;
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    throw std::runtime_error("simt: cannot map " + std::to_string(bytes) +
                             " bytes of fiber stacks");
  regions_.push_back({base, bytes});
  for (size_t k = 0; k < kChunk; ++k) {
    char* guard = static_cast<char*>(base) + k * slot;
    mprotect(guard, page_size(), PROT_NONE);
    tops_.push_back(guard + slot);
  }
  return top(i);
}

void Context::start(void* stack_top, size_t stack_bytes, void (*entry)()) {
  stack_bottom_ = static_cast<char*>(stack_top) - stack_bytes;
  stack_size_ = stack_bytes;
#if defined(__SANITIZE_ADDRESS__)
  // A fiber that faulted or finished left its frames' red zones behind.
  ASAN_UNPOISON_MEMORY_REGION(stack_bottom_, stack_bytes);
#endif
  auto* sp = reinterpret_cast<uintptr_t*>(reinterpret_cast<uintptr_t>(stack_top) & ~uintptr_t(15));
  *--sp = 0;  // where entry's return address would be: entry then sees the ABI's alignment
  *--sp = reinterpret_cast<uintptr_t>(entry);  // popped by switch_stacks' ret
  for (int i = 0; i < 6; ++i) *--sp = 0;       // rbp, rbx, r12 to r15
  stack_pointer_ = sp;
}

void Context::switch_to(Context& from, const Context& to) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.stack_bottom_, to.stack_size_);
  tessel_simt_switch_stacks(&from.stack_pointer_, to.stack_pointer_);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);  // `from` runs again
#else
  tessel_simt_switch_stacks(&from.stack_pointer_, to.stack_pointer_);
#endif
}

void Context::entered([[maybe_unused]] Context& from) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &from.stack_bottom_, &from.stack_size_);
#endif
}

}  // namespace tessel::simt
