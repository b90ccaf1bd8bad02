// Host accesses that senders and receivers of messages use: a chunked read says whether it
// fetched from a device even when every chunk landed before the caller looked; a read that
// may be lent a device copy gets the copy itself (no bytes moved) only from a device whose
// memory the host addresses and only when the host copy is stale; a write asked on a device
// makes that device's copy the valid one, and a kernel there reads it with no copy in; code
// given to on_granted runs as soon as a copy is granted, or its request failed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/device/devices.hpp"
#include "kernels.hpp"
#include "sim_fixture.hpp"

using cascade::Data;
using cascade::DataAccess;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Launch;
using cascade::Threadpool;

namespace {

using device_test::fill_from;
using device_test::quick_sim;
using device_test::sum_of;

}  // namespace

// Every chunk lands long before the caller asks: the access still says it fetched (a sender
// that judged by ready_bytes() alone took the fetched copy for a valid host copy).
TEST(DeviceAccess, ChunkedReadSaysItFetchedEvenWhenEveryChunkLanded) {
    Threadpool tp(2);
    Devices devs(tp, quick_sim());
    const int sim = devs.find(DeviceKind::sim);
    const std::size_t n = 10000;
    Data<double> x(devs, n, "x");
    devs.submit(fill_from, cascade::write(x), 1.0, int(n), Launch{.on = sim, .threads = {n}});
    auto h = x.request_chunked(4096);
    const auto s = h.get();
    while (h.ready_bytes() < x.bytes())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(h.fetched());
    EXPECT_EQ(h.device(), -1);
    EXPECT_EQ(s[n - 1], 1.0 + double(n - 1));
    x.release();
    // Now the host copy is valid: nothing to fetch.
    auto h2 = x.request_chunked(4096);
    h2.get();
    EXPECT_FALSE(h2.fetched());
    EXPECT_EQ(h2.ready_bytes(), x.bytes());
    x.release();
    tp.join();
}

// A read that may be lent a sim copy gets it (sim memory is host memory): nothing is copied,
// the bytes are the device's; without sim among the kinds, or with the host copy valid, the
// host copy as usual.
TEST(DeviceAccess, ReadLentTheDeviceCopyWhenAllowed) {
    Threadpool tp(2);
    Devices devs(tp, quick_sim());
    const int sim = devs.find(DeviceKind::sim);
    const std::size_t n = 5000;
    Data<double> x(devs, n, "x");
    devs.submit(fill_from, cascade::write(x), 3.0, int(n), Launch{.on = sim, .threads = {n}});
    devs.wait_all();
    auto h = x.request_chunked(4096, cascade::lend_bit(DeviceKind::sim));
    const auto s = h.get();
    EXPECT_EQ(h.device(), sim);
    EXPECT_FALSE(h.fetched());
    EXPECT_EQ(h.ready_bytes(), x.bytes());
    EXPECT_EQ(s[0], 3.0);
    EXPECT_EQ(s[n - 1], 3.0 + double(n - 1));
    // A reader on the same device runs meanwhile; nothing went to the host.
    Data<double> sum(devs, 1, "sum");
    devs.submit(sum_of, cascade::read(x), cascade::write(sum), int(n),
                Launch{.on = sim, .threads = {1}})
        .wait();
    EXPECT_EQ(devs.stats().devices[std::size_t(sim)].bytes_out, 0u);
    x.release();
    EXPECT_EQ(x.device_kind(sim), DeviceKind::sim);
    // Lending only sim's kind of device: a CUDA mask leaves the sim copy alone (fetched).
    auto h2 = x.request_chunked(4096, cascade::lend_bit(DeviceKind::cuda));
    h2.get();
    EXPECT_EQ(h2.device(), -1);
    EXPECT_TRUE(h2.fetched());
    x.release();
    // The host copy is valid now: no lending.
    auto h3 = x.request_chunked(4096, cascade::lend_bit(DeviceKind::sim));
    h3.get();
    EXPECT_EQ(h3.device(), -1);
    x.release();
    tp.join();
}

// A write asked on the sim device: the caller writes the device copy through its pointer, a
// kernel there then reads it with no copy in, and the host sees the values after a copy out.
TEST(DeviceAccess, WriteOnADeviceMakesItsCopyTheValidOne) {
    Threadpool tp(2);
    Devices devs(tp, quick_sim());
    const int sim = devs.find(DeviceKind::sim);
    const std::size_t n = 3000;
    Data<double> x(devs, n, "x");
    auto h = x.request_on(sim);
    const auto s = h.get();
    ASSERT_EQ(h.device(), sim);
    for (std::size_t i = 0; i < n; ++i)
        s[i] = double(i);
    x.release();
    Data<double> sum(devs, 1, "sum");
    devs.submit(sum_of, cascade::read(x), cascade::write(sum), int(n),
                Launch{.on = sim, .threads = {1}});
    devs.wait_all();
    EXPECT_EQ(devs.stats().devices[std::size_t(sim)].bytes_in, 0u);
    EXPECT_EQ(sum.to_vector()[0], double(n) * double(n - 1) / 2);
    EXPECT_EQ(x.to_vector()[n - 1], double(n - 1));
    // The cpu device's memory is the host's: the access goes to the host copy.
    const int cpu = devs.find(DeviceKind::cpu);
    ASSERT_GE(cpu, 0);
    auto h2 = x.request_on(cpu);
    h2.get();
    EXPECT_EQ(h2.device(), -1);
    x.release();
    EXPECT_THROW(x.request_on(99), cascade::UsageError);
    tp.join();
}

// on_granted runs the code that uses a host copy as soon as the copy is granted, on the thread
// that grants it (not a pool worker: no worker waits for the copy), and only once.
TEST(DeviceAccess, OnGrantedRunsOnceTheCopyLandsWithNoWorkerWaiting) {
    Threadpool tp(2);
    Devices devs(tp, device_test::slow_sim(2e-3));
    const int sim = devs.find(DeviceKind::sim);
    const std::size_t n = 4096;
    Data<double> x(devs, n, "x");
    devs.submit(fill_from, cascade::write(x), 2.0, int(n), Launch{.on = sim, .threads = {n}});
    auto h = x.request(DataAccess::read);
    std::atomic<int> ran{0};
    std::atomic<int> on_worker{0};
    std::atomic<double> last{0};
    h.on_granted([&] {
        const auto s = h.get();  // granted: returns at once
        last = s[n - 1];
        if (tp.current_thread() >= 0) ++on_worker;
        ++ran;
        x.release();
    });
    tp.join();  // the request holds the pool's epoch open until release()
    EXPECT_EQ(ran.load(), 1);
    EXPECT_EQ(on_worker.load(), 0);
    EXPECT_EQ(last.load(), 2.0 + double(n - 1));
}

// Registered after the grant, the code runs at once on the caller's thread.
TEST(DeviceAccess, OnGrantedAfterTheGrantRunsAtOnce) {
    Threadpool tp(2);
    Devices devs(tp, quick_sim());
    Data<double> x(devs, 16, "x");
    devs.submit(fill_from, cascade::write(x), 5.0, 16,
                Launch{.on = devs.find(DeviceKind::sim), .threads = {16}});
    auto h = x.request(DataAccess::read);
    h.get();
    int ran = 0;
    h.on_granted([&] {
        EXPECT_EQ(h.get()[15], 20.0);
        ++ran;
    });
    EXPECT_EQ(ran, 1);
    x.release();
    tp.join();
}

// A request that fails (it reads what a failed kernel wrote) runs the code too, and get()
// rethrows the kernel's error there; nothing is held, so join() ends.
TEST(DeviceAccess, OnGrantedRunsWhenTheRequestFails) {
    Threadpool tp(2);
    Devices devs(tp, quick_sim());
    Data<double> x(devs, 8, "x");
    devs.submit(device_test::throwing_kernel(), cascade::readwrite(x), Launch{.on = 1});
    auto h = x.request(DataAccess::read);
    std::atomic<int> threw{0};
    h.on_granted([&] {
        try {
            h.get();
        } catch (const std::domain_error&) {
            ++threw;
        }
    });
    tp.join();
    EXPECT_EQ(threw.load(), 1);
}

// One callback per request; one that throws fails the pool as a task would.
TEST(DeviceAccess, OnGrantedMisuseAndErrors) {
    {
        Threadpool tp(2);
        Devices devs(tp, quick_sim());
        Data<double> x(devs, 8, "x");
        // Held back until submit(): the request after it stays pending meanwhile.
        auto w = devs.prepare(fill_from, cascade::write(x), 1.0, 8);
        auto h = x.request(DataAccess::read);
        h.on_granted([&] { x.release(); });
        EXPECT_THROW(h.on_granted([] {}), cascade::UsageError);
        w.submit();
        tp.join();
    }
    {
        Threadpool tp(2);
        Devices devs(tp, quick_sim());
        Data<double> x(devs, 8, "x");
        auto w = devs.prepare(fill_from, cascade::write(x), 1.0, 8);
        auto h = x.request(DataAccess::read);
        h.on_granted([&] {
            x.release();  // the last work of the epoch, before the error
            throw std::runtime_error("bad face");
        });
        w.submit();
        EXPECT_THROW(tp.join(), cascade::TaskError);
    }
}
