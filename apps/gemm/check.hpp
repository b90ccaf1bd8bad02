// The answer check: relative Frobenius error ||C - A B||_F / ||A B||_F of the distributed
// product. Each rank checks the C tiles it owns against a reference it computes itself with
// one dgemm per tile from regenerated panels of A and B (the entries depend only on the
// seed), so nothing is gathered and the check scales with the job. Collective.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "gemm_algorithm.hpp"
#include "tiles.hpp"

namespace cascade::apps::gemm {

double relative_error(MPI_Comm comm, const Tiling& t, std::uint64_t seed, const GemmAlgorithm& alg,
                      int blas_threads);

}  // namespace cascade::apps::gemm
