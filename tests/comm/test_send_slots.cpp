// SendSlots (cascade/comm/detail/send_slots.hpp): the sends in flight, tested together. Each
// rank sends synchronous-mode messages to itself (MPI_COMM_SELF), which complete only once
// this test posts their receives, so it chooses which sends complete and when.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "cascade/comm/detail/send_slots.hpp"

using cascade::detail::PendingSend;
using cascade::detail::SendSlots;

namespace {

// A send of one int with tag `tag` to this rank; `serial` names it.
PendingSend issend(const int& value, int tag, std::uint64_t serial) {
    PendingSend ps;
    MPI_Request r;
    MPI_Issend(&value, 1, MPI_INT, 0, tag, MPI_COMM_SELF, &r);
    ps.reqs.push_back(r);
    ps.serial = serial;
    ps.dest = 0;
    return ps;
}
void receive(int tag) {
    int v = 0;
    MPI_Recv(&v, 1, MPI_INT, 0, tag, MPI_COMM_SELF, MPI_STATUS_IGNORE);
}
// test() until a send is done; its serial.
std::uint64_t next_done(SendSlots& s) {
    PendingSend out;
    for (int i = 0; i < 1000000; ++i) {
        s.test();
        if (s.pop_done(out)) return out.serial;
    }
    ADD_FAILURE() << "no send completed";
    return ~0ull;
}

}  // namespace

TEST(SendSlots, OnlyCompletedSendsAreDone) {
    SendSlots s;
    const int v = 7;
    for (int t = 1; t <= 4; ++t)
        s.track(issend(v, t, static_cast<std::uint64_t>(t)));
    EXPECT_EQ(s.live(), 4u);
    s.test();
    EXPECT_FALSE(s.any_done());  // nobody received yet
    EXPECT_TRUE(s.frames_in_flight_before(2));
    receive(3);
    EXPECT_EQ(next_done(s), 3u);
    EXPECT_EQ(s.live(), 3u);
    receive(1);
    EXPECT_EQ(next_done(s), 1u);
    EXPECT_FALSE(s.frames_in_flight_before(2));  // serial 1 is done
    EXPECT_TRUE(s.frames_in_flight_before(3));
    receive(2);
    receive(4);
    next_done(s);
    next_done(s);
    EXPECT_EQ(s.live(), 0u);
    EXPECT_FALSE(s.frames_in_flight_before(~0ull));
    // Completed requests were dropped from the array tested.
    s.test();
    EXPECT_TRUE(s.requests().empty());
}

TEST(SendSlots, SendWithoutRequestsIsDoneAtTheNextTest) {
    SendSlots s;
    PendingSend ps;
    ps.serial = 42;
    s.track(std::move(ps));
    EXPECT_EQ(s.live(), 1u);
    EXPECT_EQ(next_done(s), 42u);
    EXPECT_EQ(s.live(), 0u);
}

// Slots are reused: many sends, a few at a time, leave the array small.
TEST(SendSlots, SlotsAndRequestsAreReused) {
    SendSlots s;
    const int v = 1;
    for (int round = 0; round < 50; ++round) {
        for (int t = 0; t < 3; ++t)
            s.track(issend(v, 100 + t, static_cast<std::uint64_t>(round * 3 + t)));
        for (int t = 0; t < 3; ++t)
            receive(100 + t);
        for (int t = 0; t < 3; ++t)
            next_done(s);
        EXPECT_EQ(s.live(), 0u);
        EXPECT_LE(s.requests().size(), 3u);
    }
}

// A send popped and finished may track new ones (a large body's on_sent sends): their
// requests are tested at the next test().
TEST(SendSlots, SendsTrackedWhilePopping) {
    SendSlots s;
    for (std::uint64_t i = 0; i < 3; ++i) {
        PendingSend ps;
        ps.serial = i;
        s.track(std::move(ps));
    }
    s.test();
    PendingSend out;
    int popped = 0;
    const int v = 3;
    while (s.pop_done(out)) {
        ++popped;
        s.track(issend(v, 200 + static_cast<int>(out.serial), 10 + out.serial));
        receive(200 + static_cast<int>(out.serial));
    }
    EXPECT_EQ(popped, 3);
    EXPECT_EQ(s.live(), 3u);
    for (int i = 0; i < 3; ++i)
        EXPECT_GE(next_done(s), 10u);
    EXPECT_EQ(s.live(), 0u);
}

// One request in flight is tested on its own (MPI_Test): done only once received, and its
// entry is gone from the array once it completed.
TEST(SendSlots, ASingleSendIsDoneOnceReceived) {
    SendSlots s;
    const int v = 5;
    for (std::uint64_t k = 1; k <= 3; ++k) {
        s.track(issend(v, 9, k));
        s.test();
        EXPECT_FALSE(s.any_done());  // not received yet
        EXPECT_EQ(s.requests().size(), 1u);
        receive(9);
        EXPECT_EQ(next_done(s), k);
        EXPECT_TRUE(s.requests().empty());
        EXPECT_EQ(s.live(), 0u);
    }
}
