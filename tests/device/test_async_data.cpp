// Data<T> as an async argument and result (<cascade/comm/device.hpp>), at 1-4 ranks with a
// simulated device whose copies are slow. Each rank calls the next one with a Data whose
// freshest copy is on the device only (host copy stale), on the host only, or on both; the
// callee finds it valid on its host, on its own Devices, changes it so that the result is again
// in one of the three states, and returns it; the caller runs a device task on the result. The
// caller's Data is unchanged (a callee on another rank got a copy). A result that must be copied
// from a device before it leaves is never waited for on the communication thread, even when the
// call itself ran there. An empty Data travels as an empty handle, which a device task rejects by
// name. A future of a Data, ready or pending, is an argument too.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <mpi.h>

#include "cascade/cascade.hpp"
#include "cascade/comm/device.hpp"
#include "cascade/core/detail/waits.hpp"
#include "cascade/device/devices.hpp"
#include "sim_fixture.hpp"

using cascade::Communicator;
using cascade::Data;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Futures;
using cascade::Launch;
using cascade::Threadpool;

namespace {

using device_test::add_in_state;
using device_test::add_to;

// Slow copies (15 ms each, low bandwidth): a device-to-host copy is long in flight.
cascade::DevicesOptions slow_sim() {
    return device_test::slow_sim(0.015);
}

constexpr std::size_t kLen = 20000;  // 160 KB: the request and the reply are large messages

std::vector<double> ramp(double base) {
    std::vector<double> v(kLen);
    for (std::size_t i = 0; i < kLen; ++i)
        v[i] = double(i) + base;
    return v;
}

}  // namespace

TEST(AsyncData, ArgumentAndResultInEveryState) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    cascade::set_data_devices(&devs);
    Futures fx(tp, &comm);
    const int me = comm.rank(), n = comm.ranks();
    // The callee: d must be valid on its host, on this rank's Devices; +10 in state `kind`.
    auto bump = fx.make_async(
        [](Data<double>& d, int& kind) -> Data<double> {
            Devices* here = cascade::data_devices();
            if (!d.valid() || d.size() != kLen) throw std::runtime_error("not a Data of kLen");
            add_in_state(*here, d, 10, kind);
            return d;
        },
        "bump");
    const int to = (me + 1) % n;
    std::vector<Data<double>> mine;
    std::vector<cascade::future<Data<double>>> results;
    for (int kind = 0; kind < 3; ++kind) {
        Data<double> x(devs, std::span<const double>(ramp(0)), "x" + std::to_string(kind));
        add_in_state(devs, x, 1, kind);  // x = i + 1, freshest copy in state `kind`
        results.push_back(cascade::async(to, bump, x, (kind + 1) % 3));
        mine.push_back(x);
    }
    for (int kind = 0; kind < 3; ++kind) {
        Data<double> r = results[std::size_t(kind)].get();
        ASSERT_TRUE(r.valid());
        EXPECT_EQ(r.name(), "x" + std::to_string(kind));
        // The result, used by a device task here: i + 1 + 10 + 100.
        devs.submit(add_to, cascade::readwrite(r), 100.0, int(kLen),
                    Launch{.on = devs.find(DeviceKind::sim), .threads = {kLen}});
        EXPECT_EQ(r.to_vector(), ramp(111)) << "kind " << kind;
        if (to != me) {  // (on its own rank, the callee gets another handle to the same data)
            EXPECT_EQ(mine[std::size_t(kind)].to_vector(), ramp(1)) << "kind " << kind;
        }
    }
    tp.join();
    cascade::set_data_devices(nullptr);
}

// An empty Data travels as an empty handle: the callee sees valid() false, and a device task
// on it fails naming it; the caller's get() carries that error.
TEST(AsyncData, EmptyDataGivesClearError) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    cascade::set_data_devices(&devs);
    Futures fx(tp, &comm);
    auto use = fx.make_async(
        [](Data<double>& d) -> int {
            Devices* here = cascade::data_devices();
            if (d.valid()) return 1;
            here->submit(add_to, cascade::readwrite(d), 1.0, 1,
                         Launch{.on = here->find(DeviceKind::sim), .threads = {1}});
            return 2;
        },
        "use");
    auto f = cascade::async((comm.rank() + 1) % comm.ranks(), use, Data<double>());
    try {
        (void)f.get();
        ADD_FAILURE() << "a device task on an empty Data ran";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("empty Data"), std::string::npos) << e.what();
    }
    tp.join();
    cascade::set_data_devices(nullptr);
}

// A call that returns a Data whose freshest copy is on the device may run on the communication
// thread (run_in_handler, or a short call: see Futures::calls_on_comm_thread); the
// device-to-host copy its result needs is then waited for on a worker, never there. Rank 0's main
// thread only drives MPI (in join()) while rank 1 calls it: its wait counter
// (core/detail/waits.hpp) must not move.
TEST(AsyncData, ResultNeverWaitsOnTheCommThread) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    cascade::set_data_devices(&devs);
    Futures fx(tp, &comm);
    const int me = comm.rank(), n = comm.ranks();
    if (n < 2) GTEST_SKIP() << "needs two ranks";
    Data<double> fresh(devs, std::span<const double>(ramp(0)), "fresh");
    // +1 on the device: afterwards the freshest copy is there only (a call that waits: it runs
    // on a worker).
    auto touch = fx.make_async(
        [&devs, &fresh](int&) {
            devs.submit(add_to, cascade::readwrite(fresh), 1.0, int(kLen),
                        Launch{.on = devs.find(DeviceKind::sim), .threads = {kLen}})
                .wait();
        },
        "touch");
    // A short call that never waits: it may run on the communication thread (the pool is idle
    // when it arrives). Its result leaves with a device-to-host copy.
    auto get = fx.make_async([&fresh](int&) -> Data<double> { return fresh; }, "get");
    // The same, always run inside the message handler, on the communication thread.
    auto get_here = fx.make_async([&fresh](int&) -> Data<double> { return fresh; }, "get_here",
                                  {.run_in_handler = true});
    MPI_Barrier(MPI_COMM_WORLD);
    const std::uint64_t waits_before = cascade::detail::tls_waits;
    if (me == 1)
        for (int i = 0; i < 30; ++i) {
            cascade::async(0, touch, i).get();
            Data<double> r = cascade::async(0, i % 2 ? get : get_here, i).get();
            ASSERT_EQ(r.size(), kLen);
            EXPECT_EQ(r.to_vector()[5], 5.0 + i + 1);
        }
    tp.join();
    std::uint64_t counts[2] = {fx.calls_on_comm_thread(),
                               cascade::detail::tls_waits - waits_before};
    MPI_Bcast(counts, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    EXPECT_EQ(counts[1], 0u) << "rank 0's communication thread waited";
    if (me == 0)
        std::printf("short calls run by the communication thread: %llu\n",
                    static_cast<unsigned long long>(counts[0]));
    cascade::set_data_devices(nullptr);
}

// A future holding a Data as an argument: ready when async() is called (its value written into
// the request), or pending (the callee fetches it from this rank, which sends it from a
// worker once its host copy is granted).
TEST(AsyncData, FutureArgumentHoldingData) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    cascade::set_data_devices(&devs);
    Futures fx(tp, &comm);
    const int me = comm.rank(), n = comm.ranks();
    auto sum = fx.make_async(
        [](Data<double>& d) {
            double t = 0;
            for (double v : d.to_vector())
                t += v;
            return t;
        },
        "sum");
    const int to = (me + 1) % n;
    Data<double> x(devs, std::span<const double>(ramp(0)), "x");
    add_in_state(devs, x, 1, 0);  // fresh on the device only
    double want = 0;
    for (double v : ramp(1))
        want += v;
    cascade::future<Data<double>> ready = cascade::make_ready_future(x);
    EXPECT_EQ(cascade::async(to, sum, std::move(ready)).get(), want);
    cascade::promise<Data<double>> p;
    cascade::future<double> later = cascade::async(to, sum, p.get_future());
    add_in_state(devs, x, 1, 0);
    p.set_value(x);
    EXPECT_EQ(later.get(), want + double(kLen));
    tp.join();
    cascade::set_data_devices(nullptr);
}
