// What the driver (main.cpp) needs from a distributed GEMM variant. The variant owns its
// tiles and active messages for the whole job (registered once, in the same order on every
// rank); its taskflows live for one run, on that run's thread pool.
//
// One run, on every rank:  begin_run(tp)  barrier  [timed: tp.start(); start(); tp.join()]
// end_run(). start() ships this rank's tiles of A and B to the ranks that need them and
// fulfills the promises of local tasks whose inputs are local; the rest of the run is
// driven by tasks and active messages.
#pragma once

#include <cstdint>
#include <string>

#include "blas_clock.hpp"
#include "cascade/cascade.hpp"
#include "tiles.hpp"

namespace cascade::apps::gemm {

class GemmAlgorithm {
  public:
    virtual ~GemmAlgorithm() = default;

    // e.g. "2d, grid 1x2".
    virtual std::string describe() const = 0;
    // Creates this run's taskflows on `tp` (not timed).
    virtual void begin_run(cascade::Threadpool& tp, BlasClock& clock) = 0;
    // Seeds the run (see above); call after tp.start(), then tp.join().
    virtual void start() = 0;
    // Drops this run's taskflows; call after tp.join(), before tp is destroyed.
    virtual void end_run() = 0;
    // Tasks this rank runs in one run (compared with the pool's count after each run).
    virtual std::uint64_t local_tasks() const = 0;
    // C tile (i,j) if this rank owns it after a run (column-major, size(i) x size(j), leading
    // dimension `ld`), else data == nullptr.
    struct CTile {
        const double* data = nullptr;
        int ld = 0;
    };
    virtual CTile c_tile(int i, int j) const = 0;
};

}  // namespace cascade::apps::gemm
