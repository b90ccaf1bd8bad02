// Checked mode: misuse is reported with the task's name instead of undefined behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "cascade/core.hpp"

using cascade::IncompleteGraphError;
using cascade::TaskError;
using cascade::Taskflow;
using cascade::Threadpool;
using cascade::ThreadpoolOptions;
using cascade::UsageError;

#define EXPECT_HAS(haystack, needle)                                 \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
        << "expected to find \"" << (needle) << "\" in: " << (haystack)

namespace {
ThreadpoolOptions checked(bool start = true) {
    return ThreadpoolOptions{.start = start, .checked = true};
}
template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "<no exception>";
}
}  // namespace

TEST(Checked, EnvironmentTurnsCheckedModeOn) {
    // CTest runs every test with CASCADE_CHECK=1.
    Threadpool tp(1);
    EXPECT_TRUE(tp.checked());
    tp.join();
}

TEST(Checked, OverFulfilledTaskIsNamed) {
    Threadpool tp(2, checked(false));
    Taskflow<int> tf(&tp, "solve");
    tf.set_task([](int) {}).set_indegree([](int) { return 2; }).set_name([](int k) {
        return "solve_" + std::to_string(k);
    });
    tf.fulfill_promise(7);
    tf.fulfill_promise(7);
    std::string msg = message_of([&] { tf.fulfill_promise(7); });
    EXPECT_HAS(msg, "'solve_7'");
    EXPECT_HAS(msg, "more times than its indegree (2)");
    tp.start();
    tp.join();
}

TEST(Checked, OverFulfilledAfterRunIsCaughtInsideTasks) {
    Threadpool tp(2, checked());
    Taskflow<int> tf(&tp, "leaf");
    Taskflow<int> driver(&tp, "driver");
    tf.set_task([](int) {});
    driver.set_task([&](int) {
        tf.fulfill_promise(3);
        tf.fulfill_promise(3);  // indegree 1: second promise is one too many
    });
    driver.fulfill_promise(0);
    try {
        tp.join();
        FAIL() << "join() should have thrown";
    } catch (const TaskError& e) {
        EXPECT_EQ(e.task(), "'driver(0)'");
        EXPECT_HAS(e.what(), "'leaf(3)'");
        EXPECT_HAS(e.what(), "more times than its indegree");
    }
}

TEST(Checked, MappingOutOfRangeIsNamed) {
    Threadpool tp(2, checked());
    Taskflow<std::tuple<int, int>> tf(&tp, "gemm");
    tf.set_task([](std::tuple<int, int>) {}).set_mapping([](std::tuple<int, int> k) {
        return std::get<0>(k);
    });
    std::string msg = message_of([&] { tf.fulfill_promise({5, 1}); });
    EXPECT_HAS(msg, "'gemm(5, 1)'");
    EXPECT_HAS(msg, "thread 5, outside [0, 2)");
    EXPECT_THROW(tf.fulfill_promise({-1, 0}), UsageError);
    tp.join();
}

TEST(Checked, IndegreeBelowOneIsNamed) {
    Threadpool tp(1, checked());
    Taskflow<int> tf(&tp, "t");
    tf.set_task([](int) {}).set_indegree([](int k) { return k - 10; }).set_name([](int k) {
        return "node" + std::to_string(k);
    });
    std::string msg = message_of([&] { tf.fulfill_promise(10); });
    EXPECT_HAS(msg, "'node10'");
    EXPECT_HAS(msg, "indegree is 0");
    tp.join();
}

TEST(Checked, JoinReportsTasksWhosePromisesNeverCame) {
    Threadpool tp(2, checked());
    Taskflow<int> tf(&tp, "wait");
    tf.set_task([](int) {}).set_indegree([](int k) { return k; });
    tf.fulfill_promise(1);  // runs
    for (int k = 2; k < 30; ++k)
        tf.fulfill_promise(k);  // each misses k-1 promises
    try {
        tp.join();
        FAIL() << "join() should have thrown";
    } catch (const IncompleteGraphError& e) {
        EXPECT_EQ(e.count(), 28u);
        EXPECT_HAS(e.what(), "28 task(s)");
        EXPECT_HAS(e.what(), "missing)");
        EXPECT_HAS(e.what(), "'wait(");
    }
}

TEST(Checked, UncheckedJoinDoesNotThrowOnIncompleteGraph) {
    Threadpool tp(1, ThreadpoolOptions{.checked = false});
    Taskflow<int> tf(&tp);
    tf.set_task([](int) {}).set_indegree([](int) { return 2; });
    tf.fulfill_promise(0);
    EXPECT_NO_THROW(tp.join());
}

TEST(Checked, TaskExceptionReachesJoinWithTaskName) {
    for (int n : {1, 3}) {
        Threadpool tp(n, checked());
        Taskflow<int> tf(&tp, "work");
        std::atomic<int> ran{0};
        tf.set_task([&](int k) {
              ran.fetch_add(1);
              if (k == 42) throw std::runtime_error("singular pivot");
          }).set_name([](int k) { return "factor[" + std::to_string(k) + "]"; });
        for (int k = 0; k < 100; ++k)
            tf.fulfill_promise(k);
        try {
            tp.join();
            FAIL() << "join() should have thrown";
        } catch (const TaskError& e) {
            EXPECT_EQ(e.task(), "'factor[42]'");
            EXPECT_HAS(e.what(), "singular pivot");
            EXPECT_THROW(std::rethrow_exception(e.original()), std::runtime_error);
        }
        // The pool is usable again after the error was reported.
        tf.fulfill_promise(1000);
        tp.start();
        EXPECT_NO_THROW(tp.join());
    }
}

TEST(Checked, MissingTaskFunctionIsReported) {
    Threadpool tp(1, checked());
    Taskflow<int> tf(&tp, "empty");
    EXPECT_HAS(message_of([&] { tf.fulfill_promise(0); }), "set_task was not called");
    tp.join();
}

// Checked mode remembers completed keys in a bounded window: a long chain does not grow it
// (it once kept every key, 166 MB after 4e6 tasks), and recent keys are still caught.
TEST(Checked, CompletedKeysStayBounded) {
    using cascade::PromiseTable;
    PromiseTable<int> t(/*track_done=*/true);
    constexpr int kKeys = 1 << 19;
    for (int k = 0; k < kKeys; ++k)
        ASSERT_EQ(t.fulfill(k, 1), PromiseTable<int>::Outcome::ready);
    const std::size_t bound = PromiseTable<int>::kShards * PromiseTable<int>::kDonePerShard;
    EXPECT_LE(t.completed_remembered(), bound);
    EXPECT_GT(t.completed_remembered(), bound / 2);
    // The latest key is still known to have run.
    EXPECT_EQ(t.fulfill(kKeys - 1, 1), PromiseTable<int>::Outcome::already_done);
}
