#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "cascade/core.hpp"

using cascade::Taskflow;
using cascade::Threadpool;
using cascade::ThreadpoolOptions;

TEST(Taskflow, ChainRunsInOrder) {
    Threadpool tp(2);
    Taskflow<int> tf(&tp, "chain");
    std::vector<int> order;
    std::atomic<int> last{-1};
    tf.set_task([&](int k) {
          EXPECT_EQ(last.load(), k - 1);
          last.store(k);
          order.push_back(k);
      })
        .set_fulfill([&](int k) {
            if (k < 999) tf.fulfill_promise(k + 1);
        })
        .set_indegree([](int) { return 1; })
        .set_mapping([](int k) { return k % 2; });
    tf.fulfill_promise(0);
    tp.join();
    EXPECT_EQ(order.size(), 1000u);
}

TEST(Taskflow, FanInWaitsForAllPromises) {
    Threadpool tp(4);
    Taskflow<int> leaves(&tp, "leaf");
    Taskflow<int> root(&tp, "root");
    constexpr int n = 500;
    std::atomic<int> done_leaves{0};
    int root_saw = -1;
    leaves.set_task([&](int) { done_leaves.fetch_add(1); })
        .set_fulfill([&](int) { root.fulfill_promise(0); })
        .set_mapping([](int k) { return k % 4; });
    root.set_task([&](int) { root_saw = done_leaves.load(); }).set_indegree([](int) { return n; });
    for (int i = 0; i < n; ++i)
        leaves.fulfill_promise(i);
    tp.join();
    EXPECT_EQ(root_saw, n);
}

TEST(Taskflow, TupleKeys) {
    Threadpool tp(2);
    using K = std::tuple<int, int, int>;
    Taskflow<K> tf(&tp, "t3");
    constexpr int n = 12;
    std::vector<std::atomic<int>> runs(n * n * n);
    // (i,j,k) depends on (i-1,j,k), (i,j-1,k), (i,j,k-1) where they exist.
    tf.set_indegree([](K key) {
          auto [i, j, k] = key;
          int d = (i > 0) + (j > 0) + (k > 0);
          return d == 0 ? 1 : d;
      })
        .set_mapping([](K key) { return (std::get<0>(key) + std::get<1>(key)) % 2; })
        .set_task([&](K key) {
            auto [i, j, k] = key;
            runs[(i * n + j) * n + k].fetch_add(1);
            if (i + 1 < n) tf.fulfill_promise({i + 1, j, k});
            if (j + 1 < n) tf.fulfill_promise({i, j + 1, k});
            if (k + 1 < n) tf.fulfill_promise({i, j, k + 1});
        })
        .set_name([](K key) { return "cell" + cascade::key_to_string(key); });
    tf.fulfill_promise({0, 0, 0});
    tp.join();
    for (auto& r : runs)
        ASSERT_EQ(r.load(), 1);
}

TEST(Taskflow, ArrayAndPointerKeys) {
    Threadpool tp(2);
    Taskflow<std::array<int, 2>> ta(&tp);
    Taskflow<int*> tp_(&tp);
    std::atomic<int> sum{0};
    int values[4] = {1, 2, 3, 4};
    ta.set_task([&](std::array<int, 2> k) { sum.fetch_add(k[0] * k[1]); });
    tp_.set_task([&](int* p) { sum.fetch_add(*p * 100); }).set_indegree([](int*) { return 2; });
    ta.fulfill_promise({2, 3});
    for (int* p = values; p != values + 4; ++p) {
        tp_.fulfill_promise(p);
        tp_.fulfill_promise(p);
    }
    tp.join();
    EXPECT_EQ(sum.load(), 6 + 1000);
    EXPECT_EQ(cascade::key_to_string(std::array<int, 2>{2, 3}), "(2, 3)");
}

TEST(Taskflow, PrioritiesHonouredOnOneThread) {
    Threadpool tp(1, ThreadpoolOptions{.start = false});
    Taskflow<int> tf(&tp);
    std::vector<int> order;
    tf.set_task([&](int k) { order.push_back(k); }).set_priority([](int k) {
        return static_cast<double>((k * 7919) % 1000);
    });
    for (int k = 0; k < 1000; ++k)
        tf.fulfill_promise(k);
    tp.start();
    tp.join();
    ASSERT_EQ(order.size(), 1000u);
    for (std::size_t i = 1; i < order.size(); ++i)
        ASSERT_GT((order[i - 1] * 7919) % 1000, (order[i] * 7919) % 1000);
}

// Random DAGs: every task runs exactly once, and only after all its predecessors finished.
class RandomDag : public ::testing::TestWithParam<int> {};

TEST_P(RandomDag, EveryTaskOnceAfterItsPredecessors) {
    const int n_threads = GetParam();
    for (unsigned seed = 1; seed <= 3; ++seed) {
        std::mt19937 rng(seed * 7 + static_cast<unsigned>(n_threads));
        constexpr int n = 4000;
        std::vector<std::vector<int>> succ(n), pred(n);
        for (int i = 1; i < n; ++i) {
            int m = static_cast<int>(rng() % 5);
            for (int e = 0; e < m; ++e) {
                int j = static_cast<int>(rng() % static_cast<unsigned>(i));
                if (std::find(pred[i].begin(), pred[i].end(), j) != pred[i].end()) continue;
                pred[i].push_back(j);
                succ[j].push_back(i);
            }
        }
        std::vector<int> mapping(n);
        std::vector<bool> bound(n);
        for (int i = 0; i < n; ++i) {
            mapping[i] = static_cast<int>(rng() % static_cast<unsigned>(n_threads));
            bound[i] = rng() % 4 == 0;
        }
        std::vector<std::atomic<int>> runs(n);
        std::vector<std::atomic<bool>> finished(n);
        std::atomic<int> order_violations{0}, binding_violations{0};

        Threadpool tp(n_threads);
        Taskflow<int> tf(&tp, "dag");
        tf.set_indegree(
              [&](int i) { return pred[i].empty() ? 1 : static_cast<int>(pred[i].size()); })
            .set_mapping([&](int i) { return mapping[i]; })
            .set_binding([&](int i) { return static_cast<bool>(bound[i]); })
            .set_priority([](int i) { return static_cast<double>(i % 7); })
            .set_task([&](int i) {
                runs[i].fetch_add(1);
                for (int p : pred[i])
                    if (!finished[p].load()) order_violations.fetch_add(1);
                if (bound[i] && tp.current_thread() != mapping[i]) binding_violations.fetch_add(1);
                finished[i].store(true);
            })
            .set_fulfill([&](int i) {
                for (int s : succ[i])
                    tf.fulfill_promise(s);
            });
        for (int i = 0; i < n; ++i)
            if (pred[i].empty()) tf.fulfill_promise(i);
        tp.join();
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(runs[i].load(), 1) << "task " << i;
        EXPECT_EQ(order_violations.load(), 0);
        EXPECT_EQ(binding_violations.load(), 0);
    }
}
INSTANTIATE_TEST_SUITE_P(Threads, RandomDag, ::testing::Values(1, 2, 4, 8));

TEST(Taskflow, ReductionWithBoundTasks) {
    // Partial sums are accumulated by tasks bound to their accumulator's thread: the plain
    // (non-atomic) accumulators are safe because only that thread ever touches them.
    constexpr int n_threads = 4, n = 20000;
    Threadpool tp(n_threads);
    Taskflow<int> produce(&tp, "produce");
    Taskflow<int> accumulate(&tp, "accumulate");
    Taskflow<int> finish(&tp, "finish");
    std::vector<long> acc(n_threads, 0);
    std::vector<long> value(n);
    std::atomic<int> wrong_thread{0};
    long total = -1;
    produce.set_task([&](int k) { value[k] = static_cast<long>(k) * 3; })
        .set_fulfill([&](int k) { accumulate.fulfill_promise(k); })
        .set_mapping([](int k) { return (k * 13) % n_threads; });
    accumulate
        .set_task([&](int k) {
            int t = k % n_threads;
            if (tp.current_thread() != t) wrong_thread.fetch_add(1);
            acc[t] += value[k];
        })
        .set_fulfill([&](int) { finish.fulfill_promise(0); })
        .set_mapping([](int k) { return k % n_threads; })
        .set_binding([](int) { return true; });
    finish.set_indegree([](int) { return n; }).set_task([&](int) {
        total = 0;
        for (long a : acc)
            total += a;
    });
    for (int k = 0; k < n; ++k)
        produce.fulfill_promise(k);
    tp.join();
    EXPECT_EQ(wrong_thread.load(), 0);
    EXPECT_EQ(total, 3L * n * (n - 1) / 2);
}

TEST(Taskflow, FulfillFromForeignThreadsAndOtherTaskflows) {
    Threadpool tp(2);
    Taskflow<int> sink(&tp, "sink");
    Taskflow<int> relay(&tp, "relay");
    constexpr int n_ext = 4, per = 2000;
    std::atomic<int> sink_runs{0};
    // sink(k) waits for each foreign thread once, and for relay(k), which itself waits for
    // each foreign thread once.
    sink.set_indegree([](int) { return n_ext + 1; }).set_task([&](int) { sink_runs.fetch_add(1); });
    relay.set_indegree([](int) { return n_ext; }).set_task([&](int k) { sink.fulfill_promise(k); });
    std::vector<std::thread> ext;
    for (int e = 0; e < n_ext; ++e)
        ext.emplace_back([&] {
            for (int k = 0; k < per; ++k) {
                sink.fulfill_promise(k);
                relay.fulfill_promise(k);
            }
        });
    for (auto& th : ext)
        th.join();
    tp.join();
    EXPECT_EQ(sink_runs.load(), per);
}

TEST(Taskflow, MemoryFollowsLiveTasksNotGraphSize) {
    // A chain of 100000 tasks with indegree 2: at any moment at most one task is
    // partially fulfilled, so the promise table never holds more than one entry.
    Threadpool tp(2);
    Taskflow<long> tf(&tp, "chain2");
    std::size_t max_pending = 0;
    constexpr long n = 100000;
    tf.set_indegree([](long k) { return k == 0 ? 1 : 2; })
        .set_mapping([](long) { return 0; })
        .set_task([&](long k) {
            if (k % 1000 == 0) {
                std::vector<std::string> names;
                max_pending = std::max(max_pending, tf.pending(0, names));
            }
            if (k + 1 < n) {
                tf.fulfill_promise(k + 1);
                if (k % 1000 == 0) {
                    std::vector<std::string> names;
                    max_pending = std::max(max_pending, tf.pending(0, names));
                }
                tf.fulfill_promise(k + 1);
            }
        });
    tf.fulfill_promise(0);
    tp.join();
    EXPECT_EQ(max_pending, 1u);
    std::vector<std::string> names;
    EXPECT_EQ(tf.pending(0, names), 0u);
}

TEST(Taskflow, ManyPartiallyFulfilledTasksSpillAndDrain) {
    // 50000 tasks wait at once: far more than the inline slots of the promise table hold,
    // so entries spill into its overflow tables and are erased from them in random order.
    Threadpool tp(2, ThreadpoolOptions{.start = false});
    Taskflow<std::tuple<int, int>> tf(&tp, "wide");
    constexpr int n = 50000;
    std::vector<std::atomic<int>> runs(n);
    tf.set_indegree([](std::tuple<int, int>) { return 3; }).set_task([&](std::tuple<int, int> k) {
        runs[std::get<0>(k)].fetch_add(1);
    });
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(5);
    for (int pass = 0; pass < 3; ++pass) {
        std::shuffle(order.begin(), order.end(), rng);
        for (int i : order)
            tf.fulfill_promise({i, -i});
        std::vector<std::string> names;
        if (pass < 2) {
            EXPECT_EQ(tf.pending(3, names), static_cast<std::size_t>(n));
            EXPECT_EQ(names.size(), 3u);
        }
    }
    tp.start();
    tp.join();
    for (int i = 0; i < n; ++i)
        ASSERT_EQ(runs[i].load(), 1) << i;
    std::vector<std::string> names;
    EXPECT_EQ(tf.pending(0, names), 0u);
}

TEST(Taskflow, FulfillPromisesSeedsAGraphInBulk) {
    // Sources seeded by one call on workers that are asleep: all run, and fan-in tasks
    // count promises from bulk and single calls alike.
    ThreadpoolOptions o;
    Threadpool tp(2, o);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    Taskflow<int> tf(&tp, "bulk");
    constexpr int n = 5000;
    std::atomic<int> ran{0};
    tf.set_task([&](int) { ran.fetch_add(1); })
        .set_indegree([](int k) { return k < n ? 1 : 2; })
        .set_mapping([](int k) { return k % 2; });
    std::vector<int> keys(n);
    std::iota(keys.begin(), keys.end(), 0);
    keys.push_back(n);  // first of its two promises
    tf.fulfill_promises(keys);
    tf.fulfill_promise(n);
    tp.join();
    EXPECT_EQ(ran.load(), n + 1);
}
