#include "cascade/comm/node.hpp"

#include "cascade/comm/communicator.hpp"
#include "cascade/core/workers.hpp"

namespace cascade {

int node_local_ranks(MPI_Comm comm) {
    MPI_Comm local = MPI_COMM_NULL;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) !=
            MPI_SUCCESS ||
        local == MPI_COMM_NULL)
        return 1;
    int n = 1;
    MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    return n;
}

int node_local_rank(MPI_Comm comm) {
    MPI_Comm local = MPI_COMM_NULL;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) !=
            MPI_SUCCESS ||
        local == MPI_COMM_NULL)
        return 0;
    int r = 0;
    MPI_Comm_rank(local, &r);
    MPI_Comm_free(&local);
    return r;
}

int default_workers(const Communicator& comm) {
    return default_workers(node_local_ranks(comm.mpi_comm()));
}

}  // namespace cascade
