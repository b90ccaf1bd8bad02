#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cascade/device/devices.hpp"

CASCADE_KERNEL(axpy, (double a, kernel_global const double* x, kernel_global double* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] += a * x[i];
});

TEST(DeviceTasks, AxpyOnCpuAndSim) {
    cascade::Threadpool tp(2);
    cascade::Devices devs(tp, {.sim = 2});
    const int n = 1000;
    std::vector<double> xs(n), ys(n, 1.0);
    std::iota(xs.begin(), xs.end(), 0.0);
    cascade::Data<double> x(devs, std::span<const double>(xs), "x");
    cascade::Data<double> y(devs, std::span<const double>(ys), "y");
    for (int d = 0; d < devs.size(); ++d)
        devs.submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n,
                    cascade::Launch{.on = d, .threads = {std::size_t(n)}});
    auto v = y.to_vector();
    for (int i = 0; i < n; ++i)
        ASSERT_DOUBLE_EQ(v[static_cast<std::size_t>(i)], 1.0 + 3 * 2.0 * i);
    tp.join();
}
