// World: opening and closing a Communicator's MPI communicator.
#include "cascade/comm/detail/world.hpp"

#include "cascade/comm/node.hpp"
#include "internal.hpp"

namespace cascade::detail {

using namespace comm_detail;

void World::open(MPI_Comm parent, int thread_level) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        check_mpi(MPI_Init_thread(nullptr, nullptr, thread_level, &provided), "MPI_Init_thread");
        owns_mpi = true;
    }
    check_mpi(MPI_Comm_dup(parent, &comm), "MPI_Comm_dup");
    // MPI errors on Cascade's communicator come back as codes: they become exceptions that
    // name the call, and the job ends with a message naming this rank (see poll()).
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    node_rank = node_local_rank(comm);
    node_ranks = node_local_ranks(comm);
}

void World::close() noexcept {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (owns_mpi) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
    }
}

}  // namespace cascade::detail
