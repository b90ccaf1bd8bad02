// Checked mode: a task graph with one promise too few. Run with CASCADE_CHECK=1 (the test
// suite does) and join() names the task left waiting; a task that throws is named too.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

int main() {
    const int n = 10;
    cascade::ThreadpoolOptions opts;
    opts.checked = true;  // as if CASCADE_CHECK=1
    cascade::Threadpool tp(2, opts);
    cascade::Taskflow<int> tf(&tp, "sum");
    tf.set_indegree([&](int k) { return k == n ? n + 1 : 1; })  // one too many: a mistake
        .set_name([&](int k) {
            return k == n ? std::string("total") : "square(" + std::to_string(k) + ")";
        })
        .set_task([](int) {})
        .set_fulfill([&](int k) {
            if (k < n) tf.fulfill_promise(n);
        });
    for (int k = 0; k < n; ++k)
        tf.fulfill_promise(k);
    try {
        tp.join();
    } catch (const cascade::IncompleteGraphError& e) {
        std::printf("caught: %s\n", e.what());  // ... first: 'total' (1 of 11 missing)
    }

    cascade::Threadpool tp2(2);
    tp2.insert([] { throw std::runtime_error("bad tile"); });
    try {
        tp2.join();
    } catch (const cascade::TaskError& e) {
        std::printf("caught: %s\n", e.what());  // task '...' on thread 0 threw: bad tile
        return 0;
    }
    return 1;
}
