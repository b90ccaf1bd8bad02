// BufferCache (cascade/comm/detail/buffer_cache.hpp): which buffers are kept for reuse, where,
// and for how many epochs.
#include <gtest/gtest.h>

#include <memory>

#include "cascade/comm/detail/buffer_cache.hpp"

using cascade::detail::BufferCache;
using cascade::detail::Bytes;
using cascade::detail::Outbox;
namespace comm = cascade::detail::comm;

namespace {
Bytes buffer(std::size_t capacity, std::size_t size = 0) {
    Bytes b;
    b.reserve(capacity);
    b.resize(size);
    return b;
}
constexpr std::size_t KiB = 1024;
}  // namespace

TEST(BufferCache, SparesWithinTheirLimits) {
    BufferCache c;
    auto boxes = std::make_unique<Outbox[]>(1);
    for (std::size_t i = 0; i < comm::kMaxSpareBuffers + 2; ++i) {
        Bytes b = buffer(32 * KiB, 10);
        c.keep_spare(b);
    }
    // 8 of 32 KiB: within both the count and the bytes.
    EXPECT_EQ(c.kept_bytes(boxes.get(), 1), comm::kMaxSpareBuffers * 32 * KiB);
    Bytes too_big = buffer(comm::kMaxSpareBufferBytes + 1);
    c.keep_spare(too_big);
    EXPECT_GT(too_big.capacity(), 0u);  // left to its owner
    Bytes out;
    c.take_spare(out);
    EXPECT_EQ(out.capacity(), 32 * KiB);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(c.kept_bytes(boxes.get(), 1), (comm::kMaxSpareBuffers - 1) * 32 * KiB);
    // The total is bounded too: two of 256 KiB fill kMaxSpareBytes.
    BufferCache d;
    for (int i = 0; i < 3; ++i) {
        Bytes b = buffer(comm::kMaxSpareBufferBytes);
        d.keep_spare(b);
    }
    EXPECT_EQ(d.kept_bytes(boxes.get(), 1), comm::kMaxSpareBytes);
}

// A big burst's buffer goes back to its outbox when that waits empty; another one to the big
// spare, which the next big burst takes; unused for kIdleEpochs epochs, both are freed.
TEST(BufferCache, BigBuffersKeptWhileBurstsUseThem) {
    BufferCache c;
    auto boxes = std::make_unique<Outbox[]>(2);
    const std::size_t big = 4 * comm::kMaxSpareBufferBytes;
    Bytes sent = buffer(big, big);  // a burst that filled its buffer
    c.keep_sent(boxes.get(), 1, sent);
    EXPECT_EQ(boxes[1].buf.capacity(), big);  // back in its outbox, empty
    EXPECT_TRUE(boxes[1].buf.empty());
    EXPECT_EQ(boxes[1].big_idle_epochs, 0);
    // The outbox now holds a burst: the next big buffer sent becomes the big spare.
    boxes[1].buf.resize(big);
    Bytes second = buffer(2 * big, 2 * big);
    c.keep_sent(boxes.get(), 1, second);
    EXPECT_EQ(c.kept_bytes(boxes.get(), 2), 2 * big);  // the big spare (outbox 1 is not empty)
    // A flush of that burst takes the big spare as the outbox's next buffer.
    Bytes frames;
    c.swap_out(boxes.get(), 1, frames);
    EXPECT_EQ(frames.size(), big);
    EXPECT_EQ(boxes[1].buf.capacity(), 2 * big);
    EXPECT_EQ(c.kept_bytes(boxes.get(), 2), 2 * big);
    // Nothing uses it: freed after kIdleEpochs + 1 epoch ends, not before.
    for (int e = 0; e < comm::kIdleEpochs; ++e) {
        c.epoch_ended(boxes.get());
        EXPECT_EQ(boxes[1].buf.capacity(), 2 * big) << "after " << e + 1 << " epochs";
    }
    c.epoch_ended(boxes.get());
    EXPECT_EQ(boxes[1].buf.capacity(), 0u);
    EXPECT_EQ(boxes[1].big_idle_epochs, -1);
}

TEST(BufferCache, ReceiveBufferKeptUpToItsLimitOrWhileFilled) {
    BufferCache c;
    auto boxes = std::make_unique<Outbox[]>(1);
    Bytes b = c.take_recv_buffer(100 * KiB);
    EXPECT_EQ(b.size(), 100 * KiB);
    c.give_recv_buffer(b);
    for (int e = 0; e < 5; ++e)
        c.epoch_ended(boxes.get());
    EXPECT_GE(c.kept_bytes(boxes.get(), 1), 100 * KiB);  // small enough: kept for good
    const std::size_t big = 2 * comm::kKeptRecvBuffer;
    Bytes g = c.take_recv_buffer(big);
    c.give_recv_buffer(g);
    EXPECT_GE(c.kept_bytes(boxes.get(), 1), big);
    for (int e = 0; e < comm::kIdleEpochs; ++e) {
        c.epoch_ended(boxes.get());
        Bytes again = c.take_recv_buffer(big);  // a big message that fills it: still used
        c.give_recv_buffer(again);
    }
    EXPECT_GE(c.kept_bytes(boxes.get(), 1), big);
    for (int e = 0; e <= comm::kIdleEpochs; ++e)
        c.epoch_ended(boxes.get());
    EXPECT_EQ(c.kept_bytes(boxes.get(), 1), 0u);
}
