// What the MPI library says about device memory, and the settings of Data bodies: whether a
// send may pass a device pointer to MPI (CASCADE_GPU_AWARE: when the library says it takes
// one, always, or never) and the chunk size of bodies whose freshest copy is on a device
// (CASCADE_DATA_CHUNK).
#pragma once

#include <cstddef>
#include <string>

namespace cascade {

/// The MPI library's support for device memory, asked once (after MPI_Init).
struct MpiDeviceSupport {
    bool cuda = false;  ///< MPI sends from and receives into CUDA device memory
    std::string why;    ///< how that was found: the query and its answer
};

/// Open MPI: MPIX_Query_cuda_support() when built with MPIX_CUDA_AWARE_SUPPORT; MPICH:
/// MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA); any other library: not supported.
const MpiDeviceSupport& mpi_device_support();

/// When a Data body goes straight from and into device copies (the direct path).
enum class GpuAware {
    off,        ///< never: bodies whose freshest copy is on a device are staged through the host
    automatic,  ///< CUDA copies when the library says it takes CUDA memory (mpi_device_support)
    force,      ///< every device copy MPI can address: CUDA ones (the library is taken to be
                ///< GPU-aware whatever its query says) and those in host memory (sim devices)
};

/// CASCADE_GPU_AWARE: unset or "auto" gives automatic, 1 force, 0 off (also on/off,
/// true/false, yes/no).
GpuAware gpu_aware_setting();

/// CASCADE_DATA_CHUNK: bytes per piece of a body staged from a device (default 1 MiB;
/// 0: the whole body at once).
std::size_t data_chunk_setting();

}  // namespace cascade
