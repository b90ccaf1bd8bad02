// StarPU-MPI plumbing shared by starpu_cholesky and starpu_gemm: start-up and shut-down, and
// a tiled matrix whose nb x nb tiles are registered as StarPU data with a 2D block-cyclic
// owner over a P x Q grid (tile (i, j) on rank (i mod P) * Q + (j mod Q), as a BLACS "Row"
// grid numbers ranks). Every rank registers every tile; only the owner allocates memory, the
// others receive copies when their tasks need them.
#pragma once

#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common.hpp"

namespace baselines {

// MPI with MPI_THREAD_MULTIPLE (the main thread calls MPI_Allreduce while StarPU-MPI's thread
// runs), then StarPU with STARPU_NCPU workers (no core reserved: the MPI thread is extra, as
// in the Cascade runs where the joining thread drives MPI), then StarPU-MPI on it.
struct StarpuSession {
    int rank = 0, ranks = 1;

    StarpuSession(int* argc, char*** argv, const char* prog) {
        int provided = 0;
        MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &ranks);
        if (provided < MPI_THREAD_MULTIPLE) {
            if (rank == 0)
                std::fprintf(stderr, "%s: error: MPI does not provide MPI_THREAD_MULTIPLE\n", prog);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        starpu_conf conf;
        starpu_conf_init(&conf);
        conf.ncuda = 0;
        conf.nopencl = 0;
        if (starpu_init(&conf) != 0) {
            std::fprintf(stderr, "%s: error: starpu_init failed on rank %d\n", prog, rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (starpu_mpi_init_comm(nullptr, nullptr, 0, MPI_COMM_WORLD) != 0) {
            std::fprintf(stderr, "%s: error: starpu_mpi_init_comm failed on rank %d\n", prog, rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        // Kernels run one per worker: OpenBLAS must not start threads of its own.
        openblas_set_num_threads(1);
    }
    ~StarpuSession() {
        starpu_mpi_shutdown();
        starpu_shutdown();
        MPI_Finalize();
    }
    StarpuSession(const StarpuSession&) = delete;
    StarpuSession& operator=(const StarpuSession&) = delete;

    int workers() const { return static_cast<int>(starpu_cpu_worker_get_count()); }
};

class TiledMatrix {
  public:
    // lower: only tiles (i, j) with i >= j exist. tag_base: first of nt * nt MPI tags.
    TiledMatrix(int n, int nb, int P, int Q, int rank, bool lower, starpu_mpi_tag_t tag_base)
        : n_(n),
          nb_(nb),
          nt_((n + nb - 1) / nb),
          P_(P),
          Q_(Q),
          rank_(rank),
          lower_(lower),
          handles_(static_cast<std::size_t>(nt_) * nt_, nullptr),
          memory_(static_cast<std::size_t>(nt_) * nt_, nullptr) {
        for (int j = 0; j < nt_; ++j) {
            for (int i = lower ? j : 0; i < nt_; ++i) {
                const std::size_t k = index(i, j);
                const int owner = owner_of(i, j);
                if (owner == rank) {
                    const std::size_t bytes =
                        static_cast<std::size_t>(rows(i)) * rows(j) * sizeof(double);
                    memory_[k] =
                        static_cast<double*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
                    if (!memory_[k]) {
                        std::fprintf(stderr, "out of memory for tile (%d, %d)\n", i, j);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                    starpu_matrix_data_register(&handles_[k], STARPU_MAIN_RAM,
                                                reinterpret_cast<uintptr_t>(memory_[k]), rows(i),
                                                rows(i), rows(j), sizeof(double));
                } else {
                    starpu_matrix_data_register(&handles_[k], -1, 0, rows(i), rows(i), rows(j),
                                                sizeof(double));
                }
                starpu_mpi_data_register(handles_[k], tag_base + static_cast<starpu_mpi_tag_t>(k),
                                         owner);
            }
        }
    }
    ~TiledMatrix() {
        for (auto& h : handles_)
            if (h) starpu_data_unregister(h);
        for (double* p : memory_)
            std::free(p);
    }
    TiledMatrix(const TiledMatrix&) = delete;
    TiledMatrix& operator=(const TiledMatrix&) = delete;

    int nt() const { return nt_; }
    int rows(int i) const { return i + 1 < nt_ ? nb_ : n_ - (nt_ - 1) * nb_; }
    int owner_of(int i, int j) const { return (i % P_) * Q_ + (j % Q_); }
    bool mine(int i, int j) const { return owner_of(i, j) == rank_; }
    starpu_data_handle_t operator()(int i, int j) const { return handles_[index(i, j)]; }

    // Sets every element of the tiles this rank owns to f(global row, global col), through
    // starpu_data_acquire so StarPU knows the data changed. Call with no task in flight, then
    // starpu_mpi_cache_flush_all_data so other ranks drop their stale copies.
    template <class F>
    void fill(F f) {
        for_each_mine(
            [&](int i, int j, double* t, int ld) {
                for (int c = 0; c < rows(j); ++c)
                    for (int r = 0; r < rows(i); ++r)
                        t[r + static_cast<std::size_t>(c) * ld] = f(i * nb_ + r, j * nb_ + c);
            },
            STARPU_W);
    }

    // g(i, j, tile, ld) for each tile this rank owns, the tile acquired in `mode`.
    template <class G>
    void for_each_mine(G g, starpu_data_access_mode mode = STARPU_R) {
        for (int j = 0; j < nt_; ++j) {
            for (int i = lower_ ? j : 0; i < nt_; ++i) {
                if (!mine(i, j)) continue;
                const starpu_data_handle_t h = (*this)(i, j);
                starpu_data_acquire(h, mode);
                g(i, j, memory_[index(i, j)], rows(i));
                starpu_data_release(h);
            }
        }
    }

  private:
    std::size_t index(int i, int j) const { return static_cast<std::size_t>(i) * nt_ + j; }

    int n_, nb_, nt_, P_, Q_, rank_;
    bool lower_;
    std::vector<starpu_data_handle_t> handles_;
    std::vector<double*> memory_;
};

// A codelet running `f` on CPU workers with the given access modes, and a history-based
// performance model named `symbol` (used by the dm* schedulers; STARPU_SCHED picks one).
inline starpu_codelet make_codelet(const char* name, starpu_cpu_func_t f,
                                   std::initializer_list<starpu_data_access_mode> modes,
                                   starpu_perfmodel* model) {
    starpu_codelet cl;
    starpu_codelet_init(&cl);
    cl.where = STARPU_CPU;
    cl.cpu_funcs[0] = f;
    cl.cpu_funcs_name[0] = name;
    cl.nbuffers = static_cast<int>(modes.size());
    int k = 0;
    for (auto m : modes)
        cl.modes[k++] = m;
    cl.name = name;
    cl.model = model;
    return cl;
}

inline starpu_perfmodel history_model(const char* symbol) {
    starpu_perfmodel m{};
    m.type = STARPU_HISTORY_BASED;
    m.symbol = symbol;
    return m;
}

}  // namespace baselines
