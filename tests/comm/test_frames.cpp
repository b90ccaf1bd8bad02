// Frame parsing (cascade/comm/detail/frames.hpp) and reply tokens
// (cascade/futures/detail/reply_tokens.hpp): malformed input is refused, never trusted.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "cascade/comm/detail/frames.hpp"
#include "cascade/futures/detail/reply_tokens.hpp"

using namespace cascade;
using detail::Frame;
using detail::FrameRef;

namespace {
std::vector<std::uint64_t> message(std::initializer_list<std::pair<Frame, std::vector<char>>> fs) {
    std::vector<char> bytes;
    for (auto& [fr, payload] : fs) {
        const char* h = reinterpret_cast<const char*>(&fr);
        bytes.insert(bytes.end(), h, h + sizeof fr);
        bytes.insert(bytes.end(), payload.begin(), payload.end());
    }
    std::vector<std::uint64_t> out((bytes.size() + 7) / 8);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
}
std::size_t count_frames(const std::vector<std::uint64_t>& m, std::size_t bytes) {
    std::size_t n = 0;
    detail::for_each_frame(reinterpret_cast<const char*>(m.data()), bytes,
                           [&](const FrameRef&) { ++n; });
    return n;
}
}  // namespace

TEST(Frames, WellFormedMessagesSplit) {
    auto m = message({{Frame{1, 2, 3}, {'a', 'b', 'c', 0, 0, 0, 0, 0}}, {Frame{4, 5, 0}, {}}});
    EXPECT_EQ(count_frames(m, 40), 2u);
}

TEST(Frames, TruncatedAndOversizedFramesAreRefused) {
    auto m = message({{Frame{1, 2, 8}, {1, 2, 3, 4, 5, 6, 7, 8}}});
    EXPECT_THROW(count_frames(m, 20), WireError);  // payload cut
    EXPECT_THROW(count_frames(m, 8), WireError);   // header cut
    auto big = message({{Frame{1, 2, ~std::uint64_t(0)}, {}}});
    EXPECT_THROW(count_frames(big, 16), WireError);
    // A length whose padding runs past the end (the last frame must be padded too).
    auto unpadded = message({{Frame{1, 2, 3}, {'a', 'b', 'c', 0, 0, 0, 0, 0}}});
    EXPECT_THROW(count_frames(unpadded, 19), WireError);
}

TEST(Frames, NonZeroPaddingIsRefused) {
    auto m = message({{Frame{1, 2, 3}, {'a', 'b', 'c', 0, 9, 0, 0, 0}}});
    EXPECT_THROW(count_frames(m, 24), WireError);
}

TEST(Frames, AnnouncedSizesAreBounded) {
    auto check = [](std::uint64_t bytes) {
        char payload[8];
        std::memcpy(payload, &bytes, 8);
        return detail::announced_size(FrameRef{detail::kAnnounce, 0, payload, 8}, 1024, 1 << 20);
    };
    EXPECT_EQ(check(4096), 4096u);
    EXPECT_THROW(check(512), WireError);         // would have been sent directly
    EXPECT_THROW(check(4097), WireError);        // not whole frames
    EXPECT_THROW(check(1ull << 40), WireError);  // over the limit
}

// A body's element count comes from the sender's header and sizes the receiver's buffer
// before the body arrives (futures arguments and results, large active messages): a count
// past kMaxBody bytes is refused instead of allocated (the fuzzer found 4.4e18 characters
// announced for a std::string argument, checked only against 2^62).
TEST(Frames, AnnouncedBodiesAreBounded) {
    EXPECT_EQ(detail::body_elements(1000, 8), 1000u);
    EXPECT_EQ(detail::body_elements(detail::kMaxBody / 8, 8), detail::kMaxBody / 8);
    EXPECT_THROW(detail::body_elements(detail::kMaxBody / 8 + 1, 8), WireError);
    EXPECT_THROW(detail::body_elements(0x3d633d3d3d3d3d0aull, 1), WireError);
    EXPECT_THROW(detail::body_elements(~0ull, 4), WireError);
}

// A body's MPI messages: the sender's chunk, raised so that one body needs at most
// kMaxPieces of them (a header announcing 16 MiB in 1-byte chunks made the receiver post 16M
// receives), and never above the largest MPI count.
TEST(Frames, BodyPiecesAreBounded) {
    constexpr std::size_t G = std::size_t(1) << 30;
    auto pieces = [&](std::size_t bytes, std::size_t chunk) {
        const std::size_t p = detail::piece_bytes(bytes, chunk, G);
        return bytes / p + (bytes % p != 0);
    };
    EXPECT_EQ(detail::piece_bytes(8000, 24, G), 24u);  // small bodies keep tiny chunks
    EXPECT_EQ(detail::piece_bytes(8000, 0, G), G);
    EXPECT_EQ(detail::piece_bytes(8000, 2 * G, G), G);
    EXPECT_EQ(detail::piece_bytes(0, 1, G), 1u);
    EXPECT_EQ(pieces(std::size_t(16) << 20, 1), detail::kMaxPieces);
    EXPECT_EQ(pieces((std::size_t(16) << 20) + 1, 1), detail::kMaxPieces);
    EXPECT_EQ(pieces(detail::kMaxPieces * 1000, 1000), detail::kMaxPieces);
    EXPECT_EQ(detail::piece_bytes(std::size_t(1) << 46, 1, G), G);  // 2^16 pieces of 1 GiB
}

TEST(ReplyTokens, OnlyLiveTokensAreAnswered) {
    detail::ReplyTokens<int> t;
    int a = 1, b = 2;
    const auto ta = t.add(&a), tb = t.add(&b);
    EXPECT_EQ(t.size(), 2u);
    EXPECT_EQ(t.take(0), nullptr);
    EXPECT_EQ(t.take(reinterpret_cast<std::uintptr_t>(&a)), nullptr);  // an address is no token
    EXPECT_EQ(t.take(ta ^ (std::uint64_t(2) << 32)), nullptr);         // wrong generation
    EXPECT_EQ(t.take(ta), &a);
    EXPECT_EQ(t.take(ta), nullptr);  // answered once
    const auto ta2 = t.add(&a);      // reuses the slot under a new generation
    EXPECT_NE(ta2, ta);
    EXPECT_EQ(t.take(ta), nullptr);
    EXPECT_EQ(t.take(tb), &b);
    EXPECT_EQ(t.take(ta2), &a);
    EXPECT_EQ(t.size(), 0u);
}

// Tokens added on some threads and taken on others, in two tables at once (each thread keeps
// free slots of the last table it used): every token is answered once with its own state,
// and no slot serves two live states.
TEST(ReplyTokens, ThreadsAddAndTakeAcrossTablesWithoutLoss) {
    detail::ReplyTokens<long> tables[2];
    constexpr int kThreads = 4, kRounds = 50, kPer = 300;
    std::vector<long> values(static_cast<std::size_t>(kThreads) * kPer);
    std::vector<std::vector<std::uint64_t>> tokens(kThreads);
    std::barrier sync(kThreads);
    std::atomic<long> wrong{0};
    auto work = [&](int me) {
        for (int round = 0; round < kRounds; ++round) {
            auto& mine = tokens[static_cast<std::size_t>(me)];
            mine.clear();
            for (int k = 0; k < kPer; ++k) {
                const std::size_t v =
                    static_cast<std::size_t>(me) * kPer + static_cast<std::size_t>(k);
                mine.push_back(tables[(k + round) % 2].add(&values[v]));
            }
            sync.arrive_and_wait();
            if (me == 0) {  // the live tokens of each table name distinct slots
                for (int t = 0; t < 2; ++t) {
                    std::vector<std::uint32_t> slots;
                    for (int j = 0; j < kThreads; ++j)
                        for (int k = 0; k < kPer; ++k)
                            if ((k + round) % 2 == t)
                                slots.push_back(static_cast<std::uint32_t>(
                                    tokens[static_cast<std::size_t>(j)]
                                          [static_cast<std::size_t>(k)]));
                    std::sort(slots.begin(), slots.end());
                    if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) ++wrong;
                    if (tables[t].size() != slots.size()) ++wrong;
                }
            }
            sync.arrive_and_wait();
            const int from = (me + 1 + round) % kThreads;  // another thread's tokens
            const auto& theirs = tokens[static_cast<std::size_t>(from)];
            for (int k = 0; k < kPer; ++k) {
                const std::size_t v =
                    static_cast<std::size_t>(from) * kPer + static_cast<std::size_t>(k);
                detail::ReplyTokens<long>& t = tables[(k + round) % 2];
                if (t.take(theirs[static_cast<std::size_t>(k)]) != &values[v]) ++wrong;
                if (t.take(theirs[static_cast<std::size_t>(k)]) != nullptr) ++wrong;  // once
            }
            sync.arrive_and_wait();
        }
    };
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
        threads.emplace_back(work, i);
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(tables[0].size(), 0u);
    EXPECT_EQ(tables[1].size(), 0u);
}
