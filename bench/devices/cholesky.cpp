// Tiled Cholesky (right-looking, lower) on simulated devices whose memory is capped to a
// fraction of the matrix: tiles are Data, the kernels OpenBLAS/LAPACKE calls run by the
// devices (their CPU variants), the scheduler places every task (.device = any).
//   devices_cholesky [--n 2048] [--nb 256] [--sims 2] [--cap 0.25] [--cpu 0|1] [--opencl 0|1]
// --opencl 1: the OpenCL device joins (trsm, syrk and gemm through CLBlast there; potrf,
// which CLBlast lacks, on the cpu and sim devices), with the cpu device.
// Checks the factor (||A x - L L^T x|| / (||A|| ||x||) with the seeded test matrix), and
// compares the bytes moved with the minimum of the same schedule: the transfers the MSI
// protocol needs for the same task placements with unlimited memory, plus every tile back to
// the host once.
// Record: bench cholesky, device sim, system cascade, n, nb, sims, cap, seconds, gflops,
// bytes_moved, bytes_minimum, residual, evictions.
#include <cblas.h>
#include <lapacke.h>
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cascade/device/devices.hpp"
#include "cascade/device/msi.hpp"
#include "common/matrix.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"

namespace {

// Kernels: argument 0.. Data tiles, the last argument the tile size.
cascade::Kernel potrf("potrf"), trsm("trsm"), syrk("syrk"), gemm("gemm");

void register_kernels() {
    potrf.cpu([](cascade::KernelArgs& a) {
        const int b = a.scalar<int>(1);
        if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', b, a.data<double>(0), b) != 0)
            throw std::runtime_error("dpotrf: not positive definite");
    });
    trsm.cpu([](cascade::KernelArgs& a) {  // A_ik <- A_ik L_kk^-T
        const int b = a.scalar<int>(2);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b, b, 1.0,
                    a.data<double>(0), b, a.data<double>(1), b);
    });
    syrk.cpu([](cascade::KernelArgs& a) {  // A_ii -= A_ik A_ik^T
        const int b = a.scalar<int>(2);
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, a.data<double>(0), b, 1.0,
                    a.data<double>(1), b);
    });
    gemm.cpu([](cascade::KernelArgs& a) {  // A_ij -= A_ik A_jk^T
        const int b = a.scalar<int>(3);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, a.data<double>(0), b,
                    a.data<double>(1), b, 1.0, a.data<double>(2), b);
    });
}

// The OpenCL variants: CLBlast on the device's queue (column-major tiles of b x b).
cl_mem mem(cascade::OpenclCall& c, int i) {
    return *static_cast<cl_mem*>(c.slots[i]);
}
void check(CLBlastStatusCode st, const char* what) {
    if (st != CLBlastSuccess)
        throw std::runtime_error(std::string(what) + " failed: " + std::to_string(st));
}

void register_opencl_kernels() {
    trsm.opencl([](cascade::OpenclCall& c) {
        const auto b = static_cast<std::size_t>(*static_cast<const int*>(c.slots[2]));
        auto q = static_cast<cl_command_queue>(c.queue);
        check(CLBlastDtrsm(CLBlastLayoutColMajor, CLBlastSideRight, CLBlastTriangleLower,
                           CLBlastTransposeYes, CLBlastDiagonalNonUnit, b, b, 1.0, mem(c, 0), 0, b,
                           mem(c, 1), 0, b, &q, reinterpret_cast<cl_event*>(c.event)),
              "CLBlastDtrsm");
    });
    syrk.opencl([](cascade::OpenclCall& c) {
        const auto b = static_cast<std::size_t>(*static_cast<const int*>(c.slots[2]));
        auto q = static_cast<cl_command_queue>(c.queue);
        check(CLBlastDsyrk(CLBlastLayoutColMajor, CLBlastTriangleLower, CLBlastTransposeNo, b, b,
                           -1.0, mem(c, 0), 0, b, 1.0, mem(c, 1), 0, b, &q,
                           reinterpret_cast<cl_event*>(c.event)),
              "CLBlastDsyrk");
    });
    gemm.opencl([](cascade::OpenclCall& c) {
        const auto b = static_cast<std::size_t>(*static_cast<const int*>(c.slots[3]));
        auto q = static_cast<cl_command_queue>(c.queue);
        check(CLBlastDgemm(CLBlastLayoutColMajor, CLBlastTransposeNo, CLBlastTransposeYes, b, b, b,
                           -1.0, mem(c, 0), 0, b, mem(c, 1), 0, b, 1.0, mem(c, 2), 0, b, &q,
                           reinterpret_cast<cl_event*>(c.event)),
              "CLBlastDgemm");
    });
}

struct Use {
    int tile;
    cascade::DataAccess mode;
};

}  // namespace

int main(int argc, char** argv) {
    int n = 2048, nb = 256, sims = 2, use_cpu = 0, use_opencl = 0;
    double cap = 0.25;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--n")
            n = std::atoi(argv[i + 1]);
        else if (a == "--nb")
            nb = std::atoi(argv[i + 1]);
        else if (a == "--sims")
            sims = std::atoi(argv[i + 1]);
        else if (a == "--cap")
            cap = std::atof(argv[i + 1]);
        else if (a == "--cpu")
            use_cpu = std::atoi(argv[i + 1]);
        else if (a == "--opencl")
            use_opencl = std::atoi(argv[i + 1]);
    }
    openblas_set_num_threads(1);
    register_kernels();
    if (use_opencl) {
        register_opencl_kernels();
        use_cpu = 1;  // potrf needs a CPU-variant device
    }
    const int nt = n / nb;
    const std::size_t tile_bytes = std::size_t(nb) * std::size_t(nb) * sizeof(double);
    const std::size_t matrix_bytes = std::size_t(n) * std::size_t(n) * sizeof(double);
    const std::uint64_t seed = 42;

    cascade::Threadpool tp(1);
    cascade::DevicesOptions o;
    o.cpu = use_cpu != 0;
    o.sim = sims;
    o.opencl = use_opencl;
    o.memory = static_cast<std::size_t>(cap * static_cast<double>(matrix_bytes));
    cascade::Devices devs(tp, o);
    auto id = [&](int i, int j) { return i * (i + 1) / 2 + j; };  // lower tiles, i >= j
    std::vector<cascade::Data<double>> tiles;
    std::vector<double> buf(std::size_t(nb) * std::size_t(nb));
    for (int i = 0; i < nt; ++i)
        for (int j = 0; j <= i; ++j) {
            for (int c = 0; c < nb; ++c)
                for (int r = 0; r < nb; ++r)
                    buf[std::size_t(c) * std::size_t(nb) + std::size_t(r)] =
                        cascade_bench::spd_entry(seed, n, i * nb + r, j * nb + c);
            std::string name = "A";  // (not "A" + ...: GCC 12 warns wrongly about that)
            name += std::to_string(i);
            name += ',';
            name += std::to_string(j);
            tiles.emplace_back(devs, std::span<const double>(buf), name);
        }

    if (use_opencl) {
        // CLBlast compiles its kernels when first called (seconds on PoCL): not timed.
        std::vector<double> eye(std::size_t(nb) * std::size_t(nb), 0.0);
        for (int i = 0; i < nb; ++i)
            eye[std::size_t(i) * std::size_t(nb + 1)] = 1.0;
        cascade::Data<double> w0(devs, std::span<const double>(eye)),
            w1(devs, std::span<const double>(eye)), w2(devs, std::span<const double>(eye));
        const cascade::Launch on_cl{.device = cascade::DeviceKind::opencl};
        devs.submit(trsm, cascade::read(w0), cascade::readwrite(w1), nb, on_cl);
        devs.submit(syrk, cascade::read(w0), cascade::readwrite(w2), nb, on_cl);
        devs.submit(gemm, cascade::read(w0), cascade::read(w1), cascade::readwrite(w2), nb, on_cl);
        devs.wait_all();
    }
    const auto warm = devs.stats();

    std::vector<cascade::DeviceTask> tasks;
    std::vector<std::vector<Use>> uses;
    auto T = [&](int i, int j) -> cascade::Data<double>& { return tiles[std::size_t(id(i, j))]; };
    const double t0 = cascade_bench::now_seconds();
    for (int k = 0; k < nt; ++k) {
        tasks.push_back(devs.submit(potrf, cascade::readwrite(T(k, k)), nb));
        uses.push_back({{id(k, k), cascade::DataAccess::readwrite}});
        for (int i = k + 1; i < nt; ++i) {
            tasks.push_back(
                devs.submit(trsm, cascade::read(T(k, k)), cascade::readwrite(T(i, k)), nb));
            uses.push_back({{id(k, k), cascade::DataAccess::read},
                            {id(i, k), cascade::DataAccess::readwrite}});
        }
        for (int i = k + 1; i < nt; ++i) {
            tasks.push_back(
                devs.submit(syrk, cascade::read(T(i, k)), cascade::readwrite(T(i, i)), nb));
            uses.push_back({{id(i, k), cascade::DataAccess::read},
                            {id(i, i), cascade::DataAccess::readwrite}});
            for (int j = k + 1; j < i; ++j) {
                tasks.push_back(devs.submit(gemm, cascade::read(T(i, k)), cascade::read(T(j, k)),
                                            cascade::readwrite(T(i, j)), nb));
                uses.push_back({{id(i, k), cascade::DataAccess::read},
                                {id(j, k), cascade::DataAccess::read},
                                {id(i, j), cascade::DataAccess::readwrite}});
            }
        }
    }
    // The factor back on the host.
    std::vector<std::vector<double>> L(tiles.size());
    for (std::size_t t = 0; t < tiles.size(); ++t)
        L[t] = tiles[t].to_vector();
    const double seconds = cascade_bench::now_seconds() - t0;
    for (auto& t : tasks)
        t.get();

    // Check: r = A x - L (L^T x).
    std::vector<double> x(std::size_t(n), 0.0), y(std::size_t(n), 0.0), ax(std::size_t(n), 0.0);
    for (int i = 0; i < n; ++i)
        x[std::size_t(i)] = cascade_bench::check_x(seed, i);
    double anorm = 0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            const double a = cascade_bench::spd_entry(seed, n, i, j);
            ax[std::size_t(i)] += a * x[std::size_t(j)];
            anorm = std::max(anorm, std::abs(a));
        }
    auto l = [&](int r, int c) {  // L(r, c), r >= c
        const int ti = r / nb, tj = c / nb;
        return L[std::size_t(id(ti, tj))]
                [std::size_t(c % nb) * std::size_t(nb) + std::size_t(r % nb)];
    };
    for (int c = 0; c < n; ++c)  // y = L^T x
        for (int r = c; r < n; ++r)
            y[std::size_t(c)] += l(r, c) * x[std::size_t(r)];
    double rmax = 0, xnorm = 0;
    for (int r = 0; r < n; ++r) {
        double s = 0;
        for (int c = 0; c <= r; ++c)
            s += l(r, c) * y[std::size_t(c)];
        rmax = std::max(rmax, std::abs(ax[std::size_t(r)] - s));
        xnorm = std::max(xnorm, std::abs(x[std::size_t(r)]));
    }
    const double residual = rmax / (anorm * xnorm * n);

    // The minimum of this schedule: replay the placements through the MSI protocol with
    // unlimited memory (a copy staged through the host counts twice), then every tile home.
    std::vector<std::vector<cascade::Msi>> st(
        tiles.size(), std::vector<cascade::Msi>(std::size_t(devs.size()) + (o.cpu ? 0 : 1),
                                                cascade::Msi::invalid));
    for (auto& s : st)
        s[0] = cascade::Msi::modified;
    std::uint64_t minimum = 0;
    for (std::size_t t = 0; t < tasks.size(); ++t) {
        const int d = tasks[t].device();
        const int space = (o.cpu && d == 0) ? 0 : (o.cpu ? d : d + 1);
        for (const Use& u : uses[t]) {
            const auto p = cascade::msi_access(st[std::size_t(u.tile)], space, u.mode);
            if (p.source >= 0) minimum += (p.via_host ? 2 : 1) * tile_bytes;
        }
    }
    for (auto& s : st) {
        const auto p = cascade::msi_access(s, 0, cascade::DataAccess::read);
        if (p.source >= 0) minimum += tile_bytes;
    }
    auto stats = devs.stats();  // the factorization's own, without the warm-up
    std::uint64_t evictions = 0;
    stats.bytes_in -= warm.bytes_in;
    stats.bytes_out -= warm.bytes_out;
    for (std::size_t d = 0; d < stats.devices.size(); ++d) {
        stats.devices[d].tasks -= warm.devices[d].tasks;
        evictions += stats.devices[d].evictions - warm.devices[d].evictions;
    }
    const double flops = static_cast<double>(n) * n * n / 3.0;
    cascade_bench::Record rec;
    rec.add("bench", "cholesky")
        .add("device", use_opencl ? "opencl" : "sim")
        .add("system", "cascade");
    rec.add("n", n).add("nb", nb).add("sims", sims).add("cpu", use_cpu).add("cap", cap);
    rec.add("seconds", seconds).add("gflops", flops / seconds * 1e-9);
    rec.add("bytes_moved", stats.bytes_in + stats.bytes_out).add("bytes_minimum", minimum);
    rec.add("ratio",
            static_cast<double>(stats.bytes_in + stats.bytes_out) / static_cast<double>(minimum));
    rec.add("residual", residual, "%.3e").add("evictions", evictions).add("tasks", tasks.size());
    for (int d = 0; d < devs.size(); ++d) {  // kernels per device
        std::string key = "kernels_";
        const std::string name = devs.device(d).name();
        key += name.substr(0, name.find(' '));
        rec.add(key, stats.devices[std::size_t(d)].tasks);
    }
    rec.print();
    return residual < 1e-14 ? 0 : 1;
}
