// One spin rate for every rank of a job: the apps that spin for a given time (each rank's
// handlers doing the same work) measure the rate on one rank while the others wait without
// spinning, and tell it to all.
#pragma once

#include <mpi.h>

#include <chrono>
#include <thread>

#include "spin.hpp"

namespace cascade_bench {

// The spin rate of rank 0 of `comm` (spin_iters_per_second), told to every rank. The other
// ranks wait in a non-blocking barrier tested every millisecond, asleep in between, so the
// measure does not depend on what they do: ranks that measured each for itself while a
// neighbour on the same core spun too got rates that differed, and with them the work of a
// handler. Every rank of `comm` calls it.
inline double spin_iters_per_second_shared(MPI_Comm comm) {
    int me = 0;
    MPI_Comm_rank(comm, &me);
    double rate = me == 0 ? spin_iters_per_second() : 0.0;
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, comm);
    return rate;
}

}  // namespace cascade_bench
