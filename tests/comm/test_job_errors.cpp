// Errors that reach every rank, under mpiexec (1 to 4 ranks): an exception in a task or in an
// active message's handler on one rank makes join() throw the same TaskError on every rank,
// naming that rank, the task or handler and the message; the pool and the communicator then
// run the next epoch as usual and are destroyed normally.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "cascade/cascade.hpp"
#include "mpi_test_util.hpp"

using cascade::Communicator;
using cascade::TaskError;
using cascade::Taskflow;
using cascade::Threadpool;
using cascade_test::allreduce_sum;

namespace {

// Runs a ring of tasks passing a token around the ranks (`laps` times), after which every
// rank has run laps tasks; returns how many ran here.
long ring(Communicator& comm, Threadpool& tp, int laps, int throw_at = -1) {
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<long> ran{0};
    Taskflow<int> tf(&tp, "work");
    auto pass = comm.make_active_msg([&](int& k) { tf.fulfill_promise(k); }, "pass");
    tf.set_indegree([](int) { return 1; })
        .set_mapping([](int) { return 0; })
        .set_name([](int k) { return "work(" + std::to_string(k) + ")"; })
        .set_task([&](int k) {
            ++ran;
            if (k == throw_at) throw std::runtime_error("boom at " + std::to_string(k));
            if (k + 1 < laps * n) pass->send((me + 1) % n, k + 1);
        });
    if (me == 0) tf.fulfill_promise(0);
    tp.join();
    return ran.load();
}

}  // namespace

TEST(JobErrors, ATaskExceptionOnOneRankThrowsOnEveryRank) {
    Communicator comm;
    Threadpool tp(2, &comm);
    const int n = comm.ranks();
    const int culprit = n - 1;
    const int throw_at = 2 * n + culprit;  // the third lap, on the last rank
    try {
        ring(comm, tp, 5, throw_at);
        ADD_FAILURE() << "join() returned normally on rank " << comm.rank();
    } catch (const TaskError& e) {
        EXPECT_EQ(e.rank(), culprit);
        EXPECT_EQ(e.task(), "'work(" + std::to_string(throw_at) + ")'");
        const std::string what = e.what();
        EXPECT_NE(what.find("rank " + std::to_string(culprit) + ": task 'work("), std::string::npos)
            << what;
        EXPECT_NE(what.find("boom at " + std::to_string(throw_at)), std::string::npos) << what;
        ASSERT_TRUE(e.original());
    }
    // The next epoch runs as usual on the same pool and communicator.
    EXPECT_EQ(allreduce_sum(ring(comm, tp, 3)), 3L * n);
}

TEST(JobErrors, AHandlerExceptionOnOneRankThrowsOnEveryRank) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    auto bad = comm.make_active_msg(
        [](int& v) {
            if (v == 7) throw std::invalid_argument("no sevens");
        },
        "bad");
    if (me == 0) bad->send(n - 1, 7);
    try {
        tp.join();
        ADD_FAILURE() << "join() returned normally on rank " << me;
    } catch (const TaskError& e) {
        EXPECT_EQ(e.rank(), n - 1);
        EXPECT_EQ(e.task(), "'bad' (handler, from rank 0)");
        const std::string what = e.what();
        EXPECT_NE(what.find("no sevens"), std::string::npos) << what;
    }
    EXPECT_EQ(allreduce_sum(ring(comm, tp, 2)), 2L * n);
}

TEST(JobErrors, TwoRanksFailingInOneEpochEachThrowAnError) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank();
    tp.insert([&] {
        if (me % 2 == 0) throw std::runtime_error("even rank " + std::to_string(me));
    });
    try {
        tp.join();
        ADD_FAILURE() << "join() returned normally on rank " << me;
    } catch (const TaskError& e) {
        EXPECT_EQ(e.rank() % 2, 0) << e.what();  // one of the failing ranks' errors
    }
    EXPECT_EQ(allreduce_sum(ring(comm, tp, 1)), long(comm.ranks()));
}

// A distributed pool takes every option: name, checked mode, a start that waits.
TEST(JobErrors, ADistributedPoolTakesOptions) {
    Communicator comm;
    Threadpool tp(2, &comm, {.name = "opts", .start = false, .checked = true});
    EXPECT_EQ(tp.workers(), 2);
    EXPECT_TRUE(tp.checked());
    EXPECT_EQ(allreduce_sum(ring(comm, tp, 2)), 2L * comm.ranks());
}
