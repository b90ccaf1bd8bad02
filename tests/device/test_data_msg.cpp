// Data<T> as the body of a large active message (<cascade/comm/data_msg.hpp>), at 1-4 ranks
// with a simulated device whose copies are slow: each rank sends to the next one a Data whose
// freshest copy is on the device (host copy stale), on the host, or on both; the receiver gets
// a new Data or writes into one it names. Values are checked exactly after join(), which must
// not return with a transfer in flight. Misuse gives clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/data_msg.hpp"
#include "cascade/device/devices.hpp"
#include "sim_fixture.hpp"

using cascade::Communicator;
using cascade::Data;
using cascade::DataActiveMsg;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Launch;
using cascade::Threadpool;
using cascade::UsageError;

namespace {

using device_test::fill_from;
using device_test::jittery_sim;
using device_test::sum_of;

// Slow copies: 20 ms each plus a low bandwidth, so a transfer is long in flight.
cascade::DevicesOptions slow_sim() {
    return device_test::slow_sim(0.02);
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
        out.push_back(device_test::data_in_state(devs, len, value(me, kind, 0), kind,
                                                 kind == 0 ? "dev" : "host"));
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
            devs.submit(sum_of, cascade::read(d), cascade::write(sum), int(len),
                        Launch{.on = sim, .threads = {1}});
            ++arrived;
        },
        [&](std::size_t) { return halo; });
    Data<double> x(devs, len, "x");
    devs.submit(fill_from, cascade::write(x), double(me), int(len),
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

// Bodies staged in pieces whose size does not divide the body (and one piece larger than it),
// fresh on the device, on the host, or both; completion waits for every piece: join() returns
// with all bodies arrived and every sender's host access released, under random copy delays.
TEST(DataActiveMsg, PiecesThatDoNotDivideTheBodyArriveExactly) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, jittery_sim());
    ASSERT_GE(devs.find(DeviceKind::sim), 0);
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
            out.push_back(device_test::data_in_state(devs, len, value(me, kind, 0), kind,
                                                     kind == 0 ? "dev" : "host"));
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
    devs.submit(fill_from, cascade::write(x), value(me, 0, 0), int(len),
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

// The MPI libraries here do not send from device memory: by default a CUDA copy is staged
// like any device copy, and so is a sim copy; forcing the direct path takes every device
// whose memory MPI can address (CUDA, sim), never an OpenCL buffer; off keeps all staged.
TEST(DataActiveMsg, PathSelection) {
    Communicator comm;
    Threadpool tp(1, &comm);
    const cascade::MpiDeviceSupport& s = cascade::mpi_device_support();
    EXPECT_FALSE(s.why.empty());
    cascade::DataMsgOptions dflt, off, force;
    dflt.gpu_aware = cascade::GpuAware::automatic;
    off.gpu_aware = cascade::GpuAware::off;
    force.gpu_aware = cascade::GpuAware::force;
    DataActiveMsg<int> a(
        comm, nullptr, [](Data<int>&) {}, {}, "auto", dflt);
    DataActiveMsg<int> b(
        comm, nullptr, [](Data<int>&) {}, {}, "off", off);
    DataActiveMsg<int> c(
        comm, nullptr, [](Data<int>&) {}, {}, "force", force);
    EXPECT_EQ(a.path(DeviceKind::cuda),
              s.cuda ? cascade::DataPath::direct : cascade::DataPath::staged);
    EXPECT_EQ(b.path(DeviceKind::cuda), cascade::DataPath::staged);
    EXPECT_EQ(c.path(DeviceKind::cuda), cascade::DataPath::direct);
    EXPECT_EQ(a.path(DeviceKind::sim), cascade::DataPath::staged);
    EXPECT_EQ(b.path(DeviceKind::sim), cascade::DataPath::staged);
    EXPECT_EQ(c.path(DeviceKind::sim), cascade::DataPath::direct);
    EXPECT_EQ(c.path(DeviceKind::opencl), cascade::DataPath::staged);
    EXPECT_EQ(a.path(DeviceKind::cpu), cascade::DataPath::host);
    EXPECT_EQ(c.path(DeviceKind::cpu), cascade::DataPath::host);
    // The setting: unset or auto gives automatic, 1 force, 0 off.
    ::setenv("CASCADE_GPU_AWARE", "0", 1);
    EXPECT_EQ(cascade::DataMsgOptions{}.gpu_aware, cascade::GpuAware::off);
    ::setenv("CASCADE_GPU_AWARE", "1", 1);
    EXPECT_EQ(cascade::DataMsgOptions{}.gpu_aware, cascade::GpuAware::force);
    ::setenv("CASCADE_GPU_AWARE", "AUTO", 1);
    EXPECT_EQ(cascade::DataMsgOptions{}.gpu_aware, cascade::GpuAware::automatic);
    ::setenv("CASCADE_GPU_AWARE", "sometimes", 1);
    EXPECT_THROW(cascade::gpu_aware_setting(), UsageError);
    ::unsetenv("CASCADE_GPU_AWARE");
    EXPECT_EQ(cascade::DataMsgOptions{}.gpu_aware, cascade::GpuAware::automatic);
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
                devs.submit(sum_of, cascade::read(d), cascade::write(sum), int(len),
                            Launch{.on = sim, .threads = {1}});
                keep.push_back(d);
                ++arrived;
            },
            {}, "onto", mo);
        Data<double> x(devs, len, "x");
        devs.submit(fill_from, cascade::write(x), double(me), int(len),
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

// A body broadcast to every other rank, whose handler overwrites the Data at once: a rank that
// forwards the body to ranks below it in the broadcast tree gets its Data only once the body
// has left for them (MPI may read the buffer until then), so every rank sees the sender's
// bytes. One piece from a valid host copy and pieces staged from the device.
TEST(DataActiveMsg, ForwardedBodyIsHandedOverOnlyOnceItLeft) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, jittery_sim());
    const int sim = devs.find(DeviceKind::sim);
    const int me = comm.rank(), n = comm.ranks();
    const std::size_t len = std::size_t(1) << 18;  // 2 MiB: sent by rendezvous everywhere
    for (const bool staged : {false, true}) {
        std::atomic<int> arrived{0}, bad{0};
        cascade::DataMsgOptions mo;
        mo.chunk_bytes = staged ? std::size_t(700000) : 0;
        DataActiveMsg<double, int> msg(
            comm, &devs,
            [&](Data<double>& d, int& from) {
                {
                    auto h = d.request(cascade::DataAccess::readwrite);
                    const auto s = h.get();
                    for (std::size_t i = 0; i < len; ++i)
                        if (s[i] != value(from, 0, i)) {
                            ++bad;
                            break;
                        }
                    std::fill(s.begin(), s.end(), -1.0);  // the handler's own use of its Data
                    d.release();
                }
                ++arrived;
            },
            {}, staged ? "bcast-staged" : "bcast-host", mo);
        Data<double> x(devs, len, "x");
        if (me == 0) {
            if (staged) {
                devs.submit(fill_from, cascade::write(x), value(me, 0, 0), int(len),
                            Launch{.on = sim, .threads = {len}});
            } else {
                auto h = x.request(cascade::DataAccess::write);
                const auto s = h.get();
                for (std::size_t i = 0; i < len; ++i)
                    s[i] = value(me, 0, i);
                x.release();
            }
            std::vector<int> dests;
            for (int r = 1; r < n; ++r)
                dests.push_back(r);
            if (!dests.empty()) msg.send(std::span<const int>(dests), x, me);
        }
        tp.join();
        EXPECT_EQ(arrived.load(), me == 0 ? 0 : 1) << "staged " << staged;
        EXPECT_EQ(bad.load(), 0) << "staged " << staged;
        EXPECT_EQ(msg.sends_in_flight(), 0u);
        if (me == 0 && n > 1) {
            EXPECT_EQ(msg.sent_by(staged ? cascade::DataPath::staged : cascade::DataPath::host),
                      1u);
        }
    }
}

// The direct path, forced (CASCADE_GPU_AWARE=1) for sim devices, whose memory is host memory:
// the body goes from the sender's device copy and into the receiver's (to_device) with no
// copy to or from the host on either side, and a kernel on the receiver reads it there. With
// CASCADE_GPU_AWARE=0 the same transfer is staged (copied out, pushed in piece by piece).
TEST(DataActiveMsg, DirectPathSendsFromAndReceivesIntoDeviceCopies) {
    for (const char* setting : {"1", "0"}) {
        const bool direct = setting[0] == '1';
        ::setenv("CASCADE_GPU_AWARE", setting, 1);
        cascade::DataMsgOptions mo;
        ::unsetenv("CASCADE_GPU_AWARE");
        Communicator comm;
        Threadpool tp(2, &comm);
        Devices devs(tp, jittery_sim());
        const int sim = devs.find(DeviceKind::sim);
        const int me = comm.rank(), n = comm.ranks();
        const int dest = (me + 1) % n, src = (me + n - 1) % n;
        const std::size_t len = 60001;
        mo.chunk_bytes = 100000;
        mo.to_device = sim;
        ASSERT_EQ(mo.gpu_aware, direct ? cascade::GpuAware::force : cascade::GpuAware::off);
        Data<double> sum(devs, 1, "sum");
        std::vector<Data<double>> keep;
        DataActiveMsg<double> msg(
            comm, &devs,
            [&](Data<double>& d) {
                devs.submit(sum_of, cascade::read(d), cascade::write(sum), int(len),
                            Launch{.on = sim, .threads = {1}});
                keep.push_back(d);
            },
            {}, direct ? "direct" : "staged", mo);
        Data<double> x(devs, len, "x");
        devs.submit(fill_from, cascade::write(x), double(me), int(len),
                    Launch{.on = sim, .threads = {len}});
        msg.send(dest, x);
        tp.join();
        devs.wait_all();
        ASSERT_EQ(keep.size(), 1u) << "setting " << setting;
        const cascade::DataPath p = direct ? cascade::DataPath::direct : cascade::DataPath::staged;
        EXPECT_EQ(msg.sent_by(p), 1u) << "setting " << setting;
        EXPECT_EQ(msg.received_by(p), 1u) << "setting " << setting;
        // Before anything is read back on the host: the bytes moved between host and device.
        const auto st = devs.stats().devices[std::size_t(sim)];
        EXPECT_EQ(st.bytes_out, direct ? 0u : len * sizeof(double)) << "setting " << setting;
        EXPECT_EQ(st.bytes_in, direct ? 0u : len * sizeof(double)) << "setting " << setting;
        double want = 0;
        for (std::size_t i = 0; i < len; ++i)
            want += double(src) + double(i);
        EXPECT_EQ(sum.to_vector()[0], want) << "setting " << setting;
        const auto got = keep[0].to_vector();
        EXPECT_EQ(got[0], double(src));
        EXPECT_EQ(got[len - 1], double(src) + double(len - 1));
        // The sender's Data is intact and free again.
        EXPECT_EQ(x.to_vector()[len - 1], double(me) + double(len - 1));
        keep.clear();
    }
}
