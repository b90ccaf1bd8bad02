// Large active messages: each rank sends a 1 MiB block to the next rank without copying it.
// The receiver says where the body goes, runs a handler when it has arrived, and the sender
// learns when its buffer may be reused.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <vector>

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::vector<double> block(1 << 17, me), inbox;
    bool ok = false;
    auto am = comm.make_large_active_msg(
        [&](int& from, std::size_t&) { ok = inbox.front() == from && inbox.back() == from; },
        [&](int&, std::size_t& count) {  // where the body goes, before it arrives
            inbox.resize(count);
            return inbox.data();
        },
        [&](int&, std::size_t&) { std::printf("rank %d: block sent\n", me); });
    am->send_large((me + 1) % n, cascade::view<double>(block.data(), block.size()), me,
                   block.size());
    tp.join();
    std::printf("rank %d: block from rank %d %s\n", me, (me + n - 1) % n, ok ? "OK" : "WRONG");
    return ok ? 0 : 1;
}
