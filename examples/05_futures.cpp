// Futures: square on every rank, the sum on any rank, without blocking a thread.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    cascade::Futures fx(tp, &comm);  // the futures layer of this pool
    auto square = fx.make_async([](int& x) { return x * x; }, "square");
    auto total = fx.make_async(
        [](const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }, "total");
    if (comm.rank() == 0) {
        std::vector<cascade::future<int>> parts;
        for (int r = 0; r < comm.ranks(); ++r)
            parts.push_back(cascade::async(r, square, r));
        auto all = cascade::when_all(std::move(parts));  // future<std::vector<int>>, nothing blocks
        auto sum = cascade::async(cascade::any, total, std::move(all));  // runs once `all` is ready
        std::printf("%d\n", sum.then([](int s) { return s + 1; }).get());
    }
    tp.join();  // waits for outstanding asyncs too
}
