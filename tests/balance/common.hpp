// What the balancing tests share: an object that counts the handlers run on it, one that
// checks the objects layer's guarantees, a handler's measured sleep (each rank stands for a
// core however oversubscribed the machine), the spread of the ranks' busy times, and the MPI
// helpers of every test program.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_util.hpp"

namespace balance_test {

using cascade_test::allgather;
using cascade_test::allreduce_sum;
using cascade_test::world_rank;
using cascade_test::world_size;

// A mobile object that counts the handlers run on it.
struct Work {
    int done = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(done);
    }
};

// A mobile object for the objects layer's guarantees: its handlers check the per-sender order
// of the requests and that no other exclusive handler runs beside them.
struct Tally {
    std::vector<std::int64_t> last;  // per sender: the last sequence number seen
    std::int64_t count = 0, disorder = 0;
    int running = 0;  // exclusive handlers running on it now
    std::int64_t overlaps = 0;
    std::string name;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(last, count, disorder, overlaps, name);
    }
};

// A handler's work: sleeps for `d`, counts the run on `w` and adds the seconds it took to
// `busy` (this rank's busy time).
template <class Rep, class Period>
void sleep_counted(Work& w, std::chrono::duration<Rep, Period> d, std::atomic<double>& busy) {
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(d);
    ++w.done;
    busy.fetch_add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The ranks' busy times (seconds) against their mean: the least, the most and the mean.
struct BusySpread {
    double lo = 1e30, hi = 0, mean = 0;
};
inline BusySpread busy_spread(const std::vector<double>& busy) {
    BusySpread s;
    double total = 0;
    for (double b : busy)
        total += b, s.lo = std::min(s.lo, b), s.hi = std::max(s.hi, b);
    s.mean = total / double(busy.size());
    return s;
}

}  // namespace balance_test
