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

// Tracks a send of one int with tag `tag` to this rank; `serial` names it.
void issend(SendSlots& s, const int& value, int tag, std::uint64_t serial) {
    const std::uint32_t slot = s.open();
    PendingSend& ps = s.at(slot);
    MPI_Request r;
    MPI_Issend(&value, 1, MPI_INT, 0, tag, MPI_COMM_SELF, &r);
    ps.reqs.push_back(r);
    ps.serial = serial;
    ps.dest = 0;
    s.track(slot);
}
// Tracks a send without requests named `serial`.
void no_requests(SendSlots& s, std::uint64_t serial) {
    const std::uint32_t slot = s.open();
    s.at(slot).serial = serial;
    s.track(slot);
}
void receive(int tag) {
    int v = 0;
    MPI_Recv(&v, 1, MPI_INT, 0, tag, MPI_COMM_SELF, MPI_STATUS_IGNORE);
}
// test() until a send is done; its serial.
std::uint64_t next_done(SendSlots& s) {
    std::uint32_t slot = 0;
    for (int i = 0; i < 1000000; ++i) {
        s.test();
        if (const PendingSend* done = s.pop_done(slot)) {
            const std::uint64_t serial = done->serial;
            s.release(slot);
            return serial;
        }
    }
    ADD_FAILURE() << "no send completed";
    return ~0ull;
}

}  // namespace

TEST(SendSlots, OnlyCompletedSendsAreDone) {
    SendSlots s;
    const int v = 7;
    for (int t = 1; t <= 4; ++t)
        issend(s, v, t, static_cast<std::uint64_t>(t));
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
    no_requests(s, 42);
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
            issend(s, v, 100 + t, static_cast<std::uint64_t>(round * 3 + t));
        for (int t = 0; t < 3; ++t)
            receive(100 + t);
        for (int t = 0; t < 3; ++t)
            next_done(s);
        EXPECT_EQ(s.live(), 0u);
        EXPECT_LE(s.requests().size(), 3u);
    }
}

// A send popped and finished may track new ones (a large body's on_sent sends): their
// requests are tested at the next test(), and the popped send stays where it is.
TEST(SendSlots, SendsTrackedWhilePopping) {
    SendSlots s;
    for (std::uint64_t i = 0; i < 3; ++i)
        no_requests(s, i);
    s.test();
    std::uint32_t slot = 0;
    int popped = 0;
    const int v = 3;
    while (PendingSend* out = s.pop_done(slot)) {
        ++popped;
        const std::uint64_t serial = out->serial;
        issend(s, v, 200 + static_cast<int>(serial), 10 + serial);
        receive(200 + static_cast<int>(serial));
        EXPECT_EQ(&s.at(slot), out);
        EXPECT_EQ(out->serial, serial);
        s.release(slot);
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
        issend(s, v, 9, k);
        s.test();
        EXPECT_FALSE(s.any_done());  // not received yet
        EXPECT_EQ(s.requests().size(), 1u);
        receive(9);
        EXPECT_EQ(next_done(s), k);
        EXPECT_TRUE(s.requests().empty());
        EXPECT_EQ(s.live(), 0u);
    }
}

// A popped send stays at its address however many slots open meanwhile (its buffer is in
// use while it is finished), and a released slot is empty and used again.
TEST(SendSlots, PoppedSendStaysWhileSlotsOpen) {
    SendSlots s;
    no_requests(s, 1);
    s.test();
    std::uint32_t slot = 0;
    PendingSend* done = s.pop_done(slot);
    ASSERT_NE(done, nullptr);
    done->buf.assign(100, 'x');
    for (std::uint64_t i = 0; i < 1000; ++i)
        no_requests(s, 100 + i);
    EXPECT_EQ(&s.at(slot), done);
    EXPECT_EQ(done->buf.size(), 100u);
    EXPECT_EQ(done->serial, 1u);
    s.release(slot);
    EXPECT_EQ(s.at(slot).buf.capacity(), 0u);
    EXPECT_EQ(s.at(slot).dest, -1);
    EXPECT_EQ(s.open(), slot);
}
