// Fuzz target: the trace's deserializer (one rank's events as rank 0 receives them), then
// the JSON and DOT writers on what it accepted. Malformed input must raise
// std::runtime_error, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "cascade/trace/export.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static std::FILE* out = std::fopen("/dev/null", "w");
    std::vector<char> blob(data, data + size);
    try {
        cascade::trace::detail::render_rank_blob(blob.data(), blob.size(), out);
    } catch (const std::runtime_error&) {
    }
    return 0;
}
