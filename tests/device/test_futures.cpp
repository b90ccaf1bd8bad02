// Device tasks as futures of the futures layer (cascade::to_future, <cascade/futures/device.hpp>):
// get() waits for the task and rethrows its error, then() runs after it on the pool,
// when_all() mixes device tasks with async() results, get() on the pool's only worker runs the
// device work instead of blocking, a continuation fulfils a Taskflow promise, and misuse gives
// clear errors. Links the device layer and the futures layer (no communicator, one process).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cascade/device/devices.hpp"
#include "cascade/futures/device.hpp"
#include "cascade/futures/futures.hpp"
#include "kernels.hpp"

using cascade::Data;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::DeviceTask;
using cascade::Futures;
using cascade::Launch;
using cascade::Threadpool;
using cascade::to_future;
using cascade::UsageError;

using device_test::throwing_kernel;

namespace {

CASCADE_KERNEL(fill, (kernel_global double* y, double v, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = v;
});

CASCADE_KERNEL(scale, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] *= a;
});

// Sleeps (scalar 1, in ms), then sets flag[0] to 1: a future that became ready too early
// sees 0.
cascade::Kernel& slow_flag_kernel() {
    static cascade::Kernel k("slow_flag");
    static bool once = [] {
        k.cpu([](cascade::KernelArgs& a) {
            std::this_thread::sleep_for(std::chrono::milliseconds(a.scalar<int>(1)));
            a.data<int>(0)[0] = 1;
        });
        return true;
    }();
    (void)once;
    return k;
}

}  // namespace

TEST(DeviceFutures, GetWaitsForTheTaskOnEveryDevice) {
    Threadpool tp(2);
    Futures fx(tp);
    Devices devs(tp, {.sim = 1, .opencl = -1});
    const int n = 512;
    Data<double> y(devs, n, "y");
    for (int d = 0; d < devs.size(); ++d) {
        DeviceTask t = devs.submit(fill, cascade::write(y), 1.0 + d, n,
                                   Launch{.on = d, .threads = {std::size_t(n)}});
        cascade::future<void> f = to_future(t);
        f.get();
        EXPECT_TRUE(t.ready()) << devs.device(d).name();
        EXPECT_FALSE(f.valid());
        auto v = y.to_vector();
        EXPECT_EQ(v[0], 1.0 + d) << devs.device(d).name();
        EXPECT_EQ(v[n - 1], 1.0 + d) << devs.device(d).name();
    }
    if (devs.find(DeviceKind::opencl) < 0)
        std::printf("(no OpenCL device found: cpu and sim only)\n");
}

TEST(DeviceFutures, TheTasksErrorReachesGetAndContinuations) {
    Threadpool tp(2);
    Futures fx(tp);
    Devices devs(tp, {.sim = 1});
    Data<double> x(devs, 8, "x");
    for (int d = 0; d < devs.size(); ++d) {
        DeviceTask bad = devs.submit(throwing_kernel(), cascade::readwrite(x), Launch{.on = d});
        try {
            to_future(bad).get();
            ADD_FAILURE() << "get() did not throw on " << devs.device(d).name();
        } catch (const std::domain_error& e) {
            EXPECT_EQ(std::string(e.what()), "bad input in thrower");
        }
        // then(f): f does not run, the result fails with the same exception.
        std::atomic<bool> ran{false};
        auto after = to_future(bad).then([&] { ran = true; });
        EXPECT_THROW(after.get(), std::domain_error);
        EXPECT_FALSE(ran.load());
        // then(f(future)) sees it too.
        auto seen = to_future(bad).then([](cascade::future<void> f) {
            try {
                f.get();
            } catch (const std::domain_error&) {
                return 1;
            }
            return 0;
        });
        EXPECT_EQ(seen.get(), 1);
    }
    // A task that fails because it reads what a failed task wrote: the same exception.
    DeviceTask bad = devs.submit(throwing_kernel(), cascade::readwrite(x), Launch{.on = 1});
    DeviceTask reader = devs.submit(scale, cascade::readwrite(x), 2.0, 8, Launch{.threads = {8}});
    EXPECT_THROW(to_future(reader).get(), std::domain_error);
    (void)bad;
}

TEST(DeviceFutures, ThenRunsOnThePoolAfterTheTaskFinished) {
    Threadpool tp(2);
    Futures fx(tp);
    Devices devs(tp, {.sim = 1});
    for (int d = 0; d < devs.size(); ++d) {
        Data<int> flag(devs, 1, "flag");  // zeros
        DeviceTask t = devs.submit(slow_flag_kernel(), cascade::write(flag), 30, Launch{.on = d});
        std::atomic<int> on_worker{-2};
        cascade::future<int> g = to_future(t).then([&] {
            on_worker = tp.current_thread();
            EXPECT_TRUE(t.ready());
            return flag.to_vector()[0] + 41;  // the host copy, after the task wrote it
        });
        EXPECT_EQ(g.get(), 42) << devs.device(d).name();
        EXPECT_GE(on_worker.load(), 0) << "the continuation ran outside the pool";
    }
}

TEST(DeviceFutures, WhenAllMixesDeviceTasksAndAsyncResults) {
    Threadpool tp(2);
    Futures fx(tp);
    Devices devs(tp, {.sim = 2});
    const int n = 64;
    Data<double> a(devs, n, "a"), b(devs, n, "b");
    DeviceTask ta =
        devs.submit(fill, cascade::write(a), 3.0, n, Launch{.on = 1, .threads = {std::size_t(n)}});
    DeviceTask tb =
        devs.submit(fill, cascade::write(b), 4.0, n, Launch{.on = 2, .threads = {std::size_t(n)}});
    auto all = cascade::when_all(to_future(ta), to_future(tb),
                                 cascade::async(cascade::here, [] { return 7; }));
    auto sum =
        std::move(all).then([&](std::tuple<cascade::detail::Unit, cascade::detail::Unit, int>&& r) {
            EXPECT_TRUE(ta.ready());
            EXPECT_TRUE(tb.ready());
            return a.to_vector()[0] + b.to_vector()[n - 1] + std::get<2>(r);
        });
    EXPECT_EQ(sum.get(), 14.0);

    // The vector form: future<void>, failed if one of them failed.
    Data<double> c(devs, n, "c");
    std::vector<cascade::future<void>> fs;
    fs.push_back(to_future(
        devs.submit(scale, cascade::readwrite(a), 2.0, n, Launch{.threads = {std::size_t(n)}})));
    fs.push_back(to_future(devs.submit(throwing_kernel(), cascade::readwrite(c))));
    fs.push_back(to_future(
        devs.submit(scale, cascade::readwrite(b), 2.0, n, Launch{.threads = {std::size_t(n)}})));
    EXPECT_THROW(cascade::when_all(std::move(fs)).get(), std::domain_error);
    EXPECT_EQ(a.to_vector()[0], 6.0);
    EXPECT_EQ(b.to_vector()[0], 8.0);
}

// One worker: get() inside a pool task must run the device work (the cpu device's kernels
// run on the pool's workers) and the completion itself. A get() that blocked its worker would
// never return (the test would hang until the watchdog).
TEST(DeviceFutures, GetOnThePoolsOnlyWorkerDoesNotBlockIt) {
    Threadpool tp(1);
    Futures fx(tp);
    Devices devs(tp, {.sim = 1});
    const int n = 4096;
    Data<double> y(devs, n, "y");
    std::atomic<double> seen{0};
    std::atomic<int> done{0};
    tp.insert([&] {
        for (int round = 0; round < 4; ++round)
            for (int d = 0; d < devs.size(); ++d) {
                DeviceTask t = devs.submit(fill, cascade::write(y), double(round * 10 + d), n,
                                           Launch{.on = d, .threads = {std::size_t(n), 64}});
                to_future(t).get();
                ++done;
            }
        DeviceTask t = devs.submit(scale, cascade::readwrite(y), 2.0, n,
                                   Launch{.on = 0, .threads = {std::size_t(n), 64}});
        to_future(t).then([&] { seen = y.to_vector()[n - 1]; }).get();
    });
    tp.join();
    EXPECT_EQ(done.load(), 4 * devs.size());
    EXPECT_EQ(seen.load(), 2.0 * (30 + devs.size() - 1));
}

TEST(DeviceFutures, AContinuationFulfilsATaskflowPromise) {
    Threadpool tp(2);
    Futures fx(tp);
    Devices devs(tp, {.sim = 2});
    cascade::Taskflow<int> tf(&tp, "graph");
    std::vector<Data<int>> flags;
    for (int i = 0; i < 3; ++i)
        flags.emplace_back(devs, 1, "flag");
    std::vector<DeviceTask> tasks(3);
    std::atomic<int> seen{-1};
    std::atomic<bool> all_ready{false};
    cascade::promise<void> ran;
    auto graph_done = ran.get_future();
    // Task 0 needs the three device tasks and one async: four promises.
    tf.set_indegree([](int) { return 4; }).set_task([&](int) {
        all_ready = tasks[0].ready() && tasks[1].ready() && tasks[2].ready();
        int s = 0;
        for (auto& f : flags)
            s += f.to_vector()[0];
        seen = s;
        ran.set_value();
    });
    for (int i = 0; i < 3; ++i) {
        DeviceTask& t = tasks[std::size_t(i)];
        t = devs.submit(slow_flag_kernel(), cascade::write(flags[std::size_t(i)]), 10 * i,
                        Launch{.on = i});
        to_future(t).then([&] { tf.fulfill_promise(0); });
    }
    cascade::async(cascade::here, [] { return 1; }).then([&](int) { tf.fulfill_promise(0); });
    graph_done.get();  // (a pool's join() does not wait for device tasks)
    tp.join();
    EXPECT_TRUE(all_ready.load());  // it ran after the three device tasks finished
    EXPECT_EQ(seen.load(), 3);
}

TEST(DeviceFutures, MisuseGivesClearErrors) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Data<double> y(devs, 8, "y");
    DeviceTask t = devs.submit(fill, cascade::write(y), 1.0, 8, Launch{.threads = {8}});
    try {
        (void)to_future(t);  // no Futures at all
        ADD_FAILURE() << "to_future() without a Futures";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("cascade::Futures"), std::string::npos) << e.what();
    }
    {
        Threadpool other(1);
        Futures fx(other);  // over another pool
        EXPECT_THROW((void)to_future(t), UsageError);
        other.join();
    }
    Futures fx(tp);
    EXPECT_THROW((void)to_future(DeviceTask()), UsageError);
    DeviceTask prepared = devs.prepare(fill, cascade::write(y), 2.0, 8, Launch{.threads = {8}});
    EXPECT_THROW((void)to_future(prepared), UsageError);  // not submitted
    prepared.submit();
    to_future(prepared).get();
    EXPECT_EQ(y.to_vector()[7], 2.0);
    tp.join();
}
