#include "kernels.hpp"

#include "../common/blas.hpp"

namespace cascade::apps {

void potrf_tile(int n, double* a, int lda) {
    const lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, a, lda);
    if (info > 0)
        throw NotPositiveDefinite("dpotrf: the leading minor of order " + std::to_string(info) +
                                  " of a diagonal tile is not positive definite");
    if (info < 0)
        throw std::invalid_argument("dpotrf: argument " + std::to_string(-info) + " is invalid");
}

void trsm_tile(int m, int n, const double* l, int ldl, double* a, int lda) {
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, n, 1.0, l, ldl,
                a, lda);
}

void syrk_tile(int n, int k, const double* a, int lda, double* c, int ldc) {
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, k, -1.0, a, lda, 1.0, c, ldc);
}

void gemm_tile(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
               int ldc) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, m, n, k, -1.0, a, lda, b, ldb, 1.0, c,
                ldc);
}

}  // namespace cascade::apps
