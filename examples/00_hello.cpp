// Hello, distributed: every rank runs a task that greets rank 0 with an active message.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
    cascade::Communicator comm;        // initializes MPI if nobody did (and finalizes it)
    cascade::Threadpool tp(2, &comm);  // 2 worker threads on each rank
    const int me = comm.rank(), n = comm.ranks();
    std::vector<std::string> greetings(n);  // filled on rank 0
    // Registered on every rank; runs on the rank a message is sent to.
    auto hello =
        comm.make_active_msg([&](int& from, std::string& text) { greetings[from] = text; });
    tp.insert([&] {  // a task on this rank's pool
        hello->send(0, me, "hello from rank " + std::to_string(me) + " of " + std::to_string(n));
    });
    tp.join();  // on every rank: all tasks ran and every message was handled
    if (me == 0)
        for (const std::string& g : greetings)
            std::printf("%s\n", g.c_str());
}
