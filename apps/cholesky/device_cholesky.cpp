#include "device_cholesky.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/blas.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/device/devices.hpp"
#include "cascade/device/msi.hpp"
#include "kernels.hpp"

#ifdef CASCADE_CHOLESKY_CLBLAST
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>
#endif
#ifdef CASCADE_CHOLESKY_CUBLAS
#include <cublas_v2.h>
#include <dlfcn.h>

#include <map>
#endif

namespace cascade::apps {

namespace {

// The kernels. Arguments: the Data tiles (column-major, leading dimension = rows), then the
// tile sizes as ints.
//   potrf(rw A_kk, n)                        A_kk = chol(A_kk)
//   trsm(r L_kk, rw A_ik, m, n)              A_ik = A_ik L_kk^-T          (m x n)
//   syrk(r A_ik, rw A_ii, n, k)              A_ii -= A_ik A_ik^T          (n x n, A_ik n x k)
//   gemm(r A_ik, r A_jk, rw A_ij, m, n, k)   A_ij -= A_ik A_jk^T          (m x n)
::cascade::Kernel potrf_k("potrf"), trsm_k("trsm"), syrk_k("syrk"), gemm_k("gemm");

#ifdef CASCADE_CHOLESKY_CLBLAST
cl_mem mem(const ::cascade::OpenclCall& c, int i) {
    return *static_cast<cl_mem*>(c.slots[i]);
}
std::size_t dim(const ::cascade::OpenclCall& c, int i) {
    return static_cast<std::size_t>(*static_cast<const int*>(c.slots[i]));
}
void check(CLBlastStatusCode st, const char* what) {
    if (st != CLBlastSuccess)
        throw std::runtime_error(std::string(what) + " failed: CLBlast status " +
                                 std::to_string(static_cast<int>(st)));
}
#endif

#ifdef CASCADE_CHOLESKY_CUBLAS
// cuBLAS, opened at run time like the device layer's CUDA driver, so that the program starts
// (and its other modes run) where no CUDA library is installed. One handle per CUDA context,
// made on the device runtime's thread at the first call there.
struct Cublas {
    decltype(&::cublasCreate_v2) create = nullptr;
    decltype(&::cublasSetStream_v2) set_stream = nullptr;
    decltype(&::cublasDtrsm_v2) dtrsm = nullptr;
    decltype(&::cublasDsyrk_v2) dsyrk = nullptr;
    decltype(&::cublasDgemm_v2) dgemm = nullptr;
    std::string error;
    std::mutex lock;
    std::map<void*, cublasHandle_t> handles;
};

Cublas& cublas() {
    static Cublas c;
    static std::once_flag once;
    std::call_once(once, [] {
        void* lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen(CASCADE_CHOLESKY_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            c.error = "cuBLAS (libcublas.so of the CUDA toolkit) not found";
            return;
        }
        c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, "cublasCreate_v2"));
        c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(lib, "cublasSetStream_v2"));
        c.dtrsm = reinterpret_cast<decltype(c.dtrsm)>(dlsym(lib, "cublasDtrsm_v2"));
        c.dsyrk = reinterpret_cast<decltype(c.dsyrk)>(dlsym(lib, "cublasDsyrk_v2"));
        c.dgemm = reinterpret_cast<decltype(c.dgemm)>(dlsym(lib, "cublasDgemm_v2"));
        if (!c.create || !c.set_stream || !c.dtrsm || !c.dsyrk || !c.dgemm)
            c.error = "libcublas.so lacks a cuBLAS v2 function this program calls";
    });
    if (!c.error.empty()) throw std::runtime_error(c.error);
    return c;
}

void check(cublasStatus_t st, const char* what) {
    if (st != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string(what) + " failed: cuBLAS status " +
                                 std::to_string(static_cast<int>(st)));
}

// The cuBLAS handle of the call's context, set to queue on the call's stream.
cublasHandle_t handle(const ::cascade::CudaCall& c) {
    Cublas& b = cublas();
    std::lock_guard g(b.lock);
    cublasHandle_t& h = b.handles[c.context];
    if (!h) check(b.create(&h), "cublasCreate");
    check(b.set_stream(h, static_cast<cudaStream_t>(c.stream)), "cublasSetStream");
    return h;
}
const double* dptr(const ::cascade::CudaCall& c, int i) {
    return reinterpret_cast<const double*>(*static_cast<const unsigned long long*>(c.slots[i]));
}
double* dptr_rw(const ::cascade::CudaCall& c, int i) {
    return reinterpret_cast<double*>(*static_cast<const unsigned long long*>(c.slots[i]));
}
int idim(const ::cascade::CudaCall& c, int i) {
    return *static_cast<const int*>(c.slots[i]);
}
#endif

void register_kernels() {
    static std::once_flag once;
    std::call_once(once, [] {
        potrf_k.cpu([](::cascade::KernelArgs& a) {
            const int n = a.scalar<int>(1);
            potrf_tile(n, a.data<double>(0), n);
        });
        trsm_k.cpu([](::cascade::KernelArgs& a) {
            const int m = a.scalar<int>(2), n = a.scalar<int>(3);
            trsm_tile(m, n, a.data<double>(0), n, a.data<double>(1), m);
        });
        syrk_k.cpu([](::cascade::KernelArgs& a) {
            const int n = a.scalar<int>(2), k = a.scalar<int>(3);
            syrk_tile(n, k, a.data<double>(0), n, a.data<double>(1), n);
        });
        gemm_k.cpu([](::cascade::KernelArgs& a) {
            const int m = a.scalar<int>(3), n = a.scalar<int>(4), k = a.scalar<int>(5);
            gemm_tile(m, n, k, a.data<double>(0), m, a.data<double>(1), n, a.data<double>(2), m);
        });
#ifdef CASCADE_CHOLESKY_CLBLAST
        // CLBlast on the device's queue; CLBlast has no potrf, which stays on the cpu.
        trsm_k.opencl([](::cascade::OpenclCall& c) {
            const std::size_t m = dim(c, 2), n = dim(c, 3);
            auto q = static_cast<cl_command_queue>(c.queue);
            check(CLBlastDtrsm(CLBlastLayoutColMajor, CLBlastSideRight, CLBlastTriangleLower,
                               CLBlastTransposeYes, CLBlastDiagonalNonUnit, m, n, 1.0, mem(c, 0), 0,
                               n, mem(c, 1), 0, m, &q, reinterpret_cast<cl_event*>(c.event)),
                  "CLBlastDtrsm");
        });
        syrk_k.opencl([](::cascade::OpenclCall& c) {
            const std::size_t n = dim(c, 2), k = dim(c, 3);
            auto q = static_cast<cl_command_queue>(c.queue);
            check(CLBlastDsyrk(CLBlastLayoutColMajor, CLBlastTriangleLower, CLBlastTransposeNo, n,
                               k, -1.0, mem(c, 0), 0, n, 1.0, mem(c, 1), 0, n, &q,
                               reinterpret_cast<cl_event*>(c.event)),
                  "CLBlastDsyrk");
        });
        gemm_k.opencl([](::cascade::OpenclCall& c) {
            const std::size_t m = dim(c, 3), n = dim(c, 4), k = dim(c, 5);
            auto q = static_cast<cl_command_queue>(c.queue);
            check(CLBlastDgemm(CLBlastLayoutColMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n,
                               k, -1.0, mem(c, 0), 0, m, mem(c, 1), 0, n, 1.0, mem(c, 2), 0, m, &q,
                               reinterpret_cast<cl_event*>(c.event)),
                  "CLBlastDgemm");
        });
#endif
#ifdef CASCADE_CHOLESKY_CUBLAS
        // cuBLAS on the device's kernel stream; potrf stays on the cpu, as with OpenCL.
        trsm_k.cuda([](::cascade::CudaCall& c) {
            const int m = idim(c, 2), n = idim(c, 3);
            const double one = 1.0;
            check(cublas().dtrsm(handle(c), CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                 CUBLAS_DIAG_NON_UNIT, m, n, &one, dptr(c, 0), n, dptr_rw(c, 1), m),
                  "cublasDtrsm");
        });
        syrk_k.cuda([](::cascade::CudaCall& c) {
            const int n = idim(c, 2), k = idim(c, 3);
            const double one = 1.0, minus = -1.0;
            check(cublas().dsyrk(handle(c), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &minus,
                                 dptr(c, 0), n, &one, dptr_rw(c, 1), n),
                  "cublasDsyrk");
        });
        gemm_k.cuda([](::cascade::CudaCall& c) {
            const int m = idim(c, 3), n = idim(c, 4), k = idim(c, 5);
            const double one = 1.0, minus = -1.0;
            check(cublas().dgemm(handle(c), CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &minus, dptr(c, 0),
                                 m, dptr(c, 1), n, &one, dptr_rw(c, 2), m),
                  "cublasDgemm");
        });
#endif
    });
}

struct Use {
    int tile;
    ::cascade::DataAccess mode;
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

bool device_cuda_built() noexcept {
#ifdef CASCADE_CHOLESKY_CUBLAS
    return true;
#else
    return false;
#endif
}

bool device_opencl_built() noexcept {
#ifdef CASCADE_CHOLESKY_CLBLAST
    return true;
#else
    return false;
#endif
}

DeviceRunResult run_on_devices(const DeviceRunOptions& opt, TileMatrix& factor) {
    const bool opencl = opt.kind == "opencl", cuda = opt.kind == "cuda";
    if (opencl && !device_opencl_built())
        throw UsageError(
            "--device opencl: this build has no OpenCL device kernels (they need OpenCL and "
            "CLBlast; Debian: apt-get install ocl-icd-opencl-dev libclblast-dev)");
    if (cuda && !device_cuda_built())
        throw UsageError(
            "--device cuda: this build has no CUDA device kernels (they need the CUDA toolkit "
            "with cuBLAS at configure time)");
    register_kernels();
    blas_set_threads(1);  // one BLAS thread per kernel: the devices run kernels side by side

    const TileLayout& L = factor.layout();
    const int nt = L.nt;
    factor.fill_random_spd(opt.seed);
    if (opt.indefinite) factor.tile(nt / 2, nt / 2)[0] = -1.0;
    const std::size_t matrix_bytes =
        static_cast<std::size_t>(opt.n) * static_cast<std::size_t>(opt.n) * sizeof(double);

    DeviceRunResult r;
    ::cascade::Threadpool tp(opt.threads);
    ::cascade::DevicesOptions o;
    o.cpu = opt.kind != "sim";  // opencl, cuda: potrf runs on the cpu device
    o.sim = opt.kind == "sim" ? opt.sims : 0;
    o.opencl = opencl ? 1 : 0;
    o.cuda = cuda ? 1 : 0;
    // The cap (0: CASCADE_DEVICE_MEMORY if set, else the device's memory). A sim device's
    // arena (reserved address space, pages used as touched) holds the whole matrix twice.
    r.device_memory = static_cast<std::size_t>(opt.cap * static_cast<double>(matrix_bytes));
    o.memory = r.device_memory;
    o.sim_options.memory = std::max(o.sim_options.memory, 2 * matrix_bytes);
    o.name = "cholesky";
    ::cascade::Devices devs(tp, o);

    auto id = [](int i, int j) { return i * (i + 1) / 2 + j; };  // lower tiles, i >= j
    std::vector<::cascade::Data<double>> tiles;
    tiles.reserve(static_cast<std::size_t>(nt) * static_cast<std::size_t>(nt + 1) / 2);
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j <= i; ++j) {
            const std::size_t count =
                static_cast<std::size_t>(L.rows(i)) * static_cast<std::size_t>(L.rows(j));
            std::string name = "A(";
            name += std::to_string(i);
            name += ',';
            name += std::to_string(j);
            name += ')';
            tiles.emplace_back(devs, std::span<const double>(factor.tile(i, j), count), name);
        }
    auto T = [&](int i, int j) -> ::cascade::Data<double>& {
        return tiles[static_cast<std::size_t>(id(i, j))];
    };

    if (opencl || cuda) {
        // CLBlast compiles its kernels at their first call (seconds on PoCL), cuBLAS makes its
        // handle: not timed.
        const int b = L.rows(0);
        std::vector<double> eye(static_cast<std::size_t>(b) * static_cast<std::size_t>(b), 0.0);
        for (int i = 0; i < b; ++i)
            eye[static_cast<std::size_t>(i) * static_cast<std::size_t>(b + 1)] = 1.0;
        ::cascade::Data<double> w0(devs, std::span<const double>(eye)),
            w1(devs, std::span<const double>(eye)), w2(devs, std::span<const double>(eye));
        const ::cascade::Launch on_cl{.device = cuda ? ::cascade::DeviceKind::cuda
                                                     : ::cascade::DeviceKind::opencl};
        devs.submit(trsm_k, ::cascade::read(w0), ::cascade::readwrite(w1), b, b, on_cl);
        devs.submit(syrk_k, ::cascade::read(w0), ::cascade::readwrite(w2), b, b, on_cl);
        devs.submit(gemm_k, ::cascade::read(w0), ::cascade::read(w1), ::cascade::readwrite(w2), b,
                    b, b, on_cl);
        devs.wait_all();
    }
    const ::cascade::DevicesStats warm = devs.stats();

    std::vector<::cascade::DeviceTask> tasks;
    std::vector<std::vector<Use>> uses;
    std::deque<std::string> names;  // stable addresses for Launch::name
    auto launch = [&](std::string name) {
        names.push_back(std::move(name));
        return ::cascade::Launch{.name = names.back().c_str()};
    };
    using ::cascade::DataAccess;
    const double t0 = now();
    for (int k = 0; k < nt; ++k) {
        const int bk = L.rows(k);
        tasks.push_back(devs.submit(potrf_k, ::cascade::readwrite(T(k, k)), bk,
                                    launch("potrf(" + std::to_string(k) + ")")));
        uses.push_back({{id(k, k), DataAccess::readwrite}});
        for (int i = k + 1; i < nt; ++i) {
            tasks.push_back(devs.submit(
                trsm_k, ::cascade::read(T(k, k)), ::cascade::readwrite(T(i, k)), L.rows(i), bk,
                launch("trsm(" + std::to_string(i) + "," + std::to_string(k) + ")")));
            uses.push_back({{id(k, k), DataAccess::read}, {id(i, k), DataAccess::readwrite}});
        }
        for (int i = k + 1; i < nt; ++i) {
            const std::string ik = std::to_string(i) + ",";
            tasks.push_back(devs.submit(syrk_k, ::cascade::read(T(i, k)),
                                        ::cascade::readwrite(T(i, i)), L.rows(i), bk,
                                        launch("syrk(" + ik + std::to_string(k) + ")")));
            uses.push_back({{id(i, k), DataAccess::read}, {id(i, i), DataAccess::readwrite}});
            for (int j = k + 1; j < i; ++j) {
                tasks.push_back(devs.submit(
                    gemm_k, ::cascade::read(T(i, k)), ::cascade::read(T(j, k)),
                    ::cascade::readwrite(T(i, j)), L.rows(i), L.rows(j), bk,
                    launch("gemm(" + ik + std::to_string(j) + "," + std::to_string(k) + ")")));
                uses.push_back({{id(i, k), DataAccess::read},
                                {id(j, k), DataAccess::read},
                                {id(i, j), DataAccess::readwrite}});
            }
        }
    }
    // The factor back on the host. A read request waits for the tile's last writer; a failed
    // writer fails it, and the loop below names the first failed task.
    std::exception_ptr copy_error;
    for (int i = 0; i < nt && !copy_error; ++i)
        for (int j = 0; j <= i && !copy_error; ++j) {
            auto h = T(i, j).request(DataAccess::read);
            try {
                const std::span<double> s = h.get();
                std::memcpy(factor.tile(i, j), s.data(), s.size_bytes());
            } catch (...) {
                copy_error = std::current_exception();
            }
            T(i, j).release();
        }
    r.seconds = now() - t0;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        try {
            tasks[t].get();
        } catch (const std::exception& e) {
            devs.wait_all();
            throw std::runtime_error("task '" + names[t] + "' failed: " + e.what());
        }
    }
    if (copy_error) std::rethrow_exception(copy_error);

    // The minimum of this schedule: its placements replayed through the MSI protocol with
    // unlimited memory (a copy staged through the host counts twice), then every tile home.
    // Memory spaces: 0 the host (also the cpu device's), then one per other device.
    const int spaces = devs.size() + (o.cpu ? 0 : 1);
    std::vector<std::vector<::cascade::Msi>> st(
        tiles.size(),
        std::vector<::cascade::Msi>(static_cast<std::size_t>(spaces), ::cascade::Msi::invalid));
    for (auto& s : st)
        s[0] = ::cascade::Msi::modified;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        const int d = tasks[t].device();
        const int space = o.cpu ? d : d + 1;
        for (const Use& u : uses[t]) {
            const auto p =
                ::cascade::msi_access(st[static_cast<std::size_t>(u.tile)], space, u.mode);
            if (p.source >= 0)
                r.bytes_minimum +=
                    (p.via_host ? 2 : 1) * tiles[static_cast<std::size_t>(u.tile)].bytes();
        }
    }
    for (std::size_t t = 0; t < st.size(); ++t) {
        const auto p = ::cascade::msi_access(st[t], 0, DataAccess::read);
        if (p.source >= 0) r.bytes_minimum += tiles[t].bytes();
    }

    const ::cascade::DevicesStats stats = devs.stats();  // without the warm-up's
    r.bytes_moved = (stats.bytes_in - warm.bytes_in) + (stats.bytes_out - warm.bytes_out);
    r.tasks = tasks.size();
    for (std::size_t d = 0; d < stats.devices.size(); ++d) {
        r.evictions += stats.devices[d].evictions - warm.devices[d].evictions;
        const std::string name = devs.device(static_cast<int>(d)).name();
        r.kernels.emplace_back(name.substr(0, name.find(' ')),
                               stats.devices[d].tasks - warm.devices[d].tasks);
    }
    return r;
}

}  // namespace cascade::apps
