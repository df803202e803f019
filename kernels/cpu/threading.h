// The threads of the CPU kernels: one persistent pool for the whole process, sized by the caller.
//
// Determinism: parallel_for cuts [0, n) into chunks that depend on n and the grain only, never
// on the thread count, and every kernel computes each output inside one chunk in a fixed order
// (reductions over many chunks go through fixed-size blocks summed in block order). So the same
// inputs give bit-identical outputs with any thread count, which bit-exact resume and the
// pipeline-versus-single-process checks rely on.
//
// OpenBLAS: its own thread count is pinned to 1, and matmul parallelises over fixed tiles of the
// output, each tile one single-threaded sgemm call on a pool thread. OpenBLAS's threaded driver
// blocks K differently from its single-threaded one (0.3.21: a 256x768 by K=1000 product differs
// between 1 and 2 threads), so letting OpenBLAS thread would break the rule above.
#pragma once

#include <cstdint>
#include <functional>

namespace tessel::kernels::cpu {

// Sets the threads every kernel uses, the calling thread included (1 until set); also pins
// OpenBLAS to one thread. Waits for a parallel_for in flight. Throws std::invalid_argument
// unless 1 <= threads <= kMaxThreads, std::logic_error when called from a parallel_for body.
inline constexpr int kMaxThreads = 256;
void set_num_threads(int threads);
int num_threads();

// Calls body(begin, end) once for each chunk [k*grain, min(n, (k+1)*grain)) of [0, n), the
// chunks shared out among the pool's threads; returns when all are done (a throwing chunk does
// not stop the others), rethrowing the first exception a body threw. A call from inside a body, or
// while another thread's call is running on the pool, runs its chunks in order on the calling
// thread. Throws std::invalid_argument unless n >= 0 and grain >= 1.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// About this many floats per chunk for the streaming kernels: enough to hide a wake-up, small
// enough to balance two threads on a 64-token micro-batch.
inline constexpr int64_t kChunkElements = 16384;
inline int64_t rows_per_chunk(int64_t row_elements) {
  return row_elements >= kChunkElements ? 1 : kChunkElements / row_elements;
}
// Column-parallel reductions (bias and layernorm gradients, embedding scatter) give each chunk
// this many columns and walk all rows in order inside it.
inline constexpr int64_t kColumnBlock = 64;

}  // namespace tessel::kernels::cpu
