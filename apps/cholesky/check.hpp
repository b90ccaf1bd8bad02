// The answer check of the Cholesky app: gather the distributed factor on rank 0 and compute
// the relative residual ||A - L L^T||_F / ||A||_F there with multithreaded BLAS.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "distribution.hpp"
#include "tile_matrix.hpp"

namespace cascade::apps {

// Collective over `comm`. `l` holds this rank's tiles of the factor; `seed` regenerates the
// input A on rank 0. Returns the residual on rank 0, -1 elsewhere.
double distributed_residual(const TileMatrix& l, const BlockCyclic& dist, std::uint64_t seed,
                            MPI_Comm comm, int blas_threads);

}  // namespace cascade::apps
