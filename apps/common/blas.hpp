// BLAS and LAPACKE for the applications, plus control over OpenBLAS's own thread pool.
// Task-parallel apps run one BLAS call per task on each worker, so OpenBLAS must not start
// threads of its own inside a task: call blas_set_threads(1) before running a task graph.
#pragma once

#include <cblas.h>
#include <lapacke.h>

#include <string_view>

// Declared here as well as in OpenBLAS's cblas.h, so the apps also build against a cblas.h
// that does not declare it (the library we link is OpenBLAS either way).
extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_corename(void);

namespace cascade::apps {

// Number of threads OpenBLAS uses inside one BLAS/LAPACK call (process-wide setting).
inline void blas_set_threads(int n) {
    openblas_set_num_threads(n < 1 ? 1 : n);
}
inline int blas_threads() {
    return openblas_get_num_threads();
}

// The kernel set OpenBLAS picked for this CPU (e.g. "SkylakeX", "Haswell").
inline const char* blas_corename() {
    const char* name = openblas_get_corename();
    return name ? name : "unknown";
}

// A warning when OpenBLAS runs its generic SSE3 ("Prescott") kernels on a CPU with AVX2:
// OpenBLAS builds with DYNAMIC_ARCH fall back to them for CPU models they do not know
// (e.g. Debian's 0.3.21 on Sapphire/Emerald Rapids), which is several times slower.
// The kernel set is chosen when the library loads, so only the environment can change it.
inline const char* blas_core_warning() {
    const std::string_view core = blas_corename();
    if ((core == "Prescott" || core == "prescott") && __builtin_cpu_supports("avx2"))
        return "OpenBLAS uses its generic Prescott kernels on this AVX2 CPU (a CPU model it "
               "does not know); set OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) "
               "for faster kernels";
    return nullptr;
}

}  // namespace cascade::apps
