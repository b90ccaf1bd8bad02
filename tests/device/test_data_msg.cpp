// Data<T> as the body of a large active message (<cascade/comm/data_msg.hpp>), at 1-4 ranks
// with a simulated device whose copies are slow: each rank sends to the next one a Data whose
// freshest copy is on the device (host copy stale), on the host, or on both; the receiver gets
// a new Data or writes into one it names. Values are checked exactly after join(), which must
// not return with a transfer in flight. Misuse gives clear errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/data_msg.hpp"
#include "cascade/device/devices.hpp"

using cascade::Communicator;
using cascade::Data;
using cascade::DataActiveMsg;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Launch;
using cascade::Threadpool;
using cascade::UsageError;

namespace {

CASCADE_KERNEL(fill_rank, (kernel_global double* y, double base, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = base + i;
});

CASCADE_KERNEL(sum_into, (kernel_global const double* x, kernel_global double* s, int n), {
    if (kernel_global_id_x == 0) {
        double t = 0;
        for (int i = 0; i < n; ++i)
            t += x[i];
        s[0] = t;
    }
});

// Slow copies: 20 ms each plus a low bandwidth, so a transfer is long in flight.
cascade::DevicesOptions slow_sim() {
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = 0.02;
    o.sim_options.bandwidth = 50e6;
    return o;
}

double value(int rank, int kind, std::size_t i) {
    return rank * 1e6 + kind * 1e5 + double(i);
}

}  // namespace

// kind 0: fresh copy on the device, host copy stale; 1: host copy only; 2: both valid.
TEST(DataActiveMsg, FreshOnDeviceOnHostOrBothArrivesExactly) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    const int sim = devs.find(DeviceKind::sim);
    ASSERT_GE(sim, 0);
    const int me = comm.rank(), n = comm.ranks();
    const int dest = (me + 1) % n, src = (me + n - 1) % n;
    const std::size_t len = 100000;
    std::vector<std::vector<double>> got(3);
    std::atomic<int> arrived{0};
    DataActiveMsg<double, int, int> msg(comm, &devs, [&](Data<double>& d, int& kind, int& from) {
        EXPECT_EQ(from, src);
        got[std::size_t(kind)] = d.to_vector();
        ++arrived;
    });
    std::vector<Data<double>> out;
    for (int kind = 0; kind < 3; ++kind) {
        std::vector<double> init(len);
        for (std::size_t i = 0; i < len; ++i)
            init[i] = value(me, kind, i);
        if (kind == 0) {
            out.emplace_back(devs, len, "dev");
            devs.submit(fill_rank, cascade::write(out.back()), value(me, kind, 0), int(len),
                        Launch{.on = sim, .threads = {len}});
        } else {
            out.emplace_back(devs, std::span<const double>(init), "host");
            if (kind == 2) {
                Data<double> s(devs, 1, "s");
                devs.submit(sum_into, cascade::read(out.back()), cascade::write(s), int(len),
                            Launch{.on = sim, .threads = {1}});
            }
        }
        msg.send(dest, out.back(), kind, me);
    }
    tp.join();
    EXPECT_EQ(arrived.load(), 3);
    EXPECT_EQ(msg.sends_in_flight(), 0u);
    for (int kind = 0; kind < 3; ++kind) {
        ASSERT_EQ(got[std::size_t(kind)].size(), len) << "kind " << kind;
        for (std::size_t i = 0; i < len; ++i)
            if (got[std::size_t(kind)][i] != value(src, kind, i)) {
                ADD_FAILURE() << "kind " << kind << " element " << i << ": "
                              << got[std::size_t(kind)][i];
                break;
            }
    }
    // The sent Data are free again for the host.
    for (auto& d : out)
        EXPECT_EQ(d.to_vector().size(), len);
}

TEST(DataActiveMsg, IntoAnExistingDataThenADeviceTaskUsesIt) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    const int sim = devs.find(DeviceKind::sim);
    const int me = comm.rank(), n = comm.ranks();
    const int dest = (me + 1) % n, src = (me + n - 1) % n;
    const std::size_t len = 4096;
    Data<double> halo(devs, len, "halo"), sum(devs, 1, "sum");
    std::atomic<int> arrived{0};
    DataActiveMsg<double> msg(
        comm, nullptr,
        [&](Data<double>& d) {
            EXPECT_EQ(d.block(), halo.block());
            devs.submit(sum_into, cascade::read(d), cascade::write(sum), int(len),
                        Launch{.on = sim, .threads = {1}});
            ++arrived;
        },
        [&](std::size_t) { return halo; });
    Data<double> x(devs, len, "x");
    devs.submit(fill_rank, cascade::write(x), double(me), int(len),
                Launch{.on = sim, .threads = {len}});
    msg.send(dest, x);
    tp.join();
    EXPECT_EQ(arrived.load(), 1);
    double want = 0;
    for (std::size_t i = 0; i < len; ++i)
        want += double(src) + double(i);
    EXPECT_EQ(sum.to_vector()[0], want);
}

TEST(DataActiveMsg, SendingAnEmptyHandleThrows) {
    Communicator comm;
    Threadpool tp(2, &comm);
    DataActiveMsg<int> msg(comm, nullptr, [](Data<int>&) {});
    EXPECT_THROW(msg.send(comm.rank(), Data<int>{}), UsageError);
    tp.join();
}
