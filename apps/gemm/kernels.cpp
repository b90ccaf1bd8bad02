#include "kernels.hpp"

#include <limits>
#include <stdexcept>

#include "../common/blas.hpp"

namespace cascade::apps::gemm {

void gemm_tile(BlasClock& clock, int thread, int m, int n, int k, const double* a, const double* b,
               double beta, double* c) {
    clock.time(thread, [&] {
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, m, b, k, beta, c,
                    m);
    });
}

void gemm_tn(BlasClock& clock, int thread, int m, int n, int k, const double* at, int lda,
             const double* b, int ldb, double beta, double* c, int ldc) {
    clock.time(thread, [&] {
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0, at, lda, b, ldb, beta, c,
                    ldc);
    });
}

void add_tile(BlasClock& clock, int thread, std::size_t count, const double* x, double* c) {
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
        throw std::length_error("add_tile: tile of " + std::to_string(count) +
                                " elements is too large for one BLAS call");
    clock.time(thread, [&] { cblas_daxpy(static_cast<int>(count), 1.0, x, 1, c, 1); });
}

}  // namespace cascade::apps::gemm
