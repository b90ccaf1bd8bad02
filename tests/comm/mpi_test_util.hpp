// Helpers shared by the MPI test programs.
#pragma once

#include <mpi.h>

namespace cascade_test {

// Sum of x over all ranks of MPI_COMM_WORLD.
inline long allreduce_sum(long x) {
    long y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return y;
}

}  // namespace cascade_test
