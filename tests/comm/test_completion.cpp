// Distributed completion: join() returns on every rank only when all work everywhere is
// done, including messages in flight while every rank is momentarily idle.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"
#include "mpi_test_util.hpp"

using cascade::Communicator;
using cascade::Taskflow;
using cascade::Threadpool;

using cascade_test::allreduce_sum;

// Random DAGs over ranks and threads: edges that cross ranks travel as active messages.
TEST(Completion, RandomDistributedDag) {
    Communicator comm;
    const int me = comm.rank(), n = comm.ranks();
    for (unsigned seed = 1; seed <= 4; ++seed) {
        const int threads = 1 + static_cast<int>(seed % 3);
        Threadpool tp(threads, &comm);
        std::mt19937 rng(seed);  // same graph on every rank
        constexpr int N = 1500;
        std::vector<std::vector<int>> succ(N), pred(N);
        std::vector<int> rank_of(N), thread_of(N);
        for (int i = 0; i < N; ++i) {
            rank_of[i] = static_cast<int>(rng() % static_cast<unsigned>(n));
            thread_of[i] = static_cast<int>(rng() % 3);
            if (i == 0) continue;
            int m = static_cast<int>(rng() % 4);
            for (int e = 0; e < m; ++e) {
                int j = static_cast<int>(rng() % static_cast<unsigned>(i));
                if (std::find(pred[i].begin(), pred[i].end(), j) != pred[i].end()) continue;
                pred[i].push_back(j);
                succ[j].push_back(i);
            }
        }
        std::vector<std::atomic<int>> runs(N);
        std::vector<std::atomic<int>> promises(N);  // promises received so far
        std::atomic<int> early{0};
        Taskflow<int> tf(&tp, "dag");
        // Remote promises are counted where they land.
        auto am = comm.make_active_msg([&](int& to) {
            promises[to].fetch_add(1);
            tf.fulfill_promise(to);
        });
        tf.set_indegree(
              [&](int i) { return pred[i].empty() ? 1 : static_cast<int>(pred[i].size()); })
            .set_mapping([&](int i) { return thread_of[i] % threads; })
            .set_task([&](int i) {
                runs[i].fetch_add(1);
                if (promises[i].load() != static_cast<int>(pred[i].size())) early.fetch_add(1);
                for (int s : succ[i]) {
                    if (rank_of[s] == me) {
                        promises[s].fetch_add(1);
                        tf.fulfill_promise(s);
                    } else {
                        am->send(rank_of[s], s);
                    }
                }
            });
        for (int i = 0; i < N; ++i)
            if (pred[i].empty() && rank_of[i] == me) tf.fulfill_promise(i);
        tp.join();
        long mine = 0, wrong = 0;
        for (int i = 0; i < N; ++i) {
            if (rank_of[i] == me) {
                ++mine;
                if (runs[i].load() != 1) ++wrong;
            } else if (runs[i].load() != 0) {
                ++wrong;
            }
        }
        EXPECT_EQ(wrong, 0) << "seed " << seed;
        EXPECT_EQ(early.load(), 0) << "seed " << seed;
        EXPECT_EQ(allreduce_sum(mine), N);
    }
}

// A message bounces between ranks through handlers and tasks, with pauses during which
// every rank is idle while the message is in flight. join() must never return early.
TEST(Completion, AdversarialChainsNeverEndEarly) {
    Communicator comm;
    const int me = comm.rank(), n = comm.ranks();
    Threadpool tp(2, &comm);
    Taskflow<std::tuple<int, int>> relay(&tp, "relay");  // key: (round, hops)
    cascade::ActiveMsg<int, int>* bounce = nullptr;
    long finished = 0;
    bounce = comm.make_active_msg([&](int& round, int& hops) {
        if (hops == 0) {
            ++finished;
        } else if (hops % 3 == 0) {
            relay.fulfill_promise({round, hops});  // through a task
        } else {
            bounce->send((me + 1 + hops) % n, round, hops - 1);  // straight from the handler
        }
    });
    relay.set_task([&](std::tuple<int, int> k) {
        auto [round, hops] = k;
        if (hops % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
        bounce->send((me + hops) % n, round, hops - 1);
    });
    constexpr int rounds = 150;
    long failures = 0;
    for (int r = 0; r < rounds; ++r) {
        finished = 0;
        if (me == r % n) bounce->send((me + 1) % n, r, 5 + r % 23);
        tp.join();
        if (allreduce_sum(finished) != 1) ++failures;
        tp.start();
    }
    tp.join();
    EXPECT_EQ(failures, 0);
}

// The workers outlive join(), but destroying a pool that was joined (and not started again)
// is local: it must not begin another completion round that the other ranks, busy
// elsewhere, would never answer.
TEST(Completion, DestroyingAJoinedPoolIsLocal) {
    Communicator comm;
    auto tp = std::make_unique<Threadpool>(1, &comm);
    tp->join();
    if (comm.rank() == 0) tp.reset();
    MPI_Barrier(MPI_COMM_WORLD);
    tp.reset();
}

TEST(Completion, IdleRanksJoinPromptly) {
    Communicator comm;
    Threadpool tp(2, &comm);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
        tp.join();
        tp.start();
    }
    tp.join();
    double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 21;
    EXPECT_LT(per, 0.5) << "an empty join took " << per << " s";
}

TEST(Completion, SeveralTaskflowsAndMessagesPerPool) {
    Communicator comm;
    const int me = comm.rank(), n = comm.ranks();
    Threadpool tp(2, &comm);
    Taskflow<int> a(&tp, "a");
    Taskflow<std::tuple<int, int>> b(&tp, "b");
    std::atomic<long> b_runs{0};
    auto to_b = comm.make_active_msg([&](int& i, int& j) { b.fulfill_promise({i, j}); });
    auto to_a = comm.make_active_msg([&](int& i) { a.fulfill_promise(i); });
    a.set_task([&](int i) {
        for (int d = 0; d < n; ++d)
            to_b->send(d, i, me);
    });
    b.set_indegree([&](std::tuple<int, int>) { return 1; }).set_task([&](std::tuple<int, int> k) {
        b_runs.fetch_add(1);
        if (std::get<0>(k) < 20 && std::get<1>(k) == me)
            to_a->send((me + 1) % n, std::get<0>(k) + 20);
    });
    for (int i = 0; i < 20; ++i)
        a.fulfill_promise(i);
    tp.join();
    // 20 a-tasks per rank each reach all n ranks; the b-tasks keyed by their own rank send
    // one more a-task (i+20) to the next rank, which reaches all n ranks again.
    EXPECT_EQ(allreduce_sum(b_runs.load()), 2L * 20 * n * n);
}

// Back-to-back epochs, half of them ended by a caller polling the communicator itself: a
// rank that leaves an epoch first may send control messages of the next epoch to rank 0
// while rank 0 still completes its last sends. They must count in the next epoch (once they
// were dropped, and the next join hung).
TEST(Completion, BackToBackEpochsNeverHang) {
    Communicator comm;
    Threadpool tp(1, &comm, 0, "", false);
    for (int i = 0; i < 300; ++i) {
        tp.start();
        if (i % 2) {
            while (comm.poll(tp) != cascade::PollResult::done) {
            }
        }
        tp.join();
    }
    SUCCEED();
}

// An iterative code: each step every rank sends a halo to both neighbours of a ring, then
// joins. A rank that ran messages in the last two epochs holds its first COUNT of the next
// back until it ran as many: here both halos of the step (before, its first COUNT went as its
// task ended, before they ran, and a second one once they did). Each epoch ends only after
// every rank ran its halos, so the expectation is exact after two steps. The COUNTs sent are
// printed, not checked: about one per rank and epoch on a quiet machine (1.9 to 2.3 without
// the expectation), more when a rank is descheduled past the wait (a loaded machine,
// MPICH's busy polling with more ranks than cores). The rule itself:
// CompletionState.ExpectedMessagesHoldTheFirstCount.
TEST(Completion, HaloStepsExpectTheirMessages) {
    Communicator comm;
    const int me = comm.rank(), n = comm.ranks();
    if (n < 2) GTEST_SKIP() << "2 or more ranks";
    const int left = (me + n - 1) % n, right = (me + 1) % n;
    const std::uint64_t per_step = left == right ? 1 : 2;
    Threadpool tp(1, &comm);
    long received = 0;
    auto* halo = comm.make_active_msg([&](int&) { ++received; });
    Taskflow<int> step(&tp, "step");
    step.set_task([&](int k) {
        halo->send(left, k);
        if (right != left) halo->send(right, k);
    });
    constexpr int kSteps = 200, kWarmup = 2;
    std::uint64_t ctrl0 = 0;
    for (int s = 0; s < kSteps + kWarmup; ++s) {
        if (s == kWarmup) ctrl0 = comm.stats().control_messages_sent;
        if (s >= kWarmup) {
            ASSERT_EQ(cascade::detail::CommTestAccess::expected_messages(comm), per_step)
                << "step " << s;
        }
        step.fulfill_promise(s);
        tp.join();
        ASSERT_EQ(received, (s + 1) * static_cast<long>(per_step));
    }
    // Ranks other than 0 send only COUNTs here (no REQUEST at most 32 ranks, so no CONFIRM).
    const long counts =
        allreduce_sum(me == 0 ? 0L : static_cast<long>(comm.stats().control_messages_sent - ctrl0));
    if (me == 0 && n <= 32)
        std::printf("COUNTs per rank and epoch: %.2f\n",
                    static_cast<double>(counts) / (n - 1) / kSteps);
}
