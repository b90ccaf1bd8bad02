// World: where one Communicator runs: its private duplicate of an MPI communicator, this
// rank and the number of ranks in it, this rank's place on its node, and whether it
// initialized MPI (then it finalizes MPI too).
#pragma once

#include <mpi.h>

namespace cascade::detail {

/// The MPI communicator of one Communicator and this rank's place in it.
struct World {
    MPI_Comm comm = MPI_COMM_NULL;  ///< The private duplicate.
    int rank = 0;                   ///< This rank in `comm`.
    int size = 1;                   ///< Ranks in `comm`.
    int node_rank = 0;              ///< This rank's index among the ranks of its node.
    int node_ranks = 1;             ///< Ranks of `comm` on this node.
    bool owns_mpi = false;          ///< MPI was initialized by open().

    /// Initializes MPI at `thread_level` if nobody did, then duplicates `parent` (errors on
    /// the duplicate come back as codes) and finds this rank's place. Collective.
    void open(MPI_Comm parent, int thread_level);
    /// Frees the duplicate, then finalizes MPI if open() initialized it.
    void close() noexcept;
};

}  // namespace cascade::detail
