// A message sent after the ranks' last join() never runs, and its receiver says so when its
// Communicator is destroyed (the pre-posted receive that got it is not cancelled); receives
// that got nothing are cancelled without a word.
//   late  rank 0 sends one message to rank 1 after the last join()
//   none  nothing is sent after it
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "cascade/cascade.hpp"

int main(int argc, char** argv) {
    const bool late = argc > 1 && std::strcmp(argv[1], "late") == 0;
    int ran = 0;
    {
        cascade::Communicator comm;
        cascade::Threadpool tp(1, &comm);
        auto* ping = comm.make_active_msg([&](int&) { ++ran; }, "ping");
        if (comm.rank() == 0) ping->send(comm.ranks() - 1, 1);  // one that runs
        tp.join();
        if (late && comm.rank() == 0) {
            ping->send(comm.ranks() - 1, 2);
            comm.progress();  // hands it to MPI (8 bytes: sent eagerly)
        }
        // Rank 0's message is ahead of its barrier messages: once the barrier is done, it
        // matched rank 1's posted receive.
        MPI_Barrier(MPI_COMM_WORLD);
    }
    std::printf("ran %d\n", ran);
    return 0;
}
