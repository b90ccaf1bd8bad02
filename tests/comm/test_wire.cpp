// Wire format: round trips, alignment of views, and bounds-checked decoding.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cascade/comm/serialization.hpp"

using namespace cascade;

namespace {
template <class... Ps>
std::vector<char> encode(const Ps&... ps) {
    std::vector<char> buf((std::size_t(0) + ... + wire::size_of(ps)) + 8);
    wire::Writer w(buf.data());
    (w.put(ps), ...);
    buf.resize(static_cast<std::size_t>(w.position() - buf.data()));
    return buf;
}
}  // namespace

TEST(Wire, RoundTripOfAllArgumentKinds) {
    std::vector<double> d = {1.5, -2.25, 3.0};
    std::vector<int> vi = {4, 5};
    struct Pod {
        int a;
        double b;
    };
    auto buf = encode(char('q'), view<double>(d.data(), d.size()), vi, std::string("hello"),
                      Pod{7, 8.5}, std::vector<int>{}, std::string());
    wire::Reader r(buf.data(), buf.size());
    auto [c, v, vv, s, pod, empty_v, empty_s] =
        wire::decode<char, view<double>, std::vector<int>, std::string, Pod, std::vector<int>,
                     std::string>(r);
    EXPECT_EQ(c, 'q');
    ASSERT_EQ(v.size(), 3u);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % alignof(double), 0u);
    EXPECT_EQ(v[0], 1.5);
    EXPECT_EQ(v[2], 3.0);
    EXPECT_EQ(vv, vi);
    EXPECT_EQ(s, "hello");
    EXPECT_EQ(pod.a, 7);
    EXPECT_EQ(pod.b, 8.5);
    EXPECT_TRUE(empty_v.empty());
    EXPECT_TRUE(empty_s.empty());
    EXPECT_EQ(r.remaining(), 0u);
}

TEST(Wire, TruncatedMessagesAreDetected) {
    std::vector<double> d(100, 1.0);
    auto buf = encode(int(3), view<double>(d.data(), d.size()));
    for (std::size_t cut : {std::size_t(0), std::size_t(2), std::size_t(4), std::size_t(11),
                            buf.size() / 2, buf.size() - 1}) {
        wire::Reader r(buf.data(), cut);
        EXPECT_THROW((wire::decode<int, view<double>>(r)), WireError) << "cut at " << cut;
    }
}

TEST(Wire, HugeCountsDoNotOverflow) {
    // A corrupted count near 2^64 must not wrap the bounds check.
    std::vector<char> buf(64, 0);
    std::uint64_t n = ~0ull / 2;
    std::memcpy(buf.data(), &n, sizeof n);
    wire::Reader r(buf.data(), buf.size());
    EXPECT_THROW(r.get<std::vector<double>>(), WireError);
}

TEST(Wire, SignaturesDifferByType) {
    EXPECT_NE(wire::signature<int>(), wire::signature<double>());
    EXPECT_NE((wire::signature<int, int>()), wire::signature<int>());
    EXPECT_EQ(wire::signature<int>(), wire::signature<int>());
}

// ---- user types through the codec hook -----------------------------------------------------
namespace {
struct Sample {  // member serialize()
    std::vector<double> values;
    std::string label;
    int id = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(values, label, id);
    }
    bool operator==(const Sample&) const = default;
};
struct Legacy {  // a type that cannot change: a cascade::codec specialization
    std::string name;
    std::vector<Sample> parts;  // vector of a user type: element by element
};
struct Pinned {  // trivially copyable, but its codec wins: only `keep` travels
    int keep = 0;
    int drop = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(keep);
    }
};
}  // namespace

template <>
struct cascade::codec<Legacy> {
    template <class Archive>
    static void serialize(Archive& ar, Legacy& x) {
        ar(x.name, x.parts);
    }
};

TEST(Wire, UserTypesWithACodecRoundTrip) {
    Sample a{{1.5, 2.5}, "alpha", 7};
    Legacy l{"legacy", {a, Sample{{}, "", -1}, Sample{{3.0}, "gamma", 9}}};
    std::vector<std::string> words{"one", "", "three"};
    auto buf = encode(a, l, words, Pinned{5, 6}, int(42));
    wire::Reader r(buf.data(), buf.size());
    auto [a2, l2, w2, p2, tail] =
        wire::decode<Sample, Legacy, std::vector<std::string>, Pinned, int>(r);
    EXPECT_EQ(a2, a);
    EXPECT_EQ(l2.name, "legacy");
    ASSERT_EQ(l2.parts.size(), 3u);
    EXPECT_EQ(l2.parts[0], a);
    EXPECT_EQ(l2.parts[2], l.parts[2]);
    EXPECT_EQ(w2, words);
    EXPECT_EQ(p2.keep, 5);
    EXPECT_EQ(p2.drop, 0);  // not serialized
    EXPECT_EQ(tail, 42);
    EXPECT_EQ(r.remaining(), 0u);
    static_assert(wire::kind_of<Sample>() == wire::Kind::custom);
    static_assert(wire::kind_of<Legacy>() == wire::Kind::custom);
    static_assert(wire::kind_of<Pinned>() == wire::Kind::custom);
    static_assert(wire::kind_of<std::vector<Sample>>() == wire::Kind::elements);
    static_assert(!wire::supported<std::vector<std::unique_ptr<int>>>);
}

TEST(Wire, TruncatedUserTypesAreDetected) {
    Legacy l{"legacy", {Sample{{1, 2, 3}, "x", 1}, Sample{{4}, "yy", 2}}};
    auto buf = encode(l);
    for (std::size_t cut = 0; cut < buf.size(); cut += 3) {
        wire::Reader r(buf.data(), cut);
        EXPECT_THROW(r.get<Legacy>(), WireError) << "cut at " << cut;
    }
}

// ---- malformed input is refused (each of these was accepted before) ----------------------

TEST(Wire, BoolOtherThanZeroOrOneIsRefused) {
    auto buf = encode(std::uint8_t(2));
    wire::Reader r(buf.data(), buf.size());
    EXPECT_THROW(r.get<bool>(), WireError);
    auto ok = encode(true, false);
    wire::Reader r2(ok.data(), ok.size());
    auto [a, b] = wire::decode_all<bool, bool>(r2);
    EXPECT_TRUE(a);
    EXPECT_FALSE(b);
}

TEST(Wire, LeftoverBytesAreRefused) {
    auto buf = encode(1, 2);
    wire::Reader r(buf.data(), buf.size());
    EXPECT_THROW((wire::decode_all<int>(r)), WireError);
    wire::Reader r2(buf.data(), buf.size());
    EXPECT_NO_THROW((wire::decode_all<int, int>(r2)));
}

TEST(Wire, NonZeroPaddingIsRefused) {
    // A char, then a vector: its count, padding up to 8 bytes, then elements.
    auto buf = encode(std::uint32_t(5), std::vector<double>{1.0});
    ASSERT_EQ(buf.size(), 4u + 8u + 4u + 8u);
    buf[12] = 1;  // padding after the count
    wire::Reader r(buf.data(), buf.size());
    EXPECT_THROW((wire::decode_all<std::uint32_t, std::vector<double>>(r)), WireError);
}
