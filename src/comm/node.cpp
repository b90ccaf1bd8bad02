#include "cascade/comm/node.hpp"

#include <utility>

#include "cascade/comm/communicator.hpp"
#include "cascade/core/workers.hpp"

namespace cascade {

namespace {

// {this rank's index, the number of ranks} among the ranks of comm on its node (shared
// memory); {0, 1} when MPI cannot tell. Collective over comm.
std::pair<int, int> node_position(MPI_Comm comm) {
    MPI_Comm local = MPI_COMM_NULL;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) !=
            MPI_SUCCESS ||
        local == MPI_COMM_NULL)
        return {0, 1};
    int r = 0, n = 1;
    MPI_Comm_rank(local, &r);
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    return {r, n};
}

}  // namespace

int node_local_ranks(MPI_Comm comm) {
    return node_position(comm).second;
}

int node_local_rank(MPI_Comm comm) {
    return node_position(comm).first;
}

int default_workers(const Communicator& comm) {
    return default_workers(node_local_ranks(comm.mpi_comm()));
}

}  // namespace cascade
