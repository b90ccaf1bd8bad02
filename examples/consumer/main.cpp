// A small program using an installed Cascade: a reduction tree and a chain of tasks.
// Returns 0 when both results are right, 1 otherwise.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <exception>
#include <vector>

int main() {
    try {
        cascade::Threadpool tp(2);

        // Reduction: a binary tree in heap order. Nodes 1..2L-1; leaves are L..2L-1 and
        // leaf L+i holds i+1. Each inner node waits for its two children (indegree 2).
        constexpr int L = 256;
        std::vector<long> value(2 * L, 0);
        cascade::Taskflow<int> tree(&tp, "tree");
        tree.set_indegree([](int k) { return k >= L ? 1 : 2; })
            .set_mapping([&](int k) { return k % tp.workers(); })
            .set_priority([](int k) { return k < L ? 1.0 : 0.0; })  // inner nodes first
            .set_task(
                [&](int k) { value[k] = k >= L ? k - L + 1 : value[2 * k] + value[2 * k + 1]; })
            .set_fulfill([&](int k) {
                if (k > 1) tree.fulfill_promise(k / 2);
            })
            .set_name([](int k) { return "node " + std::to_string(k); });

        // Chain: task i runs after task i-1 and appends i, so the order must be 0..N-1.
        constexpr int N = 100;
        std::vector<int> order;
        cascade::Taskflow<int> chain(&tp, "chain");
        chain.set_task([&](int i) { order.push_back(i); }).set_fulfill([&](int i) {
            if (i + 1 < N) chain.fulfill_promise(i + 1);
        });

        for (int k = L; k < 2 * L; ++k)
            tree.fulfill_promise(k);
        chain.fulfill_promise(0);
        tp.join();

        const long expected = static_cast<long>(L) * (L + 1) / 2;
        bool ok = value[1] == expected && static_cast<int>(order.size()) == N;
        for (int i = 0; ok && i < N; ++i)
            ok = order[i] == i;
        std::printf("reduction: %ld (expected %ld), chain: %zu tasks -> %s\n", value[1], expected,
                    order.size(), ok ? "OK" : "WRONG");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
