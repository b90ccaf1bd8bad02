// Errors: a task throws on the last rank; every rank's join() throws the same TaskError, and
// the pool runs the next epoch.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <stdexcept>

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    if (comm.rank() == comm.ranks() - 1) tp.insert([] { throw std::runtime_error("bad tile"); });
    bool caught = false;
    try {
        tp.join();  // throws on every rank, not only the last one
    } catch (const cascade::TaskError& e) {
        std::printf("rank %d: %s (from rank %d)\n", comm.rank(), e.what(), e.rank());
        caught = true;
    }
    tp.insert([] {});  // the pool runs the next epoch
    tp.join();
    return caught ? 0 : 1;
}  // the pool and the communicator are destroyed as usual; MPI is finalized
