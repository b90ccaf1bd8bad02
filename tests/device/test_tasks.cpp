// Device tasks on cpu and sim devices: the three kinds of dependencies, host requests,
// continuations and task graphs, errors reaching the waiter, and misuse.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cascade/device/devices.hpp"
#include "kernels.hpp"

using cascade::Data;
using cascade::DataAccess;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Launch;
using cascade::Threadpool;
using cascade::UsageError;

using device_test::throwing_kernel;

namespace {

CASCADE_KERNEL(axpy, (double a, kernel_global const double* x, kernel_global double* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] += a * x[i];
});

CASCADE_KERNEL(fill, (kernel_global double* y, double v, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = v;
});

// Order of the CPU variants' runs, for the dependency tests.
std::atomic<int> g_clock{0};
cascade::Kernel& stamp_kernel() {
    static cascade::Kernel k("stamp");
    static bool once = [] {
        k.cpu([](cascade::KernelArgs& a) {
            const int delay = a.scalar<int>(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(delay));
            a.data<int>(0)[0] = g_clock.fetch_add(1);
        });
        return true;
    }();
    (void)once;
    return k;
}

std::vector<double> iota(int n, double from = 0) {
    std::vector<double> v(static_cast<std::size_t>(n));
    std::iota(v.begin(), v.end(), from);
    return v;
}

}  // namespace

TEST(DeviceTasks, AxpyGivesTheSameAnswerOnEveryDevice) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 2});
    const int n = 1000;
    auto xs = iota(n);
    std::vector<double> ys(n, 1.0);
    Data<double> x(devs, std::span<const double>(xs), "x");
    Data<double> y(devs, std::span<const double>(ys), "y");
    for (int d = 0; d < devs.size(); ++d)
        devs.submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n,
                    Launch{.on = d, .threads = {std::size_t(n)}});
    auto v = y.to_vector();
    for (int i = 0; i < n; ++i)
        ASSERT_DOUBLE_EQ(v[static_cast<std::size_t>(i)], 1.0 + 3 * 2.0 * i);
}

TEST(DeviceTasks, ImplicitDependenciesFollowSubmissionOrderAcrossDevices) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 3});
    const int n = 256;
    Data<double> x(devs, n, "x"), y(devs, n, "y");
    // fill x on one device, then accumulate into y on others: each step reads what the one
    // before wrote, wherever it ran.
    devs.submit(fill, cascade::write(x), 1.5, n, Launch{.on = 1, .threads = {std::size_t(n)}});
    for (int k = 0; k < 12; ++k)
        devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(y), n,
                    Launch{.on = k % devs.size(), .threads = {std::size_t(n)}});
    devs.submit(fill, cascade::write(x), 0.0, n, Launch{.on = 2, .threads = {std::size_t(n)}});
    auto v = y.to_vector();
    for (double e : v)
        ASSERT_DOUBLE_EQ(e, 18.0);
    auto w = x.to_vector();
    for (double e : w)
        ASSERT_DOUBLE_EQ(e, 0.0);
}

TEST(DeviceTasks, ReadersShareAndAWriterWaitsForThem) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 2});
    Data<int> shared(devs, 1, "shared"), r1(devs, 1, "r1"), r2(devs, 1, "r2"), w(devs, 1, "w");
    auto& k = stamp_kernel();
    g_clock = 0;
    // Two slow readers of `shared` on two devices, then a writer of `shared`.
    cascade::Kernel& rk = k;
    auto a = devs.submit(rk, cascade::write(r1), 30, cascade::read(shared), Launch{.on = 1});
    auto b = devs.submit(rk, cascade::write(r2), 30, cascade::read(shared), Launch{.on = 2});
    auto c = devs.submit(rk, cascade::write(w), 0, cascade::readwrite(shared), Launch{.on = 0});
    c.get();
    EXPECT_TRUE(a.ready());
    EXPECT_TRUE(b.ready());
    EXPECT_EQ(w.to_vector()[0], 2);  // ran after both readers
}

TEST(DeviceTasks, ExplicitDependencyOrdersTasksWithoutSharedData) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Data<int> p(devs, 1, "p"), q(devs, 1, "q");
    g_clock = 0;
    auto first = devs.submit(stamp_kernel(), cascade::write(p), 40, Launch{.on = 1});
    auto second = devs.prepare(stamp_kernel(), cascade::write(q), 0, Launch{.on = 0});
    second.after(first).submit();
    second.get();
    EXPECT_TRUE(first.ready());
    EXPECT_EQ(p.to_vector()[0], 0);
    EXPECT_EQ(q.to_vector()[0], 1);
    EXPECT_THROW(second.after(first), UsageError);  // already submitted
}

TEST(DeviceTasks, ForkJoinWaitAll) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 2});
    std::vector<Data<double>> ds;
    for (int i = 0; i < 20; ++i) {
        ds.emplace_back(devs, 64, std::to_string(i));
        devs.submit(fill, cascade::write(ds.back()), double(i), 64, Launch{.threads = {64}});
    }
    devs.wait_all();
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(ds[static_cast<std::size_t>(i)].to_vector()[5], double(i));
}

TEST(DeviceTasks, HostRequestHoldsLaterTasksUntilRelease) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    const int n = 32;
    Data<double> x(devs, n, "x");
    auto h = x.request(DataAccess::write);
    auto s = h.get();
    for (auto& e : s)
        e = 2.0;
    auto t = devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(x), n,
                         Launch{.on = 1, .threads = {std::size_t(n)}});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(t.ready());                                // waits for release()
    EXPECT_THROW(x.request(DataAccess::read), UsageError);  // not released yet
    EXPECT_THROW(devs.wait_all(), UsageError);              // would never end
    x.release();
    t.get();
    for (double e : x.to_vector())
        EXPECT_EQ(e, 4.0);
    EXPECT_THROW(x.release(), UsageError);  // nothing to release
}

TEST(DeviceTasks, ThenWhenAllAndATaskflowPromise) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 2});
    Data<double> a(devs, 16, "a"), b(devs, 16, "b");
    auto ta = devs.submit(fill, cascade::write(a), 1.0, 16, Launch{.threads = {16}});
    auto tb = devs.submit(fill, cascade::write(b), 2.0, 16, Launch{.threads = {16}});
    std::atomic<int> after{0};
    auto both = cascade::when_all({ta, tb});
    auto c = both.then([&] { after = 1; });
    std::atomic<int> ran{0};
    cascade::Taskflow<int> tf(&tp, "graph");
    tf.set_task([&](int) { ran = after.load() + 10; }).set_indegree([](int) { return 1; });
    both.fulfil(tf, 0);
    c.get();
    tp.join();
    EXPECT_EQ(after.load(), 1);
    EXPECT_GE(ran.load(), 10);
}

TEST(DeviceTasks, ExceptionsReachTheWaiterAndTheTasksAfter) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Data<double> x(devs, 8, "x");
    for (int d = 0; d < devs.size(); ++d) {
        auto t = devs.submit(throwing_kernel(), cascade::readwrite(x), Launch{.on = d});
        EXPECT_THROW(t.get(), std::domain_error);
        EXPECT_TRUE(t.failed());
    }
    // A task that reads what a failed task wrote fails with its exception, and so does a
    // continuation; a task that overwrites the data runs.
    Data<double> y(devs, 8, "y");
    auto bad = devs.submit(throwing_kernel(), cascade::readwrite(x), Launch{.on = 1});
    auto reader =
        devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(y), 8, Launch{.threads = {8}});
    auto cont = bad.then([] {});
    EXPECT_THROW(reader.get(), std::domain_error);
    EXPECT_THROW(cont.get(), std::domain_error);
    EXPECT_THROW(x.to_vector(), std::domain_error);  // a host request reads it too
    devs.submit(fill, cascade::write(x), 3.0, 8, Launch{.threads = {8}}).get();
    EXPECT_EQ(x.to_vector()[0], 3.0);
}

TEST(DeviceTasks, MisuseGivesClearErrors) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Devices other(tp, {.name = "other"});
    Data<double> x(devs, 8, "x");
    Data<double> y(other, 8, "y");
    Data<float> f(devs, 8, "f");
    auto expect_error = [](auto&& fn, const std::string& part) {
        try {
            fn();
            ADD_FAILURE() << "no error; expected one containing: " << part;
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    expect_error([&] { devs.submit(fill, cascade::write(y), 1.0, 8); },
                 "belongs to another Devices");
    expect_error([&] { devs.submit(fill, cascade::write(f), 1.0, 8); }, "4 bytes");
    expect_error([&] { devs.submit(fill, cascade::write(x), 1.0); },
                 "2 arguments given, the kernel has 3");
    expect_error([&] { devs.submit(fill, 1.0, cascade::write(x), 8); }, "expects a pointer");
    expect_error([&] { devs.submit(axpy, 1.0, cascade::write(x), cascade::readwrite(x), 8); },
                 "pointer-to-const");
    expect_error(
        [&] { devs.submit(fill, cascade::write(x), 1.0, 8, Launch{.device = DeviceKind::opencl}); },
        "no opencl device");
    cascade::Kernel only_cl("only_opencl");
    only_cl.opencl_source("__kernel void k() {}", "k");
    expect_error([&] { devs.submit(only_cl, Launch{.device = DeviceKind::sim}); },
                 "has no variant for sim");
    expect_error(
        [&] {
            devs.submit(fill, cascade::write(x), 1.0, 8, Launch{.threads = {{8}, {3}}});
        },
        "not a multiple");
    expect_error([&] { devs.submit(fill, cascade::write(x), 1.0, 8, Launch{.on = 7}); },
                 "device 7");
    expect_error([&] { Data<double>().request(DataAccess::read); }, "empty Data");
    // The Devices are still fine after all that.
    devs.submit(fill, cascade::write(x), 5.0, 8, Launch{.threads = {8}}).get();
    EXPECT_EQ(x.to_vector()[7], 5.0);
}

TEST(DeviceTasks, ScalarsAreConvertedToTheParameterTypes) {
    Threadpool tp(1);
    Devices devs(tp, {.sim = 1});
    Data<double> x(devs, 10, "x");
    devs.submit(fill, cascade::write(x), 7, std::size_t(10),
                Launch{.threads = {10}});  // int, size_t
    for (double e : x.to_vector())
        EXPECT_EQ(e, 7.0);
}

TEST(DeviceTasks, NewDataReadsAsZerosEvenInReusedMemory) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    const int n = 4096;
    std::vector<double> zeros(n, 0.0);
    for (int round = 0; round < 4; ++round) {
        Data<double> x(devs, std::span<const double>(zeros));
        {
            Data<double> used(devs, n);
            devs.submit(fill, cascade::write(used), 9.0, n, Launch{.on = 1, .threads = {n}});
            (void)used.to_vector();  // its host copy now holds 9s
        }
        devs.wait_all();
        // The runtime frees dropped Data on its own thread: give it the time to pool it.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        Data<double> out(devs, n);  // may get the host memory `used` had
        devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(out), n,
                    Launch{.on = round % 2 ? 0 : 1, .threads = {n}});
        for (double v : out.to_vector())
            ASSERT_EQ(v, 0.0) << "round " << round;
    }
}

TEST(DeviceTasks, AWorkerWaitingForADeviceTaskRunsOtherTasks) {
    // One worker: the task it waits for runs on that same worker (cpu device) or on a sim
    // device, and the wait must not block it.
    Threadpool tp(1);
    Devices devs(tp, {.sim = 1});
    const int n = 256;
    Data<double> x(devs, n), y(devs, n);
    std::atomic<int> done{0};
    for (int d = 0; d < devs.size(); ++d)
        tp.insert([&, d] {
            devs.submit(fill, cascade::write(x), 1.0, n, Launch{.on = d, .threads = {n}});
            devs.submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n,
                        Launch{.on = d, .threads = {n}})
                .get();
            done.fetch_add(1);
        });
    tp.join();
    EXPECT_EQ(done.load(), devs.size());
    for (double v : y.to_vector())
        EXPECT_EQ(v, 4.0);
}

// join() does not return while a device task is in flight: a 200 ms kernel on a sim device
// (its own thread, not a worker) submitted by the main thread, and the pool task its end
// queues, are both done when it returns.
TEST(DeviceTasks, JoinWaitsForDeviceTasksInFlight) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Data<int> p(devs, 1, "p");
    std::atomic<bool> continued{false};
    auto t = devs.submit(stamp_kernel(), cascade::write(p), 200, Launch{.on = 1});
    auto after = t.on_done([&](std::exception_ptr) { continued = true; });
    tp.join();
    EXPECT_TRUE(t.ready());
    EXPECT_TRUE(after.ready());
    EXPECT_TRUE(continued.load());
}

TEST(DeviceTasks, OnDoneSeesSuccessAndFailure) {
    Threadpool tp(2);
    Devices devs(tp, {.sim = 1});
    Data<double> x(devs, 8, "x");
    std::exception_ptr seen_ok = std::make_exception_ptr(1), seen_bad;
    auto ok = devs.submit(fill, cascade::write(x), 1.0, 8, Launch{.threads = {8}});
    auto bad = devs.submit(throwing_kernel(), cascade::readwrite(x), Launch{.on = 1});
    auto a = ok.on_done([&](std::exception_ptr e) { seen_ok = e; });
    auto b = bad.on_done([&](std::exception_ptr e) { seen_bad = e; });
    a.get();
    b.get();  // on_done itself succeeds
    EXPECT_EQ(seen_ok, nullptr);
    ASSERT_NE(seen_bad, nullptr);
    EXPECT_THROW(std::rethrow_exception(seen_bad), std::domain_error);
}

TEST(DeviceTasks, SecondsIsTheKernelsRunTime) {
    // A sim device that sleeps the modelled 5 ms: seconds() is that long (the run, not the
    // wait behind the first task), 0 before the task finished and for a host continuation.
    Threadpool tp(1);
    cascade::DevicesOptions o{.cpu = false, .sim = 1};
    o.sim_options.run_kernels = false;
    Devices devs(tp, o);
    static cascade::Kernel nap("nap");
    static const bool ready = [] {
        nap.cpu([](cascade::KernelArgs&) {});
        nap.model([](const cascade::Threads&) { return 0.005; });
        return true;
    }();
    (void)ready;
    const auto t0 = std::chrono::steady_clock::now();
    auto first = devs.submit(nap);
    auto second = devs.submit(nap);
    EXPECT_EQ(second.seconds(), 0.0);
    auto after = second.then([] {});
    after.get();
    const double since =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    first.get();
    EXPECT_GE(second.seconds(), 0.004);
    // Its own 5 ms, not the time since submission (the first one's 5 ms at least before it).
    EXPECT_LT(second.seconds(), since - 0.004);
    EXPECT_GE(first.seconds(), 0.004);
    EXPECT_EQ(after.seconds(), 0.0);
}

TEST(DeviceTasks, ThreadsOutsideThePoolWaitOnOpenclEventsThemselves) {
    // Several threads outside the pool wait for OpenCL tasks at once (blocking on the task's
    // event and completing it themselves, or polling when that option is off), while the
    // runtime thread also polls; tasks waited for before they launched (behind a writer)
    // and a kernel that fails on every device reach their waiters with the right answers.
    for (const bool on_events : {true, false}) {
        Threadpool tp(1);
        std::unique_ptr<Devices> devs;
        try {
            devs = std::make_unique<Devices>(
                tp,
                cascade::DevicesOptions{.cpu = false, .opencl = 1, .wait_on_events = on_events});
        } catch (const UsageError&) {
            GTEST_SKIP() << "no OpenCL platform: install pocl-opencl-icd (Debian)";
        }
        const int n = 64, rounds = 200, waiters = 3;
        std::vector<std::unique_ptr<Data<double>>> ys;
        for (int w = 0; w < waiters; ++w)
            ys.push_back(std::make_unique<Data<double>>(*devs, n));
        Data<double> x(*devs, iota(n), "x");
        std::vector<std::thread> threads;
        std::atomic<int> wrong{0};
        for (int w = 0; w < waiters; ++w)
            threads.emplace_back([&, w] {
                Data<double>& y = *ys[static_cast<std::size_t>(w)];
                const Launch l{.threads = {std::size_t(n)}};
                for (int r = 0; r < rounds; ++r) {
                    auto f = devs->submit(fill, cascade::write(y), 1.0, n, l);
                    // Waited for while the fill may still run: launched after it.
                    devs->submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n, l).get();
                    if (r % 50 == 0) f.get();
                }
                auto v = y.to_vector();
                for (int i = 0; i < n; ++i)
                    if (v[static_cast<std::size_t>(i)] != 1.0 + 2.0 * i) wrong.fetch_add(1);
            });
        for (auto& t : threads)
            t.join();
        EXPECT_EQ(wrong.load(), 0) << "wait_on_events = " << on_events;
        cascade::Kernel bad("bad_call");
        bad.opencl([](cascade::OpenclCall&) { throw std::domain_error("no launch"); });
        EXPECT_THROW(devs->submit(bad, cascade::read(x), Launch{.threads = {1}}).get(),
                     std::domain_error);
        devs->wait_all();
    }
}

TEST(DeviceTasks, SimEnginesCompleteWhatTheyFinish) {
    // With complete_on_backend a sim engine's thread completes the copies and kernels it
    // finished (the runtime's step on its thread); off, the runtime thread does. Either way
    // a chain of dependent kernels, host reads between them and a failing kernel give the
    // same answers; only the first counts steps run by the engines.
    for (const bool on : {true, false}) {
        Threadpool tp(1);
        Devices devs(tp,
                     cascade::DevicesOptions{.cpu = false, .sim = 1, .complete_on_backend = on});
        const int n = 256, rounds = 50;
        Data<double> x(devs, iota(n), "x");
        Data<double> y(devs, n, "y");
        const Launch l{.threads = {std::size_t(n)}};
        devs.submit(fill, cascade::write(y), 1.0, n, l);
        for (int r = 0; r < rounds; ++r) {
            devs.submit(axpy, 1.0, cascade::read(x), cascade::readwrite(y), n, l);
            if (r % 10 == 9) {
                auto h = y.request(DataAccess::read);
                std::span<const double> v = h.get();
                EXPECT_EQ(v[3], 1.0 + (r + 1) * 3.0) << "complete_on_backend = " << on;
                y.release();
            }
        }
        EXPECT_EQ(y.to_vector()[7], 1.0 + rounds * 7.0) << "complete_on_backend = " << on;
        EXPECT_THROW(devs.submit(throwing_kernel(), cascade::read(x), Launch{.threads = {1}}).get(),
                     std::domain_error);
        devs.wait_all();
        if (on) {
            EXPECT_GT(devs.stats().backend_steps, 0u);
        } else {
            EXPECT_EQ(devs.stats().backend_steps, 0u);
        }
    }
}
