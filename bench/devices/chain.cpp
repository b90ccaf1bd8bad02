// PREMA's DGEMM chain: C_k = A_k * C_{k-1} for k = 1..steps, each A_k coming from the host and
// each C_k read back by the host, all submitted at once; with the device layer's optimizations
// on (page-locked host copies, separate queues for copies in, copies out and kernels, a device
// memory pool) and off.
//   devices_chain --device sim|opencl --n N --steps K --opt on|off [--reps R]
// sim: a modelled GPU (12 GB/s copies page-locked, half from pageable memory, 8 us per copy,
// 50 us per allocation without the pool; kernels take 2n^3 / 5 TF/s). opencl: CLBlast's DGEMM
// on the OpenCL device (PoCL here; page-locked copies do not apply).
// Record: bench chain, device, system cascade, opt, n, steps, seconds (median),
// transfer_seconds and kernel_seconds (summed op times) and hidden (fraction of transfer time
// overlapped with kernels: 1 - (wall - kernel) / transfer, clamped to [0, 1]).
#include <cblas.h>
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cascade/device/devices.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"

namespace {

cascade::Kernel& dgemm_kernel() {
    static cascade::Kernel k("dgemm");
    static bool once = [] {
        // C = A * B, n x n, column-major; argument 3 is n.
        k.cpu([](cascade::KernelArgs& a) {
            const int n = a.scalar<int>(3);
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data<double>(0),
                        n, a.data<double>(1), n, 0.0, a.data<double>(2), n);
        });
        k.opencl([](cascade::OpenclCall& c) {
            const int n = *static_cast<const int*>(c.slots[3]);
            auto mem = [&](int i) { return *static_cast<cl_mem*>(c.slots[i]); };
            cl_command_queue q = static_cast<cl_command_queue>(c.queue);
            cl_event ev = nullptr;
            const auto st = CLBlastDgemm(CLBlastLayoutColMajor, CLBlastTransposeNo,
                                         CLBlastTransposeNo, std::size_t(n), std::size_t(n),
                                         std::size_t(n), 1.0, mem(0), 0, std::size_t(n), mem(1), 0,
                                         std::size_t(n), 0.0, mem(2), 0, std::size_t(n), &q, &ev);
            if (st != CLBlastSuccess)
                throw std::runtime_error("CLBlastDgemm failed: " + std::to_string(st));
            *c.event = ev;
        });
        k.model([](const cascade::Threads& t) {
            const double n = static_cast<double>(t.global[0]);
            return 2 * n * n * n / 5e12;
        });
        return true;
    }();
    (void)once;
    return k;
}

}  // namespace

int main(int argc, char** argv) {
    std::string device = "sim", opt = "on";
    int n = 512, steps = 8, reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--device")
            device = argv[i + 1];
        else if (a == "--n")
            n = std::atoi(argv[i + 1]);
        else if (a == "--steps")
            steps = std::atoi(argv[i + 1]);
        else if (a == "--opt")
            opt = argv[i + 1];
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
    }
    openblas_set_num_threads(1);
    const bool on = opt == "on";
    cascade::Threadpool tp(1);
    cascade::DevicesOptions o;
    o.cpu = false;
    o.pinned_host = o.separate_queues = o.memory_pool = on;
    if (device == "sim") {
        o.sim = 1;
        o.sim_options.run_kernels = false;
        o.sim_options.alloc_latency = 50e-6;
    } else {
        o.opencl = 1;
    }
    cascade::Devices devs(tp, o);
    const std::size_t nn = std::size_t(n) * std::size_t(n);
    std::vector<double> a0(nn), c0(nn);
    for (std::size_t i = 0; i < nn; ++i) {
        a0[i] = (i % 7 == 0) ? 1.0 / n : 0.0;
        c0[i] = 1.0;
    }
    std::vector<double> walls;
    double transfer = 0, kernel = 0;
    auto& k = dgemm_kernel();
    for (int r = 0; r <= reps; ++r) {  // round 0 warms up (program build, calibration)
        std::vector<cascade::Data<double>> as, cs;
        for (int s = 0; s < steps; ++s)
            as.emplace_back(devs, std::span<const double>(a0));
        cs.emplace_back(devs, std::span<const double>(c0));
        const auto before = devs.stats().devices[0];
        const double t0 = cascade_bench::now_seconds();
        std::vector<cascade::HostAccess<double>> reads;
        for (int s = 0; s < steps; ++s) {
            cs.emplace_back(devs, nn);
            devs.submit(k, cascade::read(as[std::size_t(s)]), cascade::read(cs[std::size_t(s)]),
                        cascade::write(cs[std::size_t(s) + 1]), n, cascade::Launch{.threads = {n}});
            reads.push_back(cs.back().request(cascade::DataAccess::read));
        }
        for (auto& h : reads)
            h.wait();
        const double wall = cascade_bench::now_seconds() - t0;
        for (std::size_t i = 1; i < cs.size(); ++i)
            cs[i].release();
        const auto after = devs.stats().devices[0];
        if (r > 0) {
            walls.push_back(wall);
            transfer += after.transfer_seconds - before.transfer_seconds;
            kernel += after.busy_seconds - before.busy_seconds;
        }
        devs.wait_all();
    }
    transfer /= reps;
    kernel /= reps;
    const double wall = cascade_bench::median(walls);
    const double hidden = transfer > 0 ? std::clamp(1 - (wall - kernel) / transfer, 0.0, 1.0) : 0.0;
    cascade_bench::Record rec;
    rec.add("bench", "chain").add("device", device).add("system", "cascade").add("opt", opt);
    rec.add("n", n).add("steps", steps).add("seconds", wall).add("transfer_seconds", transfer);
    rec.add("kernel_seconds", kernel).add("hidden", hidden);
    rec.print();
    return 0;
}
