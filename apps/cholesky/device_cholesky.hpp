// Tiled Cholesky on the devices of one process (the device layer, no MPI): every lower tile
// is a cascade::Data, the four tile kernels are device kernels with a CPU variant (the app's
// OpenBLAS/LAPACKE kernels, on cpu and sim devices) and, where CLBlast is found, OpenCL
// variants of trsm, syrk and gemm (cuBLAS variants where the CUDA toolkit is); the scheduler places
// every task (.device = any). Device memory can be capped to a fraction of the matrix; the run
// counts the bytes moved and the minimum the same schedule needs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tile_matrix.hpp"

namespace cascade::apps {

struct DeviceRunOptions {
    std::string kind = "sim";  // sim: `sims` simulated devices; cpu: the pool's workers;
                               // opencl: the cpu device and one OpenCL device;
                               // cuda: the cpu device and one CUDA device
    int n = 2048;
    int nb = 256;
    int threads = 1;  // pool workers (the cpu device's)
    int sims = 2;
    double cap = 0.25;  // data each device may hold, as a fraction of the matrix; 0: no cap
    std::uint64_t seed = 2024;
    bool indefinite = false;  // testing: a potrf task fails
};

struct DeviceRunResult {
    double seconds = 0;               // submission of the first task to the factor on the host
    std::uint64_t bytes_moved = 0;    // host to devices and back, the factorization's own
    std::uint64_t bytes_minimum = 0;  // what the same placements move with unlimited memory,
                                      // plus each tile home once
    std::uint64_t evictions = 0;
    std::uint64_t tasks = 0;
    std::size_t device_memory = 0;                               // the cap in bytes (0: none)
    std::vector<std::pair<std::string, std::uint64_t>> kernels;  // per device: name, kernels
    double ratio() const {
        return bytes_minimum ? static_cast<double>(bytes_moved) / static_cast<double>(bytes_minimum)
                             : 1.0;
    }
};

// Whether `--device opencl` is available (built with OpenCL and CLBlast).
bool device_opencl_built() noexcept;
// Whether `--device cuda` is available (built with the CUDA toolkit; cuBLAS is opened at run
// time).
bool device_cuda_built() noexcept;

// Factors the seeded SPD matrix of TileMatrix::fill_random_spd on the devices; `factor` (one
// rank's TileMatrix holding every tile) receives L. Throws UsageError when the devices asked
// for are missing, and the failing task's name and error when a kernel fails.
DeviceRunResult run_on_devices(const DeviceRunOptions& opt, TileMatrix& factor);

}  // namespace cascade::apps
