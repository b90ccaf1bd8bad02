// The device layer beside every other layer in one program: no name clashes, and a device
// task completes a promise of the futures layer through on_done.
#include <cascade/cascade.hpp>
#include <cascade/device/devices.hpp>

#include <cstdio>
#include <memory>

CASCADE_KERNEL(twice, (kernel_global double* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] *= 2.0;
});

int main() {
    cascade::Threadpool tp(2);
    cascade::Devices devs(tp, {.sim = 1});
    cascade::Data<double> y(devs, std::vector<double>(16, 1.0), "y");
    auto t = devs.submit(twice, cascade::readwrite(y), 16, cascade::Launch{.threads = {16}});
    auto p = std::make_shared<cascade::promise<void>>();
    cascade::future<void> f = p->get_future();
    t.on_done([p](std::exception_ptr e) { e ? p->set_exception(e) : p->set_value(); });
    f.get();
    const bool ok = y.to_vector()[15] == 2.0;
    std::printf("device task as a future: %s\n", ok ? "ok" : "wrong");
    return ok ? 0 : 1;
}
