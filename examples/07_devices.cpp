// Device tasks: one kernel written once, run on every device of the machine (the pool's
// workers, two simulated devices, and the OpenCL and CUDA devices found), with the data
// moving where each task runs.
#include <cascade/device/devices.hpp>

#include <cstdio>
#include <vector>

// y = a * x + y, in the kernel dialect: one body for the CPU, OpenCL and CUDA.
CASCADE_KERNEL(axpy, (double a, kernel_global const double* x, kernel_global double* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] += a * x[i];
});

int main() {
    cascade::Threadpool tp(2);
    // cpu (the pool's workers), 2 simulated devices, every OpenCL and CUDA device found.
    cascade::Devices devs(tp, {.sim = 2, .opencl = -1, .cuda = -1});

    const int n = 1 << 16;
    std::vector<double> ones(n, 1.0);
    cascade::Data<double> x(devs, std::span<const double>(ones), "x");
    cascade::Data<double> y(devs, n, "y");  // zeros

    // One task per device, each reading what the one before wrote (implicit dependencies).
    for (int d = 0; d < devs.size(); ++d)
        devs.submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n,
                    cascade::Launch{.on = d, .threads = {n}});
    // Then one where the scheduler chooses (.device = any, the default).
    cascade::DeviceTask last = devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(y), n,
                                           cascade::Launch{.threads = {n}});
    last.get();  // waits; rethrows a kernel's error

    const double expect = 2.0 * devs.size() + 1.0;
    auto host = y.request(cascade::DataAccess::read);  // a future of the host copy
    int wrong = 0;
    for (double v : host.get())
        wrong += v != expect;
    y.release();

    for (int d = 0; d < devs.size(); ++d)
        std::printf("%-44s %llu task(s)\n", devs.device(d).name().c_str(),
                    static_cast<unsigned long long>(devs.stats().devices[std::size_t(d)].tasks));
    std::printf("last task on %s; y = %g everywhere: %s\n",
                devs.device(last.device()).name().c_str(), expect, wrong ? "no" : "yes");
    return wrong ? 1 : 0;
}
