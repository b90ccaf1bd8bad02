// The kernels of the GEMM variants, timed on the calling worker's BlasClock slot.
// Tiles are column-major; gemm_tile and add_tile take a leading dimension = the row count
// (see tiles.hpp).
#pragma once

#include <cstddef>

#include "blas_clock.hpp"

namespace cascade::apps::gemm {

// C = A B + beta C: C is m x n, A m x k, B k x n.
void gemm_tile(BlasClock& clock, int thread, int m, int n, int k, const double* a, const double* b,
               double beta, double* c);

// C = A B + beta C with A given transposed: C is m x n (leading dimension ldc), At = A^T is
// k x m (lda), B k x n (ldb). The 2D variant's block update: its A panels hold A^T, so the
// rows of A that one task reads are contiguous columns of At.
void gemm_tn(BlasClock& clock, int thread, int m, int n, int k, const double* at, int lda,
             const double* b, int ldb, double beta, double* c, int ldc);

// C += X, both holding `count` doubles (the reduction of DNS partial products).
void add_tile(BlasClock& clock, int thread, std::size_t count, const double* x, double* c);

}  // namespace cascade::apps::gemm
