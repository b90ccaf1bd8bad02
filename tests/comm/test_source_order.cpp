// SourceOrder (cascade/comm/detail/source_order.hpp): one rank's messages run in the order
// it sent them, also when a handler's nested progress receives the next ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cascade/comm/detail/source_order.hpp"

using cascade::detail::Bytes;
using cascade::detail::SourceOrder;

namespace {
Bytes bytes(const std::string& s) {
    return Bytes(s.begin(), s.end());
}
}  // namespace

TEST(SourceOrder, RunsAtOnceWhenNothingWaits) {
    SourceOrder o;
    o.reset(2);
    std::vector<std::string> ran;
    const std::string m = "m0";
    o.run(1, m.data(), m.size(), [&](const char* d, std::size_t n) {
        EXPECT_TRUE(o.is_open(1));
        EXPECT_FALSE(o.is_open(0));
        EXPECT_TRUE(o.handler_running());
        ran.emplace_back(d, n);
    });
    EXPECT_EQ(ran, std::vector<std::string>{"m0"});
    EXPECT_FALSE(o.is_open(1));
    EXPECT_FALSE(o.handler_running());
}

TEST(SourceOrder, NestedArrivalsWaitForTheHandlerInOrder) {
    SourceOrder o;
    o.reset(3);
    std::vector<std::string> ran;
    const std::string first = "a";
    o.run(2, first.data(), first.size(), [&](const char* d, std::size_t n) {
        ran.emplace_back(d, n);
        if (ran.size() == 1) {  // nested progress receives the next two of source 2
            ASSERT_TRUE(o.is_open(2));
            o.defer(2, bytes("b"));
            o.defer(2, bytes("c"));
            EXPECT_EQ(o.deferred(2), 2u);
        } else if (ran.back() == "b") {  // its handler nests again: "d" after "c"
            o.defer(2, bytes("d"));
        }
    });
    EXPECT_EQ(ran, (std::vector<std::string>{"a", "b", "c", "d"}));
    EXPECT_EQ(o.deferred(2), 0u);
    EXPECT_FALSE(o.is_open(2));
}

TEST(SourceOrder, BigMessageHoldsItsSource) {
    SourceOrder o;
    o.reset(2);
    o.hold(0);
    EXPECT_TRUE(o.is_open(0));
    o.defer(0, bytes("later"));
    Bytes big = bytes("big");
    EXPECT_FALSE(o.unhold_or_defer(0, big));  // no handler of 0 runs: the caller runs it
    EXPECT_FALSE(o.is_open(0));
    EXPECT_EQ(big.size(), 3u);

    // Arriving while a handler of the same source runs: kept ahead of what waits.
    std::vector<std::string> ran;
    const std::string m = "m";
    o.hold(1);
    o.run(1, m.data(), m.size(), [&](const char* d, std::size_t n) {
        ran.emplace_back(d, n);
        if (ran.size() == 1) {
            o.defer(1, bytes("after"));
            Bytes b = bytes("big");
            EXPECT_TRUE(o.unhold_or_defer(1, b));
        }
    });
    EXPECT_EQ(ran, (std::vector<std::string>{"m", "big", "after"}));
}

TEST(SourceOrder, FrameNumbersAndDepth) {
    SourceOrder o;
    o.reset(2);
    EXPECT_EQ(o.next_frame(1), 0u);
    EXPECT_EQ(o.next_frame(1), 1u);
    EXPECT_EQ(o.current_seq(), 1u);
    EXPECT_EQ(o.next_frame(0), 0u);
    EXPECT_EQ(o.current_seq(), 0u);
    EXPECT_EQ(o.frames_from(1), 2u);
    EXPECT_EQ(o.frames_from(0), 1u);
    EXPECT_EQ(o.progress_depth(), 0);
    o.enter_progress();
    o.enter_progress();
    EXPECT_EQ(o.progress_depth(), 2);
    o.leave_progress();
    EXPECT_EQ(o.progress_depth(), 1);
}
