// Broadcasts under mpiexec (1 to 16 ranks): every recipient exactly once for random subsets,
// small and large bodies in both shapes, priorities, detection of destination loops,
// completion with broadcasts in flight, broadcasts from handlers, buffer lifetime on inner
// nodes, and the errors for bad destination lists.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cascade/broadcast/detail/engine.hpp"
#include "cascade/broadcast/tree.hpp"
#include "cascade/cascade.hpp"
#include "mpi_test_util.hpp"

using cascade::Communicator;
using cascade::Taskflow;
using cascade::Threadpool;
using cascade::view;
using cascade_test::allreduce_sum;

namespace {

// The same random subset on every rank for a given trial.
std::vector<int> subset(int n, unsigned trial, int root, bool with_root) {
    std::mt19937 rng(trial * 7919u + 13u);
    std::vector<int> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    const int k = n == 1 ? 1 : 1 + static_cast<int>(rng() % static_cast<unsigned>(n));
    std::vector<int> out(all.begin(), all.begin() + k);
    auto it = std::find(out.begin(), out.end(), root);
    if (with_root && it == out.end()) out.push_back(root);
    if (!with_root && it != out.end()) out.erase(it);
    return out;
}

bool contains(const std::vector<int>& v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

double pattern(unsigned trial, std::size_t i) {
    return static_cast<double>(trial) * 1e6 + static_cast<double>(i % 100003);
}

}  // namespace

TEST(Broadcast, SmallEveryRecipientOnce) {
    Communicator comm;
    Threadpool tp(2, &comm);
    const int me = comm.rank(), n = comm.ranks();
    constexpr unsigned kTrials = 40;
    std::vector<int> got(kTrials, 0);
    std::atomic<int> bad{0};
    auto am = comm.make_active_msg(
        [&](unsigned& trial, int& root, std::vector<int>& data) {
            ++got[trial];
            if (data.size() != trial + 1 || data[trial] != root * 1000 + int(trial)) ++bad;
        },
        "small_bcast");
    Taskflow<unsigned> from_task(&tp, "root_task");
    from_task.set_task([&](unsigned t) {
        const int root = int(t) % n;
        std::vector<int> data(t + 1, 0);
        data[t] = root * 1000 + int(t);
        am->send(subset(n, t, root, t % 4 < 2), t, root, data);
    });
    for (unsigned t = 0; t < kTrials; ++t) {
        if (int(t) % n != me) continue;
        if (t % 2 == 0) {  // from the main thread
            std::vector<int> data(t + 1, 0);
            data[t] = me * 1000 + int(t);
            am->send(subset(n, t, me, t % 4 < 2), t, me, data);
        } else {  // from a task
            from_task.fulfill_promise(t);
        }
    }
    tp.join();
    for (unsigned t = 0; t < kTrials; ++t) {
        const int root = int(t) % n;
        EXPECT_EQ(got[t], contains(subset(n, t, root, t % 4 < 2), me) ? 1 : 0) << "trial " << t;
    }
    EXPECT_EQ(bad.load(), 0);
}

// Large bodies: sizes from 0 B to 64 MiB, both shapes, tiny pieces and chunks; where_to,
// on_arrival, on_forwarded once per recipient, on_sent once per broadcast; the buffer is
// overwritten in on_forwarded (reused), so a forward still reading it would corrupt a child.
TEST(Broadcast, LargeEveryRecipientOnce) {
    Communicator comm;
    Threadpool tp(2, &comm);
    const int me = comm.rank(), n = comm.ranks();
    struct Case {
        std::size_t elems;
        cascade::BroadcastShape shape;
        std::size_t piece;
        std::size_t chunk;
        std::size_t window = 256 << 10;  // pipelined: bytes in flight per child
    };
    std::vector<Case> cases;
    for (auto shape : {cascade::BroadcastShape::binomial, cascade::BroadcastShape::pipelined})
        for (std::size_t elems :
             {std::size_t(0), std::size_t(1), std::size_t(7), (std::size_t(1) << 17) + 3})
            cases.push_back({elems, shape, 0, 0});
    cases.push_back({std::size_t(1000), cascade::BroadcastShape::pipelined, 56, 24});  // tiny
    // One piece in flight per child (the window rounds down to one piece), and no limit.
    cases.push_back({std::size_t(1000), cascade::BroadcastShape::pipelined, 56, 24, 1});
    cases.push_back({std::size_t(1000), cascade::BroadcastShape::pipelined, 56, 0, 0});
    cases.push_back(
        {(std::size_t(1) << 17) + 3, cascade::BroadcastShape::pipelined, 65536, 0, 2 * 65536});
    cases.push_back({std::size_t(12345), cascade::BroadcastShape::binomial, 0, 1000});
    if (n <= 8) cases.push_back({std::size_t(8) << 20, cascade::BroadcastShape::automatic, 0, 0});
    unsigned trial = 0;
    for (const Case& c : cases) {
        comm.broadcasts().set_shape(c.shape);
        comm.broadcasts().set_piece(c.piece);
        comm.broadcasts().set_window(c.window);
        comm.set_large_chunk(c.chunk);
        for (int rep = 0; rep < 3; ++rep, ++trial) {
            const int root = int(trial) % n;
            const bool with_root = rep == 1;
            const std::vector<int> dests = subset(n, trial, root, with_root);
            std::vector<double> src(c.elems);
            for (std::size_t i = 0; i < c.elems; ++i)
                src[i] = pattern(trial, i);
            std::unique_ptr<double[]> buf;
            int wheres = 0, arrivals = 0, released = 0, sent = 0, bad = 0;
            auto am = comm.make_large_active_msg(
                [&](unsigned& t, std::size_t& count) {
                    ++arrivals;
                    if (released) ++bad;
                    for (std::size_t i = 0; i < count; ++i)
                        if (buf[i] != pattern(t, i)) {
                            ++bad;
                            break;
                        }
                },
                [&](unsigned&, std::size_t& count) {
                    ++wheres;
                    buf.reset(new double[count + 1]);
                    return buf.get();
                },
                [&](unsigned&, std::size_t&) { ++sent; }, "large_bcast");
            am->set_on_forwarded([&](unsigned&, std::size_t& count) {
                ++released;
                if (arrivals != 1) ++bad;
                std::fill(buf.get(), buf.get() + count, -1.0);  // reuse: forwarding is done
            });
            if (me == root)
                am->send_large(dests, view<double>(src.data(), c.elems), trial, c.elems);
            tp.join();
            const int expect = contains(dests, me) ? 1 : 0;
            EXPECT_EQ(wheres, expect) << "elems " << c.elems << " trial " << trial;
            EXPECT_EQ(arrivals, expect) << "elems " << c.elems << " trial " << trial;
            EXPECT_EQ(released, expect) << "elems " << c.elems << " trial " << trial;
            EXPECT_EQ(bad, 0) << "elems " << c.elems << " trial " << trial;
            EXPECT_EQ(sent, me == root ? 1 : 0) << "elems " << c.elems << " trial " << trial;
        }
    }
    comm.set_large_chunk(0);
}

// 64 MiB to every other rank, pipelined and binomial.
TEST(Broadcast, Large64MiB) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    const std::size_t elems = (std::size_t(64) << 20) / sizeof(double);
    std::vector<double> src;
    if (me == 0) {
        src.resize(elems);
        for (std::size_t i = 0; i < elems; ++i)
            src[i] = pattern(5, i);
    }
    std::vector<double> dst;
    int ok = 0;
    auto am = comm.make_large_active_msg(
        [&](int&) {
            bool good = true;
            for (std::size_t i = 0; i < elems && good; i += 4099)
                good = dst[i] == pattern(5, i);
            good = good && dst[elems - 1] == pattern(5, elems - 1);
            ok += good;
        },
        [&](int&) {
            dst.assign(elems, 0.0);
            return dst.data();
        },
        [](int&) {}, "bcast_64mib");
    std::vector<int> others;
    for (int r = 1; r < n; ++r)
        others.push_back(r);
    for (auto shape : {cascade::BroadcastShape::pipelined, cascade::BroadcastShape::binomial}) {
        comm.broadcasts().set_shape(shape);
        if (me == 0) am->send_large(others, view<double>(src.data(), elems), 0);
        tp.join();
    }
    EXPECT_EQ(ok, me == 0 ? 0 : 2);
}

// The runtime follows the tree the builder makes: with distinct priorities (no ties, so no
// rotation), each rank forwards as many messages as its position in the tree says.
TEST(Broadcast, PrioritiesPlaceRecipients) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    int got = 0;
    auto am = comm.make_active_msg([&](int&) { ++got; }, "prio_bcast");
    std::vector<int> dests;
    std::vector<double> prio;
    for (int r = 1; r < n; ++r) {
        dests.push_back(r);
        prio.push_back(double((r * 5) % n) + 0.5 * r);  // distinct, scrambled
    }
    const auto before = comm.broadcasts().stats();
    if (me == 0) am->send(dests, prio, 42);
    tp.join();
    const auto after = comm.broadcasts().stats();
    EXPECT_EQ(got, me == 0 ? 0 : 1);
    if (n < 3) return;
    // Expected forwards from the pure builder.
    std::vector<cascade::broadcast::Recipient> list;
    cascade::broadcast::arrange(cascade::broadcast::Shape::binomial, dests, prio, 0, list);
    std::map<int, std::uint64_t> fwd;
    struct Walk {
        std::map<int, std::uint64_t>& fwd;
        void operator()(int node, std::vector<cascade::broadcast::Recipient> l, bool root) {
            std::vector<cascade::broadcast::Child> ch;
            cascade::broadcast::children(cascade::broadcast::Shape::binomial, l.size(), ch);
            if (!root) fwd[node] += ch.size();
            for (auto& c : ch)
                (*this)(l[c.at].rank,
                        std::vector<cascade::broadcast::Recipient>(
                            l.begin() + long(c.at) + 1, l.begin() + long(c.at + 1 + c.count)),
                        false);
        }
    } walk{fwd};
    walk(0, list, true);
    EXPECT_EQ(after.forwarded - before.forwarded, me == 0 ? 0 : fwd[me]);
    // The highest priority is the root's first child.
    const int top = dests[std::size_t(std::max_element(prio.begin(), prio.end()) - prio.begin())];
    std::vector<cascade::broadcast::Child> ch;
    cascade::broadcast::children(cascade::broadcast::Shape::binomial, list.size(), ch);
    EXPECT_EQ(list[ch.front().at].rank, top);
    if (me == 0) {
        EXPECT_EQ(after.root_messages - before.root_messages, ch.size());
    }
}

// A task looping over destinations with the same arguments becomes one broadcast; different
// arguments stay point-to-point; detection off keeps every send point-to-point.
TEST(Broadcast, DetectionMergesDestinationLoops) {
    Communicator comm;
    Threadpool tp(2, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> same{0}, diff{0}, big{0};
    auto am = comm.make_active_msg(
        [&](int& v) {
            if (v == 77)
                ++same;
            else
                ++diff;
        },
        "loop_am");
    std::vector<double> body(1000, 3.0), other(1000, 4.0), rx(1000);
    auto lam = comm.make_large_active_msg([&](int&) { ++big; }, [&](int&) { return rx.data(); },
                                          [](int&) {}, "loop_large");
    Taskflow<int> tf(&tp, "looper");
    tf.set_task([&](int key) {
        const int mode = key % 4;
        for (int d = 0; d < n; ++d) {
            if (d == me) continue;
            if (mode == 0) am->send(d, 77);  // same bytes: merged
            if (mode == 1) am->send(d, d);   // different bytes: left alone
            if (mode == 2) lam->send_large(d, view<double>(body.data(), body.size()), 1);
            if (mode == 3)  // different bodies: left alone
                lam->send_large(d,
                                d % 2 ? view<double>(body.data(), body.size())
                                      : view<double>(other.data(), other.size()),
                                1);
        }
    });
    for (int detect = 1; detect >= 0; --detect) {
        comm.broadcasts().set_detection(detect != 0);
        for (int mode = 0; mode < 4; ++mode) {
            same = diff = big = 0;
            const auto before = comm.broadcasts().stats();
            if (me == 0) tf.fulfill_promise(mode + 4 * detect);  // each key once
            tp.join();
            const auto after = comm.broadcasts().stats();
            const std::uint64_t det = after.detected - before.detected;
            const std::uint64_t sends = after.detected_sends - before.detected_sends;
            if (me == 0) {
                const std::uint64_t others = std::uint64_t(n - 1);
                // mode 3: bodies alternate, so ranks with the same body may still merge.
                const std::uint64_t odd = std::uint64_t(n / 2), even = others - odd;
                std::uint64_t expect_det = 0, expect_sends = 0;
                if (detect && (mode == 0 || mode == 2) && others >= 2) {
                    expect_det = 1;
                    expect_sends = others;
                }
                if (detect && mode == 3) {
                    expect_det = (odd >= 2) + (even >= 2);
                    expect_sends = (odd >= 2 ? odd : 0) + (even >= 2 ? even : 0);
                }
                EXPECT_EQ(det, expect_det) << "mode " << mode << " detect " << detect;
                EXPECT_EQ(sends, expect_sends) << "mode " << mode << " detect " << detect;
                if (expect_det == 1 && mode == 0) {
                    EXPECT_EQ(after.root_messages - before.root_messages,
                              std::uint64_t(std::bit_width(unsigned(others))));
                }
            }
            const int expect = me == 0 ? 0 : 1;
            EXPECT_EQ(same.load(), mode == 0 ? expect : 0);
            EXPECT_EQ(diff.load(), mode == 1 ? expect : 0);
            EXPECT_EQ(big.load(), mode >= 2 ? expect : 0);
        }
    }
}

// Detection holds a task's sends until it ends. A task that sends many messages to one rank
// (300,000 distinct ones, then X, Y, X repeated) gets them all, in the order it sent them:
// equal sends to one rank only are no broadcast and are not moved together, and grouping
// does not compare every pair of sends (that took minutes for this task).
TEST(Broadcast, DetectionKeepsOrderAndScales) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    const int next = (me + 1) % n;
    constexpr int kDistinct = 300000;
    long got = 0, wrong = 0;
    int expect = 0;
    auto am = comm.make_active_msg(
        [&](int& v) {
            // 0..kDistinct-1, then -1, -2, -1, -2, ... (X, Y, X, Y)
            const int want = expect < kDistinct ? expect : -1 - ((expect - kDistinct) % 2);
            if (v != want) ++wrong;
            ++expect;
            ++got;
        },
        "order_am");
    ASSERT_TRUE(comm.broadcasts().detection());
    tp.insert([&] {
        for (int i = 0; i < kDistinct; ++i)
            am->send(next, i);
        for (int i = 0; i < 100; ++i)
            am->send(next, -1 - (i % 2));
    });
    tp.join();
    EXPECT_EQ(got, kDistinct + 100);
    EXPECT_EQ(wrong, 0) << "rank " << me;
}

// Arguments of more than Engine::kHoldMax bytes are not held (copying them aside and then
// into the outbox costs more than a tree saves): the same big block sent to every rank makes
// no broadcast, and the sends held before it leave first, so each rank gets rank 0's
// messages in the order they were sent (small, big, small).
TEST(Broadcast, DetectionLeavesBigArgumentsAloneInOrder) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    constexpr std::size_t kBig = cascade::broadcast::detail::Engine::kHoldMax + 1;
    std::vector<char> big(kBig);
    for (std::size_t i = 0; i < kBig; ++i)
        big[i] = static_cast<char>(i * 7 + 3);
    int expect = 0, wrong = 0;
    auto am = comm.make_active_msg(
        [&](int& seq, view<char>& v) {
            // seq 0 and 2: 4 bytes naming this rank (distinct per rank: never merged); seq 1:
            // the same big block for every rank.
            int to = -1;
            if (v.size() == sizeof to) std::memcpy(&to, v.data(), sizeof to);
            const bool ok =
                seq == expect &&
                (seq == 1 ? v.size() == kBig && std::memcmp(v.data(), big.data(), kBig) == 0
                          : to == me);
            if (!ok) ++wrong;
            ++expect;
        },
        "big_args");
    ASSERT_TRUE(comm.broadcasts().detection());
    const auto before = comm.broadcasts().stats();
    if (me == 0)
        tp.insert([&] {
            for (int d = 1; d < n; ++d)
                am->send(d, 0, view<char>(reinterpret_cast<char*>(&d), sizeof d));
            for (int d = 1; d < n; ++d)
                am->send(d, 1, view<char>(big.data(), big.size()));
            for (int d = 1; d < n; ++d)
                am->send(d, 2, view<char>(reinterpret_cast<char*>(&d), sizeof d));
        });
    tp.join();
    const auto after = comm.broadcasts().stats();
    EXPECT_EQ(after.detected - before.detected, 0u);
    EXPECT_EQ(wrong, 0) << "rank " << me;
    EXPECT_EQ(expect, me == 0 ? 0 : 3) << "rank " << me;
}

// Completion never ends early: inner nodes sleep in their handlers (after their forwards are
// queued) and in where_to, while other ranks are idle; every join must find every message run.
TEST(Broadcast, CompletionWaitsForTrees) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::mt19937 rng(unsigned(me) * 31u + 1u);
    int small = 0, large = 0;
    std::vector<char> rx(1 << 16);
    auto am = comm.make_active_msg(
        [&](int&) {
            ++small;
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        },
        "slow_small");
    auto lam = comm.make_large_active_msg(
        [&](int&) {
            ++large;
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        },
        [&](int&) {
            std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
            return rx.data();
        },
        [](int&) {}, "slow_large");
    std::vector<char> tx(1 << 16, 'x');
    comm.broadcasts().set_piece(4096);
    comm.broadcasts().set_shape(cascade::BroadcastShape::pipelined);
    for (int epoch = 0; epoch < 20; ++epoch) {
        const int root = epoch % n;
        std::vector<int> all(static_cast<std::size_t>(n));
        std::iota(all.begin(), all.end(), 0);
        if (me == root) {
            am->send(all, epoch);
            lam->send_large(all, view<char>(tx.data(), tx.size()), epoch);
        }
        tp.join();
        ASSERT_EQ(small, epoch + 1) << "epoch " << epoch;
        ASSERT_EQ(large, epoch + 1) << "epoch " << epoch;
        MPI_Barrier(MPI_COMM_WORLD);  // nobody starts the next epoch before all checked
    }
}

// A handler broadcasts further: rank 0 pings the last rank, whose handler broadcasts to all.
TEST(Broadcast, FromInsideAHandler) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    int got = 0;
    std::vector<int> all(static_cast<std::size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    auto second = comm.make_active_msg([&](int& v) { got += v; }, "second");
    auto first = comm.make_active_msg([&](int& v) { second->send(all, v + 1); }, "first");
    if (me == 0) first->send(n - 1, 4);
    tp.join();
    EXPECT_EQ(got, 5);
    EXPECT_EQ(allreduce_sum(got), 5L * n);
}

TEST(Broadcast, BadDestinationListsNameTheMessage) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int n = comm.ranks();
    auto am = comm.make_active_msg([](int&) {}, "named_am");
    std::vector<double> body(4);
    auto lam = comm.make_large_active_msg([](int&) {}, [&](int&) { return body.data(); },
                                          [](int&) {}, "named_large");
    auto message_of = [](auto&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::vector<int> dup{0, 0};
    const std::vector<int> out{0, n};
    std::string m = message_of([&] { am->send(dup, 1); });
    EXPECT_NE(m.find("named_am"), std::string::npos) << m;
    EXPECT_NE(m.find("twice"), std::string::npos) << m;
    m = message_of([&] { am->send(out, 1); });
    EXPECT_NE(m.find("named_am"), std::string::npos) << m;
    EXPECT_NE(m.find("outside"), std::string::npos) << m;
    m = message_of([&] { lam->send_large(dup, view<double>(body.data(), 4), 1); });
    EXPECT_NE(m.find("named_large"), std::string::npos) << m;
    m = message_of([&] { lam->send_large(std::vector<int>{-1}, view<double>(body.data(), 4), 1); });
    EXPECT_NE(m.find("named_large"), std::string::npos) << m;
    m = message_of([&] { am->send(std::vector<int>{0}, std::vector<double>{1, 2}, 1); });
    EXPECT_NE(m.find("priorities"), std::string::npos) << m;
    tp.join();
}
