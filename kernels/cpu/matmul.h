// Fully connected layer, PyTorch's nn.Linear layout (weight is (OC, C)):
//   out = inp @ weight^T + bias        over the B*T rows of inp.
// Every product is an OpenBLAS cblas_sgemm on the buffers as they are (transposes, no copies).
// Gradients accumulate (+=) into dinp, dweight and dbias.
//
// Threads: the output is cut into fixed 128 x 512 tiles, each one single-threaded sgemm call on
// a pool thread (threading.h says why OpenBLAS's own threading is not used). The tiles depend on
// the shape only, so results are bit-identical for any thread count. Nothing else in the
// process may raise OpenBLAS's thread count (openblas_set_num_threads).
#pragma once

namespace tessel::kernels::cpu {

// Throws std::invalid_argument for a null pointer (bias may be null), a shape below 1 or
// B*T above the BLAS int range.
void matmul_forward(float* out,           // (B, T, OC)
                    const float* inp,     // (B, T, C)
                    const float* weight,  // (OC, C)
                    const float* bias,    // (OC), or nullptr for none
                    int B, int T, int C, int OC);

void matmul_backward(float* dinp,          // (B, T, C) +=
                     float* dweight,       // (OC, C) +=
                     float* dbias,         // (OC) +=, or nullptr when the layer has no bias
                     const float* dout,    // (B, T, OC)
                     const float* inp,     // (B, T, C)
                     const float* weight,  // (OC, C)
                     int B, int T, int C, int OC);

}  // namespace tessel::kernels::cpu
