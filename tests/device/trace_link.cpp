// A traced run of Data bodies staged in pieces (tests/device/check_links.py reads the trace):
// each rank sends to the next one a Data fresh on its sim device, in 3 pieces, received onto
// the receiver's sim device piece by piece. The trace links each piece's copy off the
// sender's device, its send, its arrival and its copy onto the receiver's device.
//   CASCADE_TRACE=links.json mpiexec -n NP trace_link
#include <atomic>
#include <cstddef>
#include <cstdio>

#include "cascade/cascade.hpp"
#include "cascade/comm/data_msg.hpp"
#include "cascade/device/devices.hpp"

namespace {

CASCADE_KERNEL(iota_from, (kernel_global double* y, double base, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = base + i;
});

}  // namespace

int main() {
    constexpr std::size_t kLen = 30000;  // 240000 bytes: 3 pieces of 100000 bytes or less
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = 1e-3;  // copies long enough to be seen
    cascade::Devices devs(tp, o);
    const int sim = devs.find(cascade::DeviceKind::sim);
    const int me = comm.rank(), n = comm.ranks();
    cascade::DataMsgOptions mo;
    mo.chunk_bytes = 100000;
    mo.to_device = sim;
    mo.gpu_aware = cascade::GpuAware::off;
    std::atomic<int> bad{0};
    cascade::DataActiveMsg<double> msg(
        comm, &devs,
        [&](cascade::Data<double>& d) {
            const auto v = d.to_vector();
            const double src = double((me + n - 1) % n);
            if (v.front() != src || v.back() != src + double(kLen - 1)) ++bad;
        },
        {}, "traced", mo);
    cascade::Data<double> x(devs, kLen, "x");
    devs.submit(iota_from, cascade::write(x), double(me), int(kLen),
                cascade::Launch{.on = sim, .threads = {kLen}});
    msg.send((me + 1) % n, x);
    tp.join();
    if (bad.load() != 0 || msg.sent_by(cascade::DataPath::staged) != 1 ||
        msg.received_by(cascade::DataPath::staged) != 1) {
        std::fprintf(stderr, "trace_link: rank %d: wrong body or path\n", me);
        return 1;
    }
    return 0;
}
