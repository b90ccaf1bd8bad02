// Node-local rank counts and the default worker count of a rank (every rank of these tests
// runs on this one machine).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>

#include "cascade/comm/communicator.hpp"
#include "cascade/comm/node.hpp"
#include "cascade/core/workers.hpp"

TEST(Node, AllRanksOfThisMachineAreLocal) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(cascade::node_local_ranks(MPI_COMM_WORLD), size);
    EXPECT_EQ(cascade::node_local_ranks(MPI_COMM_SELF), 1);
}

TEST(Node, DefaultWorkersShareTheNode) {
    cascade::Communicator comm;
    const int w = cascade::default_workers(comm);
    EXPECT_GE(w, 1);
    EXPECT_EQ(w, cascade::default_workers(comm.comm_size()));
    // Unbound ranks together use no more workers than the node has CPUs (but at least one each).
    if (static_cast<int>(cascade::allowed_cpus().size()) == cascade::node_cpus()) {
        EXPECT_LE(w * comm.comm_size(), std::max(cascade::node_cpus(), comm.comm_size()));
    }
}
