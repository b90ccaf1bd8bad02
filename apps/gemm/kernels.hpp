// The two tile kernels of the GEMM variants, timed on the calling worker's BlasClock slot.
// Tiles are column-major with leading dimension = their row count (see tiles.hpp).
#pragma once

#include <cstddef>

#include "blas_clock.hpp"

namespace cascade::apps::gemm {

// C = A B + beta C: C is m x n, A m x k, B k x n.
void gemm_tile(BlasClock& clock, int thread, int m, int n, int k, const double* a, const double* b,
               double beta, double* c);

// C += X, both holding `count` doubles (the reduction of DNS partial products).
void add_tile(BlasClock& clock, int thread, std::size_t count, const double* x, double* c);

}  // namespace cascade::apps::gemm
