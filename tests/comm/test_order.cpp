// Per-sender order and the sends held for broadcast detection, under mpiexec: what a thread
// holds leaves before what it sends unheld; a tree that reaches a rank through an inner node
// is not overtaken by a later direct send; held bytes count toward the back-pressure window;
// a task waiting near its stack's end releases what it holds; broadcasts sent while another
// is being sent on the same thread (back-pressure's progress runs handlers) reach everyone
// once; arguments a receiver would refuse are refused by the sender.
#include <gtest/gtest.h>
#include <mpi.h>
#include <pthread.h>

#include <alloca.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"
#include "mpi_test_util.hpp"

using cascade::Communicator;
using cascade::CommunicatorOptions;
using cascade::Threadpool;
using cascade_test::allreduce_sum;
using cascade_test::world_size;
using Clock = std::chrono::steady_clock;

namespace {

// Whether the values recorded are 0, 1, 2, ... in that order.
bool in_order(const std::vector<int>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != static_cast<int>(i)) return false;
    return true;
}

}  // namespace

// A task alternates held sends (detection on) with sends that are never held: an AM with
// detection off, and send_now. The receiver sees them in the order they were made.
TEST(Order, HeldSendsLeaveBeforeTheSameThreadsUnheldOnes) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::mutex m;
    std::vector<int> seen;
    auto record = [&](int& x) {
        std::lock_guard g(m);
        seen.push_back(x);
    };
    auto held = comm.make_active_msg(record, "held");
    auto unheld = comm.make_active_msg(record, "unheld");
    unheld->set_broadcast_detection(false);
    constexpr int kRounds = 200;
    const int to = (me + 1) % n;
    tp.insert([&] {
        int k = 0;
        for (int i = 0; i < kRounds; ++i) {
            held->send(to, k++);
            unheld->send(to, k++);
            held->send(to, k++);
            held->send_now(to, k++);
        }
    });
    tp.join();
    EXPECT_EQ(seen.size(), std::size_t(4 * kRounds));
    EXPECT_TRUE(in_order(seen)) << "rank " << me << " received out of order";
}

// Rank 0 sends x to ranks 2, 3 and 1 (merged into one tree: 3 forwards to 1), then y to
// rank 1 alone, while ranks 2 and 3 are busy: rank 1 still runs x before y.
TEST(Order, ATreeThroughASlowInnerNodeIsNotOvertakenByALaterDirectSend) {
    if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank();
    std::mutex m;
    std::vector<int> seen;
    auto stall = comm.make_active_msg(
        [](int& ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, "stall");
    stall->set_broadcast_detection(false);
    auto msg = comm.make_active_msg(
        [&](int& v) {
            std::lock_guard g(m);
            seen.push_back(v);
        },
        "msg");
    if (me == 0) {
        tp.insert([&] {
            stall->send(2, 300);
            stall->send(3, 300);
            for (int d : {2, 3, 1})
                msg->send(d, 0);  // x: one class of three sends, a tree
            msg->send(1, 1);      // y
        });
    }
    tp.join();
    const auto c = comm.broadcasts().stats();
    if (me == 0) {
        EXPECT_EQ(c.detected, 1u) << "x was not merged into a tree";
    }
    if (me == 3) {
        EXPECT_EQ(c.forwarded, 1u) << "rank 3 was not the inner node reaching rank 1";
    }
    if (me == 1) {
        ASSERT_EQ(seen.size(), 2u);
        EXPECT_EQ(seen[0], 0) << "y overtook x, which came through rank 3";
        EXPECT_EQ(seen[1], 1);
    }
}

// A task sends many distinct messages round-robin to two ranks (none merges), then waits for
// the first receiver to say it got some: held sends past the back-pressure window leave
// while the task runs, so the wait ends.
TEST(Order, HeldSendsPastTheWindowLeaveWhileTheTaskRuns) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    CommunicatorOptions o;
    o.max_bytes_in_flight = 64 << 10;
    Communicator comm(MPI_COMM_WORLD, o);
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<bool> heard{false};
    std::atomic<long> got{0};
    auto ack = comm.make_active_msg([&](int&) { heard = true; }, "ack");
    auto data = comm.make_active_msg(
        [&](int& k) {
            if (got.fetch_add(1) + 1 == 1000) ack->send_now(0, k);
        },
        "data");
    constexpr int kSends = 100000;
    bool waited_out = false;
    if (me == 0) {
        tp.insert([&] {
            for (int i = 0; i < kSends; ++i)
                data->send(i % 2 == 0 ? 1 : (n > 2 ? 2 : 0), i);  // two ranks in turn
            const auto until = Clock::now() + std::chrono::seconds(20);
            while (!heard && Clock::now() < until)
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            waited_out = !heard;
        });
    }
    tp.join();
    EXPECT_FALSE(waited_out) << "the held sends did not leave before the task ended";
    EXPECT_EQ(allreduce_sum(got.load()), kSends);
}

// A task that has used its stack down to the last few hundred KiB waits for a reply to a
// message it held: the wait releases the held message although no other task may nest there.
TEST(Order, ATaskWaitingAtTheEndOfItsStackReleasesWhatItHeld) {
    if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank();
    std::atomic<bool> replied{false};
    auto pong = comm.make_active_msg([&](int&) { replied = true; }, "pong");
    auto ping = comm.make_active_msg([&](int& v) { pong->send(0, v); }, "ping");
    bool waited_out = false;
    if (me == 0) {
        tp.insert([&] {
            pthread_attr_t attr;
            ASSERT_EQ(pthread_getattr_np(pthread_self(), &attr), 0);
            void* low = nullptr;
            std::size_t size = 0;
            pthread_attr_getstack(&attr, &low, &size);
            pthread_attr_destroy(&attr);
            const char* sp = static_cast<const char*>(__builtin_frame_address(0));
            const std::size_t left = static_cast<std::size_t>(sp - static_cast<const char*>(low));
            const std::size_t keep = 256 << 10;
            ASSERT_GT(left, keep + (64 << 10));
            volatile char* eat = static_cast<char*>(alloca(left - keep));
            eat[0] = 1;
            ping->send(1, 7);  // held: detection is on
            const auto until = Clock::now() + std::chrono::seconds(20);
            while (!replied && Clock::now() < until)
                tp.run_one_task();  // how a waiting task lets the pool go on
            waited_out = !replied;
        });
    }
    tp.join();
    EXPECT_FALSE(waited_out) << "the held ping never left";
}

// Broadcasts from `senders` threads (the main thread when 0, else that many pool tasks),
// with back-pressure at 256 bytes so that sends wait for room; handlers echo every other
// message of one root to everyone but themselves, so a handler's broadcast fences ranks
// while a tree of the outer one is half sent. Every message arrives exactly once, and the run
// ends (a tree that waited for room between its children's headers, or queued a child's header
// behind a fence raised after the tree was routed, could wait forever for the other tree).
void broadcasts_meeting_back_pressure(int senders, int rounds, int per_sender) {
    for (int round = 0; round < rounds; ++round) {
        CommunicatorOptions o;
        o.max_bytes_in_flight = 256;
        Communicator comm(MPI_COMM_WORLD, o);
        Threadpool tp(std::max(senders, 1), &comm);
        const int me = comm.rank(), n = comm.ranks();
        std::vector<int> others;
        for (int r = 0; r < n; ++r)
            if (r != me) others.push_back(r);
        const int per_rank = per_sender * std::max(senders, 1);
        std::vector<std::atomic<int>> from_main(static_cast<std::size_t>(n) * per_rank);
        std::vector<std::atomic<int>> echoes(static_cast<std::size_t>(n) * per_rank);
        auto at = [&](int r, int k) {
            return static_cast<std::size_t>(r) * static_cast<std::size_t>(per_rank) +
                   static_cast<std::size_t>(k);
        };
        auto echo = comm.make_active_msg(
            [&](int& root, int& k, std::vector<char>&) { echoes[at(root, k)]++; }, "echo");
        auto main_am = comm.make_active_msg(
            [&](int& root, int& k, std::vector<char>& pad) {
                from_main[at(root, k)]++;
                // Echoed by its receiver to everyone but itself, with a list of another
                // length than the outer broadcast's.
                if (k % 2 == 0 && root == (me + n - 1) % n) echo->send(others, me, k, pad);
            },
            "main");
        auto send_some = [&](int first) {
            std::vector<char> pad;
            for (int k = first; k < first + per_sender; ++k) {
                pad.assign(600 + static_cast<std::size_t>(k % 7) * 40, 'p');
                main_am->send(others, me, k, pad);
            }
        };
        if (senders == 0) send_some(0);
        for (int s = 0; s < senders; ++s)
            tp.insert([&, s] { send_some(s * per_sender); });
        tp.join();
        long bad = 0;
        for (int r = 0; r < n; ++r)
            for (int k = 0; k < per_rank; ++k) {
                // Rank r's message k is echoed by rank r+1, to everyone but r+1.
                const int echoer = (r + 1) % n;
                const int want_echo = (n > 1 && k % 2 == 0 && echoer != me) ? 1 : 0;
                bad += from_main[at(r, k)] != (r == me ? 0 : 1);
                bad += echoes[at(echoer, k)] != want_echo;
            }
        ASSERT_EQ(bad, 0) << "rank " << me << ", round " << round
                          << ": broadcasts lost or delivered twice";
    }
}

// The main thread's sends run progress(), whose handlers broadcast too, on the same thread,
// in the middle of the outer broadcast.
TEST(Order, BroadcastsFromHandlersRunByBackPressureReachEveryoneOnce) {
    broadcasts_meeting_back_pressure(0, 4, 1000);
}

// Two workers' tasks broadcast at once while the communication thread's handlers do.
TEST(Order, BroadcastsFromTasksMeetingBackPressureReachEveryoneOnce) {
    broadcasts_meeting_back_pressure(2, 3, 300);
}

// Another thread fences a rank, and queues a message behind that fence, between the moment a
// tree's route found the rank free and the moment it fences it (the fence hook does both
// there). A second fence would count the held message in the rank's `after` and wait for the
// rank's acknowledgement, which waits for that message: the rank is sent to directly instead,
// and every rank runs rank 0's messages in the order they were queued.
TEST(Order, ARankFencedWhileATreeIsRoutedIsSentToDirectly) {
    if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank();
    std::vector<int> got;  // the k of rank 0's messages, in the order they ran here
    auto am = comm.make_active_msg(
        [&](int& k) {
            if (cascade::detail::tls_frame_source == 0) got.push_back(k);
        },
        "numbered");
    // Rank 3 has the lowest priority: the last slot, reached through rank 1.
    const std::vector<int> to = {1, 2, 3};
    const std::vector<double> prio = {3.0, 2.0, 1.0};
    bool hooked = false;
    if (me == 0) {
        cascade::detail::CommTestAccess::set_fence_hook(comm, [&](int dest) {
            if (hooked || dest != 3) return;
            hooked = true;
            am->send(to, prio, 1);  // fences rank 3
            am->send_now(3, 2);     // held behind that fence
        });
        am->send(to, prio, 3);
        cascade::detail::CommTestAccess::set_fence_hook(comm, nullptr);
    }
    tp.join();
    if (me == 0) {
        EXPECT_TRUE(hooked) << "the tree never fenced rank 3";
    }
    std::vector<int> want;
    if (me >= 1 && me <= 3) want = me == 3 ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 3};
    EXPECT_EQ(got, want) << "rank " << me;
}

// An active message whose arguments fill a message but for its frame header: the sender
// refuses it with a clear error (the receiver would refuse the frame as malformed).
TEST(Order, ArgumentsTooBigForOneMessageAreRefusedWhenSent) {
    Communicator comm;
    Threadpool tp(1, &comm);
    auto big = comm.make_active_msg([](std::vector<char>&) {}, "big");
    if (comm.rank() == 0) {
        // A vector travels as its 8-byte length and its bytes: 2^30 - 8 bytes in all.
        std::vector<char> v((std::size_t(1) << 30) - 16);
        try {
            big->send(0, v);
            ADD_FAILURE() << "a " << v.size() << "-byte argument was accepted";
        } catch (const cascade::UsageError& e) {
            EXPECT_NE(std::string(e.what()).find("large active message"), std::string::npos)
                << e.what();
        }
    }
    tp.join();
}

// Rank 0 broadcasts a 128 KiB body to ranks 1, 2 and 3 (rank 2 forwards to 3, so rank 1's
// body waits for rank 2's acknowledgement, and rank 2 is busy for a second). Meanwhile every
// other body tag has been used (the test skips them) and rank 0 sends rank 1 a second body
// of the same size: it must not take the waiting stream's tag, or each body lands in the
// other's buffer.
TEST(Order, ABodyWaitingPastAFullTagCycleGetsItsOwnBytes) {
    if (world_size() < 4) GTEST_SKIP() << "needs 4 ranks";
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank();
    constexpr std::size_t kBytes = 128 << 10;
    std::vector<char> first(kBytes, 'A'), second(kBytes, 'B');
    std::vector<char> got1(kBytes, 0), got2(kBytes, 0);
    std::atomic<int> arrived{0};
    auto stall = comm.make_active_msg(
        [](int& ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, "stall");
    stall->set_broadcast_detection(false);
    auto body = comm.make_large_active_msg(
        [&](int&) { ++arrived; },
        [&](int& which) { return which == 1 ? got1.data() : got2.data(); }, [](int&) {}, "body");
    if (me == 0) {
        stall->send_now(2, 1000);
        const std::vector<int> to = {1, 2, 3};
        body->send_large(to, cascade::view<char>(first.data(), first.size()), 1);
        // Two tags were taken (ranks 2 and 1): the next look starts at rank 1's again.
        cascade::detail::CommTestAccess::skip_body_tags(comm, 29936 - 1);
        const std::vector<int> again = {1, 0};
        body->send_large(again, cascade::view<char>(second.data(), second.size()), 2);
    }
    tp.join();
    if (me == 1) {
        EXPECT_EQ(arrived.load(), 2);
        EXPECT_EQ(std::count(got1.begin(), got1.end(), 'A'), long(kBytes)) << "first body";
        EXPECT_EQ(std::count(got2.begin(), got2.end(), 'B'), long(kBytes)) << "second body";
    }
}
