// Broadcasts: rank 0 sends one vector to every other rank with one call; it travels as a
// tree (ranks forward it to others), each recipient's handler runs once and answers rank 0.
// A loop of sends of one payload from one task becomes such a tree too.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::vector<double> got(n, 0.0);  // on rank 0: the sum each rank received
    auto answer = comm.make_active_msg([&](int& from, double& sum) { got[from] += sum; });
    auto table = comm.make_active_msg([&](std::vector<double>& v) {
        answer->send(0, me, std::accumulate(v.begin(), v.end(), 0.0));
    });
    std::vector<double> values(1000);
    std::iota(values.begin(), values.end(), 0.0);  // 0 + 1 + ... + 999 = 499500
    std::vector<int> others;
    for (int r = 1; r < n; ++r)
        others.push_back(r);
    if (me == 0) {
        table->send(others, values);  // explicit: one call, a binomial tree
        tp.insert([&] {               // detected: the sends of one task, held until it ends
            for (int r : others)
                table->send(r, values);
        });
    }
    tp.join();
    if (me == 0) {
        cascade::BroadcastStats c = comm.broadcasts().stats();
        std::printf(
            "%llu broadcasts (%llu detected), %llu messages from rank 0 for %llu recipients\n",
            (unsigned long long)c.broadcasts, (unsigned long long)c.detected,
            (unsigned long long)c.root_messages, (unsigned long long)c.recipients);
        for (int r = 1; r < n; ++r)
            std::printf("rank %d received %g twice\n", r, got[r] / 2);
    }
}
