// The receiving side of a Communicator in parts, each rank sending to itself
// (MPI_COMM_SELF): ReceiveSlots (cascade/comm/detail/receive_slots.hpp) tests its posted
// receives oldest first and posts them again; LargeReceives
// (cascade/comm/detail/large_receives.hpp) receives bodies in pieces and big messages, and
// reports each once it all arrived; World (cascade/comm/detail/world.hpp) opens a duplicate.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cascade/comm/detail/large_receives.hpp"
#include "cascade/comm/detail/receive_slots.hpp"
#include "cascade/comm/detail/world.hpp"

using cascade::detail::BigRecv;
using cascade::detail::Bytes;
using cascade::detail::CtrlMsg;
using cascade::detail::LargeReceives;
using cascade::detail::PendingRecv;
using cascade::detail::ReceiveSlots;
using cascade::detail::World;
namespace constants = cascade::detail::comm;

namespace {
void send_self(const void* data, int bytes, int tag, MPI_Comm comm) {
    MPI_Send(data, bytes, MPI_BYTE, 0, tag, comm);
}
// test_am until a message arrives (eager self-sends are there at once; a few tries).
bool next_am(ReceiveSlots& s, int parity, int& slot, MPI_Status& st) {
    for (int i = 0; i < 1000; ++i)
        if (s.test_am(parity, slot, st)) return true;
    return false;
}
// A duplicate of MPI_COMM_SELF for one test, freed at its end, and receive slots posted on
// it (destroyed first: members go in reverse order).
struct PostedSlots {
    struct SelfComm {
        MPI_Comm comm;
        SelfComm() { MPI_Comm_dup(MPI_COMM_SELF, &comm); }
        ~SelfComm() { MPI_Comm_free(&comm); }
        SelfComm(const SelfComm&) = delete;
        SelfComm& operator=(const SelfComm&) = delete;
    } self;
    ReceiveSlots slots;
    PostedSlots() { slots.post_all(self.comm); }
};
}  // namespace

TEST(ReceiveSlots, AmMessagesInOrderOfArrivalPerParity) {
    PostedSlots posted;
    ReceiveSlots& s = posted.slots;
    const MPI_Comm comm = posted.self.comm;
    int slot = -1;
    MPI_Status st;
    EXPECT_FALSE(s.test_am(0, slot, st));
    // More messages than slots: each slot is posted again once its message is read.
    for (int k = 0; k < 2 * ReceiveSlots::kAmSlots; ++k) {
        const std::uint64_t v = 100 + static_cast<std::uint64_t>(k);
        send_self(&v, sizeof v, constants::TAG_AM, comm);
        ASSERT_TRUE(next_am(s, 0, slot, st)) << k;
        std::uint64_t got = 0;
        std::memcpy(&got, s.am_data(0, slot), sizeof got);
        EXPECT_EQ(got, v);
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        EXPECT_EQ(count, static_cast<int>(sizeof v));
        s.repost_am(comm, 0, slot);
    }
    // The other parity's slots take only its tag, in the order sent.
    const std::uint64_t a = 1, b = 2;
    send_self(&a, sizeof a, constants::TAG_AM_ODD, comm);
    send_self(&b, sizeof b, constants::TAG_AM_ODD, comm);
    EXPECT_FALSE(s.test_am(0, slot, st));
    std::uint64_t got = 0;
    ASSERT_TRUE(next_am(s, 1, slot, st));
    std::memcpy(&got, s.am_data(1, slot), sizeof got);
    EXPECT_EQ(got, a);
    ASSERT_TRUE(next_am(s, 1, slot, st));
    std::memcpy(&got, s.am_data(1, slot), sizeof got);
    EXPECT_EQ(got, b);
    // Two slots of parity 1 are not posted now; a message arrived on none of the rest.
    EXPECT_EQ(s.cancel_all(), 0);
}

TEST(ReceiveSlots, ControlMessagesOldestFirstAndPostedAgain) {
    PostedSlots posted;
    ReceiveSlots& s = posted.slots;
    const MPI_Comm comm = posted.self.comm;
    CtrlMsg m{};
    MPI_Status st;
    EXPECT_FALSE(s.test_ctrl(comm, m, st));
    for (std::uint64_t k = 0; k < 3 * ReceiveSlots::kCtrlSlots; ++k) {
        CtrlMsg out{CtrlMsg::COUNT, 7, k, 0, 0, {}};
        send_self(&out, sizeof out, constants::TAG_CTRL, comm);
        bool got = false;
        for (int i = 0; i < 1000 && !got; ++i)
            got = s.test_ctrl(comm, m, st);
        ASSERT_TRUE(got) << k;
        EXPECT_EQ(m.type, CtrlMsg::COUNT);
        EXPECT_EQ(m.a, k);
        EXPECT_EQ(st.MPI_SOURCE, 0);
    }
    EXPECT_EQ(s.cancel_all(), 0);
}

TEST(ReceiveSlots, CancelCountsMessagesNobodyRan) {
    PostedSlots posted;
    ReceiveSlots& s = posted.slots;
    const MPI_Comm comm = posted.self.comm;
    const std::uint64_t v = 5;
    send_self(&v, sizeof v, constants::TAG_AM, comm);
    EXPECT_EQ(s.cancel_all(), 1);
}

// One call tests the oldest control receive and the oldest AM receive: a control message is
// returned, an AM message kept for the next test_am (not received twice, not lost; counted by
// cancel_all when nobody took it).
TEST(ReceiveSlots, ControlAndAmTestedTogether) {
    PostedSlots posted;
    ReceiveSlots& s = posted.slots;
    const MPI_Comm comm = posted.self.comm;
    CtrlMsg m{};
    MPI_Status st;
    int slot = -1;
    bool tested = false;
    EXPECT_FALSE(s.test_ctrl_and_am(comm, 0, m, st, tested));
    EXPECT_TRUE(tested);
    EXPECT_FALSE(s.am_waiting(0));
    // An AM message alone: no control message, the AM kept for test_am.
    const std::uint64_t v = 41;
    send_self(&v, sizeof v, constants::TAG_AM, comm);
    for (int i = 0; i < 1000 && !s.test_ctrl_and_am(comm, 0, m, st, tested); ++i) {
    }
    EXPECT_TRUE(s.am_waiting(0));
    ASSERT_TRUE(s.test_am(0, slot, st));
    EXPECT_FALSE(s.am_waiting(0));
    std::uint64_t got = 0;
    std::memcpy(&got, s.am_data(0, slot), sizeof got);
    EXPECT_EQ(got, v);
    EXPECT_FALSE(s.test_am(0, slot, st)) << "the same message given twice";
    s.repost_am(comm, 0, slot);
    // Both at once: the control message returned, then the AM message.
    const CtrlMsg out{CtrlMsg::SHUTDOWN, 3, 9, 0, 0, {}};
    const std::uint64_t w = 42;
    send_self(&w, sizeof w, constants::TAG_AM, comm);
    send_self(&out, sizeof out, constants::TAG_CTRL, comm);
    bool ctrl = false;
    for (int i = 0; i < 1000 && !ctrl; ++i)
        ctrl = s.test_ctrl_and_am(comm, 0, m, st, tested);
    ASSERT_TRUE(ctrl);
    EXPECT_EQ(m.type, CtrlMsg::SHUTDOWN);
    EXPECT_EQ(m.a, 9u);
    ASSERT_TRUE(next_am(s, 0, slot, st));
    std::memcpy(&got, s.am_data(0, slot), sizeof got);
    EXPECT_EQ(got, w);
    s.repost_am(comm, 0, slot);
    // Kept and never taken: counted as a message nobody ran.
    send_self(&v, sizeof v, constants::TAG_AM, comm);
    for (int i = 0; i < 1000 && !s.test_ctrl_and_am(comm, 0, m, st, tested); ++i) {
    }
    EXPECT_EQ(s.cancel_all(), 1);
}

TEST(LargeReceives, BodyInPiecesThenBigMessage) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_SELF, &comm);
    {
        LargeReceives lr;
        EXPECT_TRUE(lr.empty());
        std::vector<char> body(1000), into(1000, 0);
        for (std::size_t i = 0; i < body.size(); ++i)
            body[i] = static_cast<char>(i * 7);
        PendingRecv r{nullptr, 0, {}, {'x'}};
        r.bytes = body.size();
        PendingRecv& kept = lr.post_body(comm, std::move(r), into.data(), 300, 42);
        EXPECT_EQ(kept.reqs.size(), 4u);  // 300 + 300 + 300 + 100
        EXPECT_EQ(&lr.last_body(), &kept);
        EXPECT_EQ(lr.bodies(), 1u);
        int arrived = 0;
        auto on_body = [&](PendingRecv& done, std::size_t got) {
            ++arrived;
            EXPECT_EQ(got, 1000u);
            EXPECT_EQ(done.args, std::vector<char>{'x'});
        };
        EXPECT_FALSE(lr.test_bodies(on_body));
        for (int off = 0; off < 1000; off += 300)
            send_self(body.data() + off, std::min(300, 1000 - off), 42, comm);
        for (int i = 0; i < 1000 && arrived == 0; ++i)
            lr.test_bodies(on_body);
        EXPECT_EQ(arrived, 1);
        EXPECT_EQ(into, body);
        EXPECT_TRUE(lr.empty());

        lr.post_big(comm, 0, Bytes(64), constants::TAG_BIG);
        EXPECT_EQ(lr.big_messages(), 1u);
        std::vector<char> big(64, 'b');
        send_self(big.data(), 64, constants::TAG_BIG, comm);
        int bigs = 0;
        for (int i = 0; i < 1000 && bigs == 0; ++i)
            lr.test_big([&](BigRecv& b, int count) {
                ++bigs;
                EXPECT_EQ(count, 64);
                EXPECT_EQ(b.source, 0);
                EXPECT_EQ(std::vector<char>(b.buf.begin(), b.buf.end()), big);
            });
        EXPECT_EQ(bigs, 1);
        EXPECT_TRUE(lr.empty());
    }
    MPI_Comm_free(&comm);
}

TEST(LargeReceives, DropsAttachedBodiesOnly) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_SELF, &comm);
    {
        LargeReceives lr;
        std::vector<char> a(16), b(16);
        PendingRecv counted{nullptr, 0, {}, {}};
        counted.bytes = a.size();
        lr.post_body(comm, std::move(counted), a.data(), 16, 50);
        PendingRecv attached{nullptr, 0, {}, {'y'}};
        attached.bytes = b.size();
        attached.counted = false;
        lr.post_body(comm, std::move(attached), b.data(), 16, 51);
        int dropped = 0;
        EXPECT_EQ(lr.drop_attached([&](PendingRecv& r) {
            ++dropped;
            EXPECT_EQ(r.args, std::vector<char>{'y'});
        }),
                  1u);
        EXPECT_EQ(dropped, 1);
        EXPECT_EQ(lr.bodies(), 1u);
        lr.cancel_all();
    }
    MPI_Comm_free(&comm);
}

TEST(World, OpensADuplicateAndClosesIt) {
    World w;
    w.open(MPI_COMM_WORLD, MPI_THREAD_FUNNELED);
    EXPECT_FALSE(w.owns_mpi);  // initialized by the test's main
    int rank = -1, size = 0, cmp = MPI_UNEQUAL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    EXPECT_EQ(w.rank, rank);
    EXPECT_EQ(w.size, size);
    MPI_Comm_compare(w.comm, MPI_COMM_WORLD, &cmp);
    EXPECT_EQ(cmp, MPI_CONGRUENT);
    EXPECT_GE(w.node_rank, 0);
    EXPECT_LT(w.node_rank, w.node_ranks);
    w.close();
    EXPECT_EQ(w.comm, MPI_COMM_NULL);
}
