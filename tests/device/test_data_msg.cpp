// Data<T> as the body of a large active message (<cascade/comm/data_msg.hpp>), at 1-4 ranks
// with a simulated device whose copies are slow: each rank sends to the next one a Data whose
// freshest copy is on the device (host copy stale), on the host, or on both; the receiver gets
// a new Data or writes into one it names. Values are checked exactly after join(), which must
// not return with a transfer in flight. Misuse gives clear errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
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

namespace {

// The PCIe-like model with adversarial delays: each copy waits a further random 0-3 ms.
cascade::DevicesOptions jittery_sim() {
    cascade::DevicesOptions o;
    o.sim = 1;
    o.sim_options.latency = 1e-4;
    o.sim_options.bandwidth = 200e6;
    o.sim_options.copy_jitter = 3e-3;
    return o;
}

}  // namespace

// Bodies staged in pieces whose size does not divide the body (and one piece larger than it),
// fresh on the device, on the host, or both; completion waits for every piece: join() returns
// with all bodies arrived and every sender's host access released, under random copy delays.
TEST(DataActiveMsg, PiecesThatDoNotDivideTheBodyArriveExactly) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, jittery_sim());
    const int sim = devs.find(DeviceKind::sim);
    const int me = comm.rank(), n = comm.ranks();
    const int dest = (me + 1) % n, src = (me + n - 1) % n;
    const std::size_t len = 100003;  // 800024 bytes
    for (const std::size_t chunk :
         {std::size_t(65536 + 8), std::size_t(12345), std::size_t(1) << 20}) {
        std::vector<std::vector<double>> got(3);
        std::atomic<int> arrived{0};
        cascade::DataMsgOptions mo;
        mo.chunk_bytes = chunk;
        DataActiveMsg<double, int> msg(
            comm, &devs,
            [&](Data<double>& d, int& kind) {
                got[std::size_t(kind)] = d.to_vector();
                ++arrived;
            },
            {}, "pieces", mo);
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
            msg.send(dest, out.back(), kind);
        }
        tp.join();
        EXPECT_EQ(arrived.load(), 3) << "chunk " << chunk;
        EXPECT_EQ(msg.sends_in_flight(), 0u);
        // The fresh-on-device body was staged (in one piece when the chunk exceeds it).
        EXPECT_EQ(msg.sent_by(cascade::DataPath::staged), 1u) << "chunk " << chunk;
        EXPECT_EQ(msg.sent_by(cascade::DataPath::host), 2u) << "chunk " << chunk;
        for (int kind = 0; kind < 3; ++kind) {
            ASSERT_EQ(got[std::size_t(kind)].size(), len) << "kind " << kind;
            for (std::size_t i = 0; i < len; ++i)
                if (got[std::size_t(kind)][i] != value(src, kind, i)) {
                    ADD_FAILURE() << "chunk " << chunk << " kind " << kind << " element " << i
                                  << ": " << got[std::size_t(kind)][i];
                    break;
                }
        }
        // The staged Data's host copy is valid now, and the Data is free for the host again.
        for (auto& d : out)
            EXPECT_EQ(d.to_vector().size(), len);
    }
}

// A body staged from the device to several ranks at once (one chunked request).
TEST(DataActiveMsg, StagedBodyToSeveralRanks) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, jittery_sim());
    const int sim = devs.find(DeviceKind::sim);
    const int me = comm.rank(), n = comm.ranks();
    const std::size_t len = 50001;
    std::atomic<int> arrived{0}, bad{0};
    cascade::DataMsgOptions mo;
    mo.chunk_bytes = 40000;
    DataActiveMsg<double, int> msg(
        comm, &devs,
        [&](Data<double>& d, int& from) {
            const auto v = d.to_vector();
            for (std::size_t i = 0; i < len; ++i)
                if (v[i] != value(from, 0, i)) {
                    ++bad;
                    break;
                }
            ++arrived;
        },
        {}, "many", mo);
    Data<double> x(devs, len, "x");
    devs.submit(fill_rank, cascade::write(x), value(me, 0, 0), int(len),
                Launch{.on = sim, .threads = {len}});
    std::vector<int> dests;
    for (int r = 0; r < n; ++r)
        if (r != me) dests.push_back(r);
    if (!dests.empty()) msg.send(std::span<const int>(dests), x, me);
    tp.join();
    EXPECT_EQ(arrived.load(), n - 1);
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(msg.sends_in_flight(), 0u);
}

// The MPI libraries here do not send from device memory: a CUDA copy is staged like any device
// copy, and switching the direct path off keeps it staged; the host copy goes as it is.
TEST(DataActiveMsg, PathSelection) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const cascade::MpiDeviceSupport& s = cascade::mpi_device_support();
    EXPECT_FALSE(s.why.empty());
    cascade::DataMsgOptions on, off;
    on.gpu_aware = true;
    off.gpu_aware = false;
    DataActiveMsg<int> a(
        comm, nullptr, [](Data<int>&) {}, {}, "on", on);
    DataActiveMsg<int> b(
        comm, nullptr, [](Data<int>&) {}, {}, "off", off);
    EXPECT_EQ(a.path(DeviceKind::cuda),
              s.cuda ? cascade::DataPath::direct : cascade::DataPath::staged);
    EXPECT_EQ(b.path(DeviceKind::cuda), cascade::DataPath::staged);
    EXPECT_EQ(a.path(DeviceKind::sim), cascade::DataPath::staged);
    EXPECT_EQ(a.path(DeviceKind::opencl), cascade::DataPath::staged);
    EXPECT_EQ(a.path(DeviceKind::cpu), cascade::DataPath::host);
    // The setting: CASCADE_GPU_AWARE=0 is the default of new options; unset, the direct path
    // is allowed.
    ::setenv("CASCADE_GPU_AWARE", "0", 1);
    EXPECT_FALSE(cascade::DataMsgOptions{}.gpu_aware);
    ::unsetenv("CASCADE_GPU_AWARE");
    EXPECT_TRUE(cascade::DataMsgOptions{}.gpu_aware);
    ::setenv("CASCADE_DATA_CHUNK", "4096", 1);
    EXPECT_EQ(cascade::DataMsgOptions{}.chunk_bytes, 4096u);
    ::unsetenv("CASCADE_DATA_CHUNK");
    EXPECT_EQ(cascade::DataMsgOptions{}.chunk_bytes, std::size_t(1) << 20);
    if (comm.rank() == 0) std::printf("MPI device support: %s\n", s.why.c_str());
    tp.join();
}

// Received onto a device: each piece goes on to the receiver's sim device as it arrives, so a
// kernel there reads the Data with no copy in of its own (the device's bytes in are exactly
// the body's, once), in pieces that do not divide the body and in one piece; under random copy
// delays, join() waits for the last piece's copy.
TEST(DataActiveMsg, ReceivedOntoADevicePieceByPiece) {
    for (const std::size_t chunk : {std::size_t(30000), std::size_t(0)}) {
        Communicator comm;
        Threadpool tp(2, &comm);
        Devices devs(tp, jittery_sim());
        const int sim = devs.find(DeviceKind::sim);
        const int me = comm.rank(), n = comm.ranks();
        const int dest = (me + 1) % n, src = (me + n - 1) % n;
        const std::size_t len = 70001;
        Data<double> sum(devs, 1, "sum");
        std::atomic<int> arrived{0};
        cascade::DataMsgOptions mo;
        mo.chunk_bytes = chunk;
        mo.to_device = sim;
        std::vector<Data<double>> keep;
        DataActiveMsg<double> msg(
            comm, &devs,
            [&](Data<double>& d) {
                devs.submit(sum_into, cascade::read(d), cascade::write(sum), int(len),
                            Launch{.on = sim, .threads = {1}});
                keep.push_back(d);
                ++arrived;
            },
            {}, "onto", mo);
        Data<double> x(devs, len, "x");
        devs.submit(fill_rank, cascade::write(x), double(me), int(len),
                    Launch{.on = sim, .threads = {len}});
        msg.send(dest, x);
        tp.join();
        devs.wait_all();
        ASSERT_EQ(arrived.load(), 1);
        double want = 0;
        for (std::size_t i = 0; i < len; ++i)
            want += double(src) + double(i);
        EXPECT_EQ(sum.to_vector()[0], want) << "chunk " << chunk;
        EXPECT_EQ(devs.stats().devices[std::size_t(sim)].bytes_in, len * sizeof(double))
            << "chunk " << chunk;
        EXPECT_EQ(keep[0].to_vector()[len - 1], double(src) + double(len - 1));
    }
}
