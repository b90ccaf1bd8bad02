// Single-source kernels give the same answers on every device kind: the CPU loop (cpu), the
// simulated devices (sim) and OpenCL (PoCL's CPU device here), including work groups with a
// barrier and scratch memory, 2-D ranges, and build errors that reach the waiter.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <vector>

#include "cascade/device/devices.hpp"

using cascade::Data;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::DevicesOptions;
using cascade::Launch;
using cascade::Threadpool;

namespace {

CASCADE_KERNEL(saxpy, (float a, kernel_global const float* x, kernel_global float* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = a * x[i] + y[i];
});

// A 5-point stencil on an nx * ny grid (2-D range).
CASCADE_KERNEL(stencil, (kernel_global const double* in, kernel_global double* out, int nx, int ny),
               {
                   int x = kernel_global_id_x;
                   int y = kernel_global_id_y;
                   if (x > 0 && y > 0 && x < nx - 1 && y < ny - 1)
                       out[y * nx + x] = 0.25 * (in[y * nx + x - 1] + in[y * nx + x + 1] +
                                                 in[(y - 1) * nx + x] + in[(y + 1) * nx + x]);
                   else if (x < nx && y < ny)
                       out[y * nx + x] = in[y * nx + x];
               });

// Sum of each work group's elements: scratch memory and barriers (a tree in the group).
CASCADE_KERNEL(group_sum, (kernel_global const double* x, kernel_global double* sums), {
    kernel_local double* s = kernel_dynamic_local(double);
    int l = kernel_local_id_x;
    int size = kernel_local_size_x;
    s[l] = x[kernel_global_id_x];
    kernel_barrier();
    for (int h = size / 2; h > 0; h /= 2) {
        if (l < h) s[l] += s[l + h];
        kernel_barrier();
    }
    if (l == 0) sums[kernel_group_id_x] = s[0];
});

// The devices of this machine: cpu, two sims, and OpenCL when a platform exists.
struct Machine {
    Threadpool tp{2};
    std::unique_ptr<Devices> devs;
    bool opencl = false;
    Machine() {
        try {
            devs = std::make_unique<Devices>(tp, DevicesOptions{.sim = 2, .opencl = 1});
            opencl = true;
        } catch (const cascade::UsageError& e) {
            std::printf("note: %s\n", e.what());
            devs = std::make_unique<Devices>(tp, DevicesOptions{.sim = 2});
        }
    }
};

}  // namespace

TEST(DeviceKernels, SaxpyOnEveryDeviceKind) {
    Machine m;
    Devices& devs = *m.devs;
    const int n = 10000;
    std::vector<float> xs(n);
    std::iota(xs.begin(), xs.end(), 0.0f);
    for (int d = 0; d < devs.size(); ++d) {
        Data<float> x(devs, std::span<const float>(xs)), y(devs, n);
        devs.submit(saxpy, 0.5, cascade::read(x), cascade::readwrite(y), n,
                    Launch{.on = d, .threads = {n}});
        auto v = y.to_vector();
        for (int i = 0; i < n; ++i)
            ASSERT_EQ(v[static_cast<std::size_t>(i)], 0.5f * static_cast<float>(i))
                << devs.device(d).name();
    }
    if (!m.opencl)
        GTEST_SKIP()
            << "no OpenCL platform: install pocl-opencl-icd (Debian) for the opencl device";
}

TEST(DeviceKernels, StencilIn2DGivesTheSameGridEverywhere) {
    Machine m;
    Devices& devs = *m.devs;
    const int nx = 64, ny = 48;
    std::vector<double> g(static_cast<std::size_t>(nx * ny));
    for (std::size_t i = 0; i < g.size(); ++i)
        g[i] = std::sin(0.1 * static_cast<double>(i));
    std::vector<std::vector<double>> results;
    for (int d = 0; d < devs.size(); ++d) {
        Data<double> a(devs, std::span<const double>(g)), b(devs, g.size());
        for (int it = 0; it < 10; ++it) {
            devs.submit(stencil, cascade::read(a), cascade::write(b), nx, ny,
                        Launch{.on = d, .threads = {{nx, ny}, {16, 8}}});
            std::swap(a, b);
        }
        results.push_back(a.to_vector());
    }
    for (std::size_t d = 1; d < results.size(); ++d)
        for (std::size_t i = 0; i < g.size(); ++i)
            ASSERT_NEAR(results[d][i], results[0][i], 1e-12)
                << devs.device(static_cast<int>(d)).name();
    if (!m.opencl)
        GTEST_SKIP()
            << "no OpenCL platform: install pocl-opencl-icd (Debian) for the opencl device";
}

TEST(DeviceKernels, GroupReductionWithBarrierAndScratch) {
    Machine m;
    Devices& devs = *m.devs;
    const int n = 4096, group = 64;
    std::vector<double> xs(n);
    for (int i = 0; i < n; ++i)
        xs[static_cast<std::size_t>(i)] = i % 7;
    for (int d = 0; d < devs.size(); ++d) {
        Data<double> x(devs, std::span<const double>(xs)), sums(devs, n / group);
        devs.submit(
            group_sum, cascade::read(x), cascade::write(sums),
            Launch{.on = d, .threads = {n, group}, .scratch_bytes = group * sizeof(double)});
        auto v = sums.to_vector();
        for (int g = 0; g < n / group; ++g) {
            double e = 0;
            for (int i = g * group; i < (g + 1) * group; ++i)
                e += i % 7;
            ASSERT_EQ(v[static_cast<std::size_t>(g)], e) << devs.device(d).name() << " group " << g;
        }
    }
    if (!m.opencl)
        GTEST_SKIP()
            << "no OpenCL platform: install pocl-opencl-icd (Debian) for the opencl device";
}

TEST(DeviceKernels, AnyDeviceSpreadsWorkAndStaysCorrect) {
    Machine m;
    Devices& devs = *m.devs;
    const int n = 2048;
    std::vector<Data<float>> ys;
    std::vector<float> ones(n, 1.0f);
    Data<float> x(devs, std::span<const float>(ones));
    for (int k = 0; k < 24; ++k)
        ys.emplace_back(devs, n);
    for (int r = 0; r < 4; ++r)
        for (auto& y : ys)
            devs.submit(saxpy, 1.0, cascade::read(x), cascade::readwrite(y), n,
                        Launch{.threads = {n}});
    for (auto& y : ys)
        for (float v : y.to_vector())
            ASSERT_EQ(v, 4.0f);
    int used = 0;
    for (const auto& d : devs.stats().devices)
        used += d.tasks > 0;
    EXPECT_GE(used, 2);
}

TEST(DeviceKernels, AnyDeviceTasksFollowTheirData) {
    Threadpool tp(2);
    Devices devs(tp, {.cpu = false, .sim = 3});
    const int n = 1 << 20;  // 4 MiB: moving it costs more than the kernel
    Data<float> x(devs, n), y(devs, n);
    devs.submit(saxpy, 1.0, cascade::read(x), cascade::readwrite(y), n,
                Launch{.on = 2, .threads = {n}})
        .get();
    for (int k = 0; k < 10; ++k) {
        auto t = devs.submit(saxpy, 1.0, cascade::read(x), cascade::readwrite(y), n,
                             Launch{.threads = {n}});
        t.get();  // one at a time: no backlog anywhere, only the data decides
        EXPECT_EQ(t.device(), 2) << "task " << k;
    }
}

TEST(DeviceKernels, OpenclBuildErrorsReachTheWaiter) {
    Machine m;
    if (!m.opencl) GTEST_SKIP() << "no OpenCL platform: install pocl-opencl-icd (Debian)";
    cascade::Kernel broken("broken");
    broken.opencl_source("__kernel void broken(__global float* x) { x[0] = undeclared; }",
                         "broken");
    Data<float> x(*m.devs, 4);
    auto t = m.devs->submit(broken, cascade::write(x),
                            Launch{.device = DeviceKind::opencl, .threads = {1}});
    try {
        t.get();
        FAIL() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("OpenCL build failed"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
    }
}

TEST(DeviceKernels, CudaRunsWhereAGpuIsAndSaysWhyNotElsewhere) {
    Threadpool tp(1);
    std::unique_ptr<Devices> devs;
    try {
        devs = std::make_unique<Devices>(tp, DevicesOptions{.cpu = false, .cuda = 1});
    } catch (const cascade::UsageError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("CUDA"), std::string::npos) << m;
        GTEST_SKIP() << "no CUDA device (" << m << ")";
    }
    const int n = 1 << 16;
    std::vector<float> xs(n, 2.0f);
    Data<float> x(*devs, std::span<const float>(xs)), y(*devs, n);
    devs->submit(saxpy, 3.0, cascade::read(x), cascade::readwrite(y), n, Launch{.threads = {n}});
    for (float v : y.to_vector())
        ASSERT_EQ(v, 6.0f);
}

// A call variant (Kernel::cuda) gets the device's context and stream and one device pointer per
// Data argument; the runtime records the task's end on that stream after the call.
TEST(DeviceKernels, CudaCallVariantGetsTheStreamAndDevicePointers) {
    cascade::Kernel k("cuda_call");
    std::atomic<int> calls{0};
    std::atomic<bool> args_ok{false};
    k.cuda([&](cascade::CudaCall& c) {
        const auto p = *static_cast<const unsigned long long*>(c.slots[0]);
        args_ok = c.n == 2 && c.context && c.stream && c.device >= 0 && p != 0 &&
                  c.sizes[0] == 64 * sizeof(float) && *static_cast<const int*>(c.slots[1]) == 64;
        calls.fetch_add(1);
    });
    EXPECT_TRUE(k.has_variant(DeviceKind::cuda));
    EXPECT_FALSE(k.has_variant(DeviceKind::cpu));
    Threadpool tp(1);
    std::unique_ptr<Devices> devs;
    try {
        devs = std::make_unique<Devices>(tp, DevicesOptions{.cpu = false, .cuda = 1});
    } catch (const cascade::UsageError& e) {
        GTEST_SKIP() << "no CUDA device (" << e.what() << ")";
    }
    Data<float> x(*devs, 64);
    devs->submit(k, cascade::readwrite(x), 64, Launch{.device = DeviceKind::cuda}).get();
    EXPECT_EQ(calls.load(), 1);
    EXPECT_TRUE(args_ok.load());
}
