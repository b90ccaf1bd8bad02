// What the tests of Data on sim devices share (test_access, and across ranks test_data_msg,
// test_async_data, test_objects_device): simulated devices whose copies are quick, slow or
// jittery, the kernels the tests run on them, and a Data whose freshest copy is in one of the
// three states they cover (kind 0: on the device only, the host copy stale; 1: on the host
// only; 2: valid on both).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cascade/device/devices.hpp"

namespace device_test {

CASCADE_KERNEL(add_to, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] += a;
});

// y[i] = base + i.
CASCADE_KERNEL(fill_from, (kernel_global double* y, double base, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = base + i;
});

// s[0] = the sum of x.
CASCADE_KERNEL(sum_of, (kernel_global const double* x, kernel_global double* s, int n), {
    if (kernel_global_id_x == 0) {
        double t = 0;
        for (int i = 0; i < n; ++i)
            t += x[i];
        s[0] = t;
    }
});

// One sim device with the default model (a PCIe GPU's bandwidth) and 10 us per copy.
inline cascade::DevicesOptions quick_sim() {
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = 1e-5;
    return o;
}

// One sim device whose copies take `latency` seconds each plus a low bandwidth (50 MB/s), so
// that a transfer is long in flight.
inline cascade::DevicesOptions slow_sim(double latency) {
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = latency;
    o.sim_options.bandwidth = 50e6;
    return o;
}

// One sim device with a PCIe-like model and adversarial delays: each copy waits a further
// random 0-3 ms.
inline cascade::DevicesOptions jittery_sim() {
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = 1e-4;
    o.sim_options.bandwidth = 200e6;
    o.sim_options.copy_jitter = 3e-3;
    return o;
}

// The index of the sim device of `devs`.
inline int sim_of(const cascade::Devices& devs) {
    return devs.find(cascade::DeviceKind::sim);
}

// Adds `a` to every element of d and leaves its freshest copy in state `kind`, with device
// work still in flight for kind 0.
inline void add_in_state(cascade::Devices& devs, cascade::Data<double>& d, double a, int kind) {
    const int sim = sim_of(devs);
    if (kind == 0) {
        devs.submit(add_to, cascade::readwrite(d), a, int(d.size()),
                    cascade::Launch{.on = sim, .threads = {d.size()}});
        return;
    }
    auto h = d.request(cascade::DataAccess::readwrite);
    for (double& x : h.get())
        x += a;
    d.release();
    if (kind == 2) {  // a task that reads d copies it to the device: valid on both
        cascade::Data<double> s(devs, 1, "s");
        devs.submit(sum_of, cascade::read(d), cascade::write(s), int(d.size()),
                    cascade::Launch{.on = sim, .threads = {1}})
            .wait();
    }
}

// A Data of `len` elements base + i whose freshest copy is in state `kind`: written by a
// kernel on the device (still in flight) for 0, from the host for 1 and 2, and for 2 read by a
// kernel on the device too (in flight: the copy in reads the host copy meanwhile).
inline cascade::Data<double> data_in_state(cascade::Devices& devs, std::size_t len, double base,
                                           int kind, std::string name) {
    const int sim = sim_of(devs);
    if (kind == 0) {
        cascade::Data<double> d(devs, len, std::move(name));
        devs.submit(fill_from, cascade::write(d), base, int(len),
                    cascade::Launch{.on = sim, .threads = {len}});
        return d;
    }
    std::vector<double> init(len);
    for (std::size_t i = 0; i < len; ++i)
        init[i] = base + double(i);
    cascade::Data<double> d(devs, std::span<const double>(init), std::move(name));
    if (kind == 2) {
        cascade::Data<double> s(devs, 1, "s");
        devs.submit(sum_of, cascade::read(d), cascade::write(s), int(len),
                    cascade::Launch{.on = sim, .threads = {1}});
    }
    return d;
}

}  // namespace device_test
