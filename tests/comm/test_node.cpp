// Node-local rank counts, the default worker count of a rank and where pinned workers go (every
// rank of these tests runs on this one machine).
#include <gtest/gtest.h>
#include <mpi.h>

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "cascade/comm/communicator.hpp"
#include "cascade/comm/node.hpp"
#include "cascade/core/threadpool.hpp"
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
    EXPECT_EQ(w, cascade::default_workers(comm.ranks()));
    // Unbound ranks together use no more workers than the node has CPUs (but at least one each).
    if (static_cast<int>(cascade::allowed_cpus().size()) == cascade::node_cpus()) {
        EXPECT_LE(w * comm.ranks(), std::max(cascade::node_cpus(), comm.ranks()));
    }
}

TEST(Node, PinnedWorkersOfUnboundRanksDoNotShareACpu) {
#if defined(__linux__)
    cascade::Communicator comm;
    const int me = comm.rank(), n = comm.ranks();
    EXPECT_EQ(comm.node_rank(), me);  // all ranks here, in rank order
    EXPECT_EQ(cascade::node_local_rank(MPI_COMM_SELF), 0);
    const std::vector<int> cpus = cascade::allowed_cpus();
    int cpu = -1;
    ::setenv("CASCADE_PIN_WORKERS", "1", 1);  // the pool with a communicator reads it
    {
        cascade::Threadpool tp(1, &comm, 0, "pinned", false);
        tp.insert([&] { cpu = sched_getcpu(); }, 0, 0.0, true);
        tp.join();
    }
    ::unsetenv("CASCADE_PIN_WORKERS");
    const int first = cascade::pin_offset(static_cast<int>(cpus.size()), cascade::node_cpus(),
                                          comm.node_rank(), 1);
    EXPECT_EQ(cpu, cpus[static_cast<std::size_t>(first) % cpus.size()]);
    std::vector<int> all(static_cast<std::size_t>(n));
    MPI_Allgather(&cpu, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    // Unbound ranks, no more of them than CPUs: one CPU each (pinned from the same first
    // CPU, every rank's worker 0 shared one).
    if (static_cast<int>(cpus.size()) == cascade::node_cpus() && n <= cascade::node_cpus()) {
        std::sort(all.begin(), all.end());
        EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
    }
#else
    GTEST_SKIP() << "pinning is Linux only";
#endif
}
