// The trace of one rank as it travels to rank 0: its events as flat records (times already
// in steady_clock nanoseconds, names as indices into the rank's string table), serialized
// into one byte blob. collect.cpp builds it, writers.cpp turns the blobs of all ranks into
// the files; the communicator moves the blobs between ranks (comm/detail/trace_gather.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cascade::trace::detail {

struct Flat {
    std::int64_t t0, t1;
    std::uint64_t a, b, c;
    std::int32_t peer;
    std::uint32_t am, name, flow, key;
    std::uint8_t kind, pad[3];
};

struct RankData {
    int rank = 0;
    std::int64_t offset = 0;
    std::vector<std::string> strings;
    std::vector<std::string> threads;     // labels (graph nodes of threads outside tasks)
    std::vector<std::uint64_t> progress;  // 1: the thread drove MPI
    std::vector<std::uint64_t> dropped;
    std::vector<std::vector<Flat>> events;                        // per thread
    std::vector<std::pair<std::string, std::uint64_t>> counters;  // set_counter, by name
};

std::vector<char> serialize(const RankData& d);
RankData deserialize(const char* p, std::size_t n);

}  // namespace cascade::trace::detail
