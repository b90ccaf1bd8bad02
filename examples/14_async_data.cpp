// Device data as an async argument and result: each rank sends a Data to the next one, whose
// function doubles it with a kernel on its own device and returns it; the caller adds one with
// a kernel on its device. The freshest copy leaves from the device through the host.
#include <cascade/cascade.hpp>
#include <cascade/comm/device.hpp>
#include <cascade/device/devices.hpp>

#include <cstdio>
#include <vector>

CASCADE_KERNEL(scale, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] *= a;
});

CASCADE_KERNEL(add, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] += a;
});

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    cascade::Devices devs(tp, {.sim = 1});
    cascade::set_data_devices(&devs);  // every rank: arriving Data live on devs
    cascade::Futures fx(tp, &comm);
    auto twice = fx.make_async(
        [](cascade::Data<double>& d) {  // valid on this rank's host, on its Devices
            cascade::Devices& here = *cascade::data_devices();
            here.submit(scale, cascade::readwrite(d), 2.0, int(d.size()),
                        cascade::Launch{.threads = {d.size()}});
            return d;  // leaves once the kernel is done, copied to the host first
        },
        "twice");
    const std::size_t n = 1000;
    cascade::Data<double> x(devs, std::vector<double>(n, 1.0), "x");
    devs.submit(add, cascade::readwrite(x), 2.0, int(n), cascade::Launch{.threads = {n}});
    // x = 3 on the device, its host copy stale: async() copies it to the host first.
    cascade::Data<double> y = cascade::async((comm.rank() + 1) % comm.ranks(), twice, x).get();
    devs.submit(add, cascade::readwrite(y), 1.0, int(n), cascade::Launch{.threads = {n}});
    bool ok = true;
    for (double v : y.to_vector())
        ok = ok && v == 7.0;
    tp.join();
    cascade::set_data_devices(nullptr);
    std::printf("rank %d: y = 7 everywhere: %s\n", comm.rank(), ok ? "yes" : "no");
    return ok ? 0 : 1;
}
