// Fuzz target: splitting an MPI message into frames (cascade/comm/detail/frames.hpp), and
// the announce frames of big messages. Malformed input must raise WireError, nothing else.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cascade/comm/detail/frames.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // Messages land in 8-byte aligned buffers.
    std::vector<std::uint64_t> buf(size / 8 + 1);
    if (size) std::memcpy(buf.data(), data, size);
    const char* p = reinterpret_cast<const char*>(buf.data());
    try {
        std::uint64_t sum = 0;
        cascade::detail::for_each_frame(p, size, [&](const cascade::detail::FrameRef& fr) {
            if (fr.id == cascade::detail::kAnnounce) {
                sum += cascade::detail::announced_size(fr, 32 << 10, std::size_t(1) << 30);
                return;
            }
            for (std::size_t i = 0; i < fr.len; ++i)  // every payload byte is readable
                sum += static_cast<unsigned char>(fr.payload[i]);
        });
        volatile std::uint64_t sink = sum;
        (void)sink;
    } catch (const cascade::WireError&) {
    }
    return 0;
}
