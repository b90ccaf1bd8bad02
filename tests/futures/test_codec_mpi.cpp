// A user type with a codec (a struct with std::vector<double> and std::string members) as an
// active-message argument, an async argument and an async result, across ranks.
#include <gtest/gtest.h>

#include <atomic>
#include <cascade/cascade.hpp>
#include <string>
#include <vector>

using namespace cascade;

namespace {
struct Reading {
    std::vector<double> samples;
    std::string station;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(samples, station);
    }
};
Reading make_reading(int from, int to) {
    Reading r;
    r.station = "station " + std::to_string(from) + "->" + std::to_string(to);
    for (int i = 0; i < 100 + from; ++i)
        r.samples.push_back(from + 0.5 * i);
    return r;
}
bool is_reading(const Reading& r, int from, int to) {
    const Reading want = make_reading(from, to);
    return r.station == want.station && r.samples == want.samples;
}
}  // namespace

TEST(CodecMpi, ActiveMessageArgument) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const int me = comm.rank(), n = comm.ranks();
    std::atomic<int> good{0}, bad{0};
    auto* am = comm.make_active_msg(
        [&](int& from, Reading& r) { (is_reading(r, from, me) ? good : bad)++; });
    for (int d = 0; d < n; ++d)
        am->send(d, me, make_reading(me, d));
    tp.join();
    EXPECT_EQ(good.load(), n);
    EXPECT_EQ(bad.load(), 0);
}

TEST(CodecMpi, AsyncArgumentAndResult) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Futures fx(tp, &comm);
    const int me = comm.rank(), n = comm.ranks();
    // Takes a Reading (argument) and answers another one (result).
    auto echo = fx.make_async(
        [&](int& from, Reading& r) {
            if (!is_reading(r, from, me)) throw std::runtime_error("argument arrived damaged");
            Reading out = make_reading(me, from);
            return out;
        },
        "echo");
    std::vector<future<Reading>> fs;
    for (int d = 0; d < n; ++d)
        fs.push_back(async(d, echo, me, make_reading(me, d)));
    for (int d = 0; d < n; ++d) {
        Reading r = fs[d].get();
        EXPECT_TRUE(is_reading(r, d, me)) << "result from rank " << d << ": " << r.station;
    }
    tp.join();
}
