// Device tasks as futures: a task graph whose edges are device tasks, and a when_all that
// waits for a device task and an async call together. No thread waits for a device. One
// process; links the futures layer and the device layer.
#include <cascade/cascade.hpp>
#include <cascade/device/devices.hpp>
#include <cascade/futures/device.hpp>

#include <cstdio>
#include <exception>
#include <tuple>
#include <vector>

CASCADE_KERNEL(scale, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] *= a;
});

int main() {
    cascade::Threadpool tp(2);
    cascade::Futures fx(tp);  // futures over the pool the devices use
    cascade::Devices devs(tp, {.sim = 2, .opencl = -1});

    const int n = 1024, steps = 8;
    cascade::Data<double> y(devs, std::vector<double>(n, 1.0), "y");

    // Graph task k doubles y on a device; the device task's future fulfils task k + 1.
    cascade::Taskflow<int> tf(&tp, "chain");
    cascade::promise<void> chain;
    cascade::future<void> chain_done = chain.get_future();
    tf.set_indegree([](int) { return 1; }).set_task([&](int k) {
        cascade::DeviceTask t =
            devs.submit(scale, cascade::readwrite(y), 2.0, n, cascade::Launch{.threads = {n}});
        cascade::to_future(t).then([&, k](cascade::future<void> f) {
            try {
                f.get();  // rethrows the device task's error
            } catch (...) {
                chain.set_exception(std::current_exception());
                return;
            }
            if (k + 1 < steps)
                tf.fulfill_promise(k + 1);
            else
                chain.set_value();
        });
    });
    tf.fulfill_promise(0);
    chain_done.get();

    // A device task and an async call, waited for together.
    cascade::DeviceTask half =
        devs.submit(scale, cascade::readwrite(y), 0.5, n, cascade::Launch{.threads = {n}});
    auto both = cascade::when_all(cascade::to_future(half),
                                  cascade::async(cascade::here, [] { return 1.0; }));
    const double one = std::get<1>(both.get());

    const std::vector<double> v = y.to_vector();
    int wrong = 0;
    for (double e : v)
        wrong += e != 128.0;
    std::printf("%d chained device tasks, then one beside an async (%g): y = %g everywhere: %s\n",
                steps, one, v[0], wrong ? "no" : "yes");
    tp.join();
    return wrong ? 1 : 0;
}
