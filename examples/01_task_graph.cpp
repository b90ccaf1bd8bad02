// Sum of squares: n independent tasks, then one task that waits for all of them.
#include <cascade/cascade.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main() {
    const int n = 1000;  // keys 0..n-1: squares; key n: the total
    std::vector<long> sq(n);
    long total = 0;

    cascade::Threadpool tp(2);              // 2 worker threads, started now
    cascade::Taskflow<int> tf(&tp, "sum");  // tasks named by an int key

    tf.set_indegree([&](int k) { return k == n ? n : 1; })        // promises task k waits for
        .set_mapping([&](int k) { return k % tp.workers(); })     // worker that runs task k
        .set_priority([&](int k) { return k == n ? 1.0 : 0.0; })  // higher runs first
        .set_name([&](int k) {                                    // used in error messages
            return k == n ? std::string("total") : "square(" + std::to_string(k) + ")";
        })
        .set_task([&](int k) {  // the work of task k
            if (k < n)
                sq[k] = long(k) * k;
            else
                for (long s : sq)
                    total += s;
        })
        .set_fulfill([&](int k) {              // runs after task k
            if (k < n) tf.fulfill_promise(n);  // one of the n promises of "total"
        });

    for (int k = 0; k < n; ++k)
        tf.fulfill_promise(k);  // seed: every square is ready
    tp.join();                  // waits for all tasks; rethrows errors

    std::printf("sum of squares below %d = %ld\n", n, total);  // 332833500
    return total == long(n - 1) * n * (2 * n - 1) / 6 ? 0 : 1;
}
