// Helpers shared by the MPI test programs (every layer's): reductions and gathers over
// MPI_COMM_WORLD, its size and this rank.
#pragma once

#include <mpi.h>

#include <vector>

namespace cascade_test {

// Sum of x over all ranks of MPI_COMM_WORLD.
inline long allreduce_sum(long x) {
    long y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return y;
}

// Largest x over all ranks of MPI_COMM_WORLD.
inline long allreduce_max(long x) {
    long y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    return y;
}

// Number of ranks of MPI_COMM_WORLD.
inline int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// This rank in MPI_COMM_WORLD.
inline int world_rank() {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    return me;
}

// Every rank's x, in rank order, on every rank.
inline std::vector<double> allgather(double x) {
    std::vector<double> all(static_cast<std::size_t>(world_size()));
    MPI_Allgather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    return all;
}

}  // namespace cascade_test
