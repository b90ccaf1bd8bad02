// The MPI library's device-memory support and the Data body settings (device_support.hpp).
#include "cascade/comm/device_support.hpp"

#include <mpi.h>

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include "cascade/core/settings.hpp"

namespace cascade {
namespace {

constexpr std::uint64_t kChunkMax = std::uint64_t(1) << 40;

// Keep in step with the README's settings table (a test compares them).
constexpr settings::Variable kVariables[] = {
    {"CASCADE_GPU_AWARE", "auto, 1 or 0 (also on/off, true/false, yes/no)", "auto",
     "auto: Data bodies whose freshest copy is on a CUDA device go straight from and into "
     "device memory when the MPI library says it takes it; 1: so do those on any device whose "
     "memory MPI can address (CUDA whatever the library says, sim devices); 0: every body is "
     "staged through host memory"},
    {"CASCADE_DATA_CHUNK", "a whole number of bytes from 0 to 1099511627776", "1048576",
     "Data bodies whose freshest copy is on a device leave in pieces of this many bytes, each "
     "sent as soon as its device-to-host copy landed; 0: the whole body at once"},
};

void check() {
    gpu_aware_setting();
    settings::count("CASCADE_DATA_CHUNK", 0, 0, kChunkMax);
}

[[maybe_unused]] const bool g_installed = (settings::add(kVariables, &check), true);

MpiDeviceSupport query() {
    MpiDeviceSupport s;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    s.cuda = MPIX_Query_cuda_support() == 1;
    s.why = std::string("Open MPI built with CUDA support; MPIX_Query_cuda_support() = ") +
            (s.cuda ? "1" : "0");
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    int yes = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) != MPI_SUCCESS) yes = 0;
    s.cuda = yes != 0;
    s.why = std::string("MPICH: MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA) = ") +
            (s.cuda ? "1" : "0");
#elif defined(OMPI_HAVE_MPI_EXT_CUDA)
    s.why = "Open MPI built without CUDA support (MPIX_CUDA_AWARE_SUPPORT is 0)";
#else
    s.why = "the MPI library offers no device-memory query";
#endif
    return s;
}

}  // namespace

const MpiDeviceSupport& mpi_device_support() {
    static const MpiDeviceSupport s = query();
    return s;
}

GpuAware gpu_aware_setting() {
    const std::optional<std::string> v = settings::raw("CASCADE_GPU_AWARE");
    if (!v) return GpuAware::automatic;
    std::string low = *v;
    for (char& c : low)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (low == "auto") return GpuAware::automatic;
    return settings::parse_flag("CASCADE_GPU_AWARE", *v) ? GpuAware::force : GpuAware::off;
}

std::size_t data_chunk_setting() {
    return static_cast<std::size_t>(settings::count("CASCADE_DATA_CHUNK", 1 << 20, 0, kChunkMax));
}

}  // namespace cascade
