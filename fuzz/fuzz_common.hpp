// What the fuzz targets share: a one-rank job made once (MPI's own allocations kept out of
// leak checking), a bounded drain of what handlers sent to this rank, and the input as an
// 8-byte aligned message after its first byte (which picks what to fuzz).
#pragma once

#include <mpi.h>
#include <sanitizer/lsan_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cascade/comm/communicator.hpp"

namespace fuzz {

// The target's World (which holds its Communicator), made at the first input and never
// destroyed: libFuzzer exits without unwinding.
template <class World>
World& world() {
    static World* w = [] {
        int argc = 0;
        char** argv = nullptr;
        __lsan_disable();  // what MPI allocates for itself is not this target's to find
        MPI_Init(&argc, &argv);
        World* made = new World;
        __lsan_enable();
        return made;
    }();
    return *w;
}

// Delivers what the handlers sent to this rank, a bounded number of times.
inline void drain(cascade::Communicator& comm) {
    for (int i = 0; i < 4 && comm.progress(); ++i) {
    }
}

// An input of at least 2 bytes: `mode` its first byte, the rest in an aligned buffer.
struct Input {
    std::uint8_t mode;
    std::vector<std::uint64_t> buf;
    char* p;
    std::size_t n;
    Input(const std::uint8_t* data, std::size_t size)
        : mode(data[0]), buf(size / 8 + 1), p(reinterpret_cast<char*>(buf.data())), n(size - 1) {
        std::memcpy(buf.data(), data + 1, size - 1);
    }
};

}  // namespace fuzz
