// Back-pressure (CommunicatorOptions::max_bytes_in_flight) under mpiexec: a sender that
// outpaces a slow receiver waits instead of queueing without limit, and nothing is lost or
// reordered on the way.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "mpi_test_util.hpp"

using cascade::Communicator;
using cascade::CommunicatorOptions;
using cascade::Threadpool;
using cascade::view;

using cascade_test::allreduce_sum;

namespace {
constexpr std::size_t kCap = std::size_t(64) << 10;
}

// Each rank queues 2 MB of small messages to the next one from the main thread before
// join(), into a handler that takes 20 us per message: the bytes queued or in flight to that
// rank never pass the limit by more than one message.
TEST(BackPressure, SmallMessagesWaitForTheReceiver) {
    Communicator comm(MPI_COMM_WORLD, CommunicatorOptions{.max_bytes_in_flight = kCap});
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    constexpr int kMessages = 2000;
    constexpr std::size_t kBytes = 1000;
    long received = 0, wrong = 0;
    int expect = 0;
    auto am = comm.make_active_msg(
        [&](int& from, int& i, std::vector<char>& v) {
            std::this_thread::sleep_for(std::chrono::microseconds(20));
            if (from != prev || i != expect++ || v.size() != kBytes ||
                v.front() != static_cast<char>(i) || v.back() != static_cast<char>(i))
                ++wrong;
            ++received;
        },
        "bp_small");
    std::size_t most = 0;
    for (int i = 0; i < kMessages; ++i) {
        am->send(next, me, i, std::vector<char>(kBytes, static_cast<char>(i)));
        most = std::max(most, comm.bytes_in_flight(next));
    }
    tp.join();
    EXPECT_LE(most, kCap + 2 * kBytes) << "rank " << me;
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(allreduce_sum(received), long(n) * kMessages);
}

// The main thread seeds 40,000 tasks, five times the backlog that makes it wait for the
// worker, and each task sends 1000 bytes to the next rank: the worker soon waits for room,
// which only the main thread (the communication thread) makes. While it waits for the worker
// it drives MPI, so messages move (and arrive here) before the seeding loop ends; a main
// thread that only napped would run no handler before join().
TEST(BackPressure, AThreadSeedingTasksDrivesMPIWhileItWaitsForTheWorkers) {
    Communicator comm(MPI_COMM_WORLD, CommunicatorOptions{.max_bytes_in_flight = kCap});
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    const int next = (me + 1) % n;
    constexpr int kTasks = 40000;
    constexpr std::size_t kBytes = 1000;
    std::atomic<long> received{0};
    auto am = comm.make_active_msg(
        [&](std::vector<char>& v) {
            if (v.size() == kBytes) received.fetch_add(1, std::memory_order_relaxed);
        },
        "bp_seeded");
    cascade::Taskflow<int> tf(&tp, "seeded");
    tf.set_indegree([](int) { return 1; }).set_mapping([](int) { return 0; }).set_task([&](int) {
        am->send(next, std::vector<char>(kBytes, 'x'));
    });
    for (int k = 0; k < kTasks; ++k)
        tf.fulfill_promise(k);
    const long while_seeding = received.load();
    tp.join();
    EXPECT_EQ(allreduce_sum(received.load()), long(n) * kTasks);
    EXPECT_GT(tp.stats().seeding_waits, 0u) << "rank " << me;
    EXPECT_GT(while_seeding, 0) << "rank " << me << ": no message handled while seeding";
}

// Each rank sends 32 bodies of 256 KiB to the next one from the main thread before join(),
// into an on_arrival that takes 2 ms: after every send, the bodies queued or in flight to
// that rank are at most the limit plus one body. (What the receiver holds at once also
// depends on when its MPI completes the transfers: 1.5-2 MiB here on a quiet machine, up to
// 7 MiB when other jobs load the cores; it is printed.)
TEST(BackPressure, LargeBodiesWaitForTheReceiver) {
    constexpr std::size_t kCapLarge = std::size_t(1) << 20, kBody = std::size_t(256) << 10;
    Communicator comm(MPI_COMM_WORLD, CommunicatorOptions{.max_bytes_in_flight = kCapLarge});
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    const int next = (me + 1) % n;
    constexpr int kBodies = 32;
    std::vector<std::vector<char>> sent(kBodies);
    for (int i = 0; i < kBodies; ++i)
        sent[i].assign(kBody, static_cast<char>(i + 1));
    std::vector<std::unique_ptr<char[]>> buffers(kBodies);
    std::size_t held = 0, most = 0;
    long arrived = 0, wrong = 0, sent_done = 0;
    auto lam = comm.make_large_active_msg(
        [&](int& i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            if (buffers[i][0] != static_cast<char>(i + 1) ||
                buffers[i][kBody - 1] != static_cast<char>(i + 1))
                ++wrong;
            buffers[i].reset();
            held -= kBody;
            ++arrived;
        },
        [&](int& i) {
            buffers[i].reset(new char[kBody]);
            held += kBody;
            most = std::max(most, held);
            return buffers[i].get();
        },
        [&](int&) { ++sent_done; }, "bp_large");
    std::size_t most_sent = 0;
    for (int i = 0; i < kBodies; ++i) {
        lam->send_large(next, view<char>(sent[i].data(), kBody), i);
        most_sent = std::max(most_sent, comm.body_bytes_in_flight(next));
    }
    tp.join();
    EXPECT_LE(most_sent, kCapLarge + kBody) << "rank " << me;
    std::printf(
        "rank %d: at most %zu KiB of bodies queued or in flight, %zu KiB held by the "
        "receiver\n",
        me, most_sent >> 10, most >> 10);
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(arrived, kBodies);
    EXPECT_EQ(sent_done, kBodies);
}

// Bursts of 8-byte messages to the next rank, each followed by a join (one epoch per burst).
struct Bursts {
    static constexpr long kMessages = 400000;  // 8-byte arguments, 24 bytes a frame
    Communicator comm;
    Threadpool tp{1, &comm};
    const int me = comm.rank(), n = comm.ranks();
    const int next = (me + 1) % n;
    long received = 0;
    cascade::ActiveMsg<std::uint64_t>* am =
        comm.make_active_msg([this](std::uint64_t& v) { received += v == 7 ? 1 : 0; }, "burst");
    void burst(long m) {
        for (long i = 0; i < m; ++i)
            am->send(next, std::uint64_t(7));
        tp.join();
    }
    // Three full bursts (three epochs); returns the bytes kept after them.
    std::size_t kept_after_big_bursts() {
        for (int step = 0; step < 3; ++step)
            burst(kMessages);
        return comm.stats().kept_buffer_bytes;
    }
};

// A burst of frames bigger than the spare buffers (here about 10 MB to the next rank at every
// step) keeps its buffers while the bursts go on, so an iterative code does not map them
// again at each step; two steps without one give them back.
TEST(Buffers, BurstBuffersAreKeptWhileUsedAndReleasedWhenIdle) {
    Bursts b;
    constexpr long kMessages = Bursts::kMessages;
    const std::size_t busy = b.kept_after_big_bursts();
    EXPECT_EQ(b.received, 3 * kMessages);
    EXPECT_GE(busy, std::size_t(kMessages) * 16) << "rank " << b.me << " keeps " << busy << " B";
    for (int step = 0; step < 3; ++step)
        b.tp.join();  // epochs without bursts
    const std::size_t idle = b.comm.stats().kept_buffer_bytes;
    // 512 KiB of spares, a receive buffer of 256 KiB, one spare per outbox.
    const std::size_t bound = (std::size_t(512) << 10) + (std::size_t(256) << 10) +
                              std::size_t(b.n) * (std::size_t(256) << 10);
    EXPECT_LE(idle, bound) << "rank " << b.me << " keeps " << idle << " B after idle epochs";
}

// A small burst written into the outbox's big buffer leaves in it; the big buffer then comes
// back (to the outbox or as the big spare) instead of being freed, so the next big burst finds
// both buffers of the last ones mapped.
TEST(Buffers, ASmallBurstBetweenBigOnesKeepsTheBigBuffers) {
    Bursts b;
    constexpr long kMessages = Bursts::kMessages;
    const std::size_t busy = b.kept_after_big_bursts();
    ASSERT_GE(busy, std::size_t(2) * kMessages * 24)
        << "rank " << b.me << " keeps " << busy << " B";
    b.burst(10);
    const std::size_t after_small = b.comm.stats().kept_buffer_bytes;
    EXPECT_GE(after_small, busy - busy / 8)
        << "rank " << b.me << ": " << busy << " B kept after big bursts, " << after_small
        << " B after a small one";
    b.burst(kMessages);
    const std::size_t after_big = b.comm.stats().kept_buffer_bytes;
    EXPECT_LE(after_big, busy + busy / 8)
        << "rank " << b.me << ": " << busy << " B kept after big bursts, " << after_big
        << " B after the next one (a buffer more)";
    EXPECT_EQ(b.received, 4 * kMessages + 10);
}

// Bursts that shrink (here to a twentieth, still past the spares' 256 KiB) do not keep the
// buffers of the big ones: a burst uses a kept buffer only when it fills half of it, so the
// big buffers go two epochs later, as idle ones do, and the small bursts grow their own.
TEST(Buffers, BuffersOfBigBurstsGoWhenOnlyMuchSmallerBurstsFollow) {
    Bursts b;
    constexpr long kMessages = Bursts::kMessages;
    const std::size_t busy = b.kept_after_big_bursts();
    ASSERT_GE(busy, std::size_t(2) * kMessages * 16)
        << "rank " << b.me << " keeps " << busy << " B";
    for (int step = 0; step < 4; ++step)
        b.burst(kMessages / 20);
    const std::size_t smaller = b.comm.stats().kept_buffer_bytes;
    EXPECT_LE(smaller, busy / 4) << "rank " << b.me << ": " << busy << " B kept after big bursts, "
                                 << smaller << " B after four twenty times smaller";
    EXPECT_EQ(b.received, 3 * kMessages + 4 * (kMessages / 20));
}

// Buffers of frames sent while the receiver does not receive stay with MPI until it does,
// then all come back at once: the sender keeps 512 KiB of them as spares, not all of them.
TEST(Buffers, SpareSendBuffersAreBoundedInBytes) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    if (n < 2) {
        GTEST_SKIP() << "needs 2 ranks";
    }
    constexpr long kFrames = 8000;  // 24 bytes each: about 190 KiB a buffer
    constexpr int kBuffers = 12;
    long received = 0;
    auto* nap = comm.make_active_msg(
        [](int& ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }, "nap");
    auto* am = comm.make_active_msg([&](std::uint64_t&) { ++received; }, "frame");
    std::size_t flying = 0;
    if (me == 0) {
        nap->send(1, 500);  // rank 1 runs it, then receives nothing for 500 ms
        comm.progress();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (int b = 0; b < kBuffers; ++b) {
            for (long i = 0; i < kFrames; ++i)
                am->send(1, std::uint64_t(i));
            comm.progress();  // hands this buffer to MPI
        }
        flying = comm.bytes_in_flight(1);
    }
    tp.join();
    if (me == 1) {
        EXPECT_EQ(received, kBuffers * kFrames);
    }
    if (me != 0) return;
    if (flying < std::size_t(6) * kFrames * 24) {
        GTEST_SKIP() << "MPI delivered the buffers before the receiver received (" << flying
                     << " B in flight)";
    }
    const std::size_t kept = comm.stats().kept_buffer_bytes;
    // The spares, and the outboxes' empty buffers (one a destination).
    const std::size_t bound = (std::size_t(512) << 10) + std::size_t(n) * (std::size_t(256) << 10);
    EXPECT_LE(kept, bound) << "rank 0 keeps " << kept << " B after " << flying
                           << " B of frames were in flight";
}
