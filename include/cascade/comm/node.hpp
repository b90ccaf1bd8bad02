// What a rank knows about the node it runs on: how many ranks share it, and from that the
// default number of worker threads (see cascade/core/workers.hpp).
#pragma once

#include <mpi.h>

namespace cascade {

class Communicator;

/// The number of ranks of `comm` on this rank's node (shared memory), through
/// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Collective over comm.
int node_local_ranks(MPI_Comm comm);

/// This rank's index among the ranks of `comm` on its node (0 when that cannot be told).
/// Collective over comm.
int node_local_rank(MPI_Comm comm);

/// default_workers(node_local_ranks(comm)): this rank's share of its node's CPUs (its whole
/// affinity mask when mpiexec or srun bound it), or CASCADE_WORKERS. Collective over comm.
int default_workers(const Communicator& comm);

}  // namespace cascade
