// Mobile objects with Data<T> members (<cascade/objects/device.hpp>), at 1-4 ranks with a
// simulated device whose copies are slow. Each rank makes three objects whose Data is, after
// each request, fresh on the device only (host copy stale), on the host only, or valid on both;
// every rank sends requests to every object while the objects migrate (explicitly, and under
// CASCADE_BALANCE=rotate when the test runs with it). Each handler leaves device work in flight
// on the Data, which a migration waits for. The checks: every request ran, in the order each
// rank issued it; the values after the last arrival and after one more device task; every
// object lives on exactly one rank after join(). An object moved by a handler that ran on the
// communication thread, while a device task on its Data waits for a message only that thread
// can receive, leaves from a worker (no deadlock); a short handler that waits on device work is
// never run on the communication thread. Misuse gives clear errors (one process).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/comm/detail/leaving.hpp"
#include "cascade/device/devices.hpp"
#include "cascade/objects/device.hpp"
#include "sim_fixture.hpp"

using cascade::Communicator;
using cascade::Data;
using cascade::DeviceKind;
using cascade::Devices;
using cascade::Launch;
using cascade::mobile_ptr;
using cascade::ObjectKey;
using cascade::Objects;
using cascade::Threadpool;
using cascade::UsageError;

namespace {

using device_test::add_to;
using device_test::sum_of;

// y += a * g[0]: a task on y that also reads g, so it waits while the host holds g.
CASCADE_KERNEL(add_scaled,
               (kernel_global const double* g, kernel_global double* y, double a, int n), {
                   int i = kernel_global_id_x;
                   if (i < n) y[i] += a * g[0];
               });

// Slow copies (10 ms each, low bandwidth): transfers and kernels are long in flight when a
// migration starts.
cascade::DevicesOptions slow_sim() {
    return device_test::slow_sim(0.01);
}

constexpr std::size_t kLen = 20000;  // 160 KB: the migration message is a large one

// kind 0: fresh on the device, host copy stale; 1: host only; 2: both valid.
struct Cell {
    Data<double> u;
    Data<double> sum;  // kind 2: written on the device; empty for the others
    int kind = 0;
    std::vector<std::int64_t> last;  // the last step of each rank that ran here
    std::int64_t steps = 0, out_of_order = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(u, sum, kind, last, steps, out_of_order);
    }
};

Devices* g_devs = nullptr;
int g_sim = -1;

// Adds 1 to every element of c.u in the way of its kind.
void step(Cell& c) {
    if (c.kind == 0) {
        g_devs->submit(add_to, cascade::readwrite(c.u), 1.0, int(kLen),
                       Launch{.on = g_sim, .threads = {kLen}});
        return;
    }
    auto h = c.u.request(cascade::DataAccess::readwrite);
    for (double& x : h.get())
        x += 1;
    c.u.release();
    if (c.kind == 2)
        g_devs->submit(sum_of, cascade::read(c.u), cascade::write(c.sum), int(kLen),
                       Launch{.on = g_sim, .threads = {1}});
}

}  // namespace

TEST(ObjectsDevice, DataMembersMigrateInEveryStateInOrder) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    g_devs = &devs;
    g_sim = devs.find(DeviceKind::sim);
    ASSERT_GE(g_sim, 0);
    cascade::set_object_devices(&devs);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    auto run = objs.make_handler<Cell>(
        [](Cell& c, int& from, std::int64_t& k) {
            if (c.last.size() <= std::size_t(from)) c.last.resize(std::size_t(from) + 1, -1);
            if (k != c.last[std::size_t(from)] + 1) ++c.out_of_order;
            c.last[std::size_t(from)] = k;
            ++c.steps;
            step(c);
        },
        {.name = "step"});
    // The values of c.u after join(): element i is i + steps, on the rank the object is on.
    auto check = objs.make_handler<Cell>(
        [](Cell& c) -> std::vector<std::int64_t> {
            std::int64_t wrong = 0;
            const std::vector<double> v = c.u.to_vector();
            for (std::size_t i = 0; i < v.size(); ++i)
                if (v[i] != double(i) + double(c.steps)) ++wrong;
            if (c.kind == 2) {
                double want = 0;
                for (std::size_t i = 0; i < kLen; ++i)
                    want += double(i) + double(c.steps);
                if (c.sum.to_vector()[0] != want) ++wrong;
            }
            return {c.steps, c.out_of_order, wrong, std::int64_t(v.size())};
        },
        {.name = "check"});
    // One more device task on the arrived Data: it is copied to the device as usual.
    auto more = objs.make_handler<Cell>(
        [](Cell& c) {
            g_devs->submit(add_to, cascade::readwrite(c.u), 1.0, int(kLen),
                           Launch{.on = g_sim, .threads = {kLen}});
            if (c.kind == 2)
                g_devs->submit(sum_of, cascade::read(c.u), cascade::write(c.sum), int(kLen),
                               Launch{.on = g_sim, .threads = {1}});
            ++c.steps;
        },
        {.name = "more"});

    std::vector<double> init(kLen);
    for (std::size_t i = 0; i < kLen; ++i)
        init[i] = double(i);
    for (int kind = 0; kind < 3; ++kind) {
        Cell c;
        c.kind = kind;
        // Kind 0's steps leave its freshest copy on the device.
        c.u = Data<double>(devs, std::span<const double>(init), "u" + std::to_string(kind));
        if (kind == 2) c.sum = Data<double>(devs, 1, "sum");
        objs.create<Cell>(std::move(c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Objects of rank r are r:1, r:2, r:3 (ids in creation order).
    std::vector<mobile_ptr<Cell>> all;
    for (int r = 0; r < n; ++r)
        for (std::uint64_t id = 1; id <= 3; ++id)
            all.emplace_back(ObjectKey{r, 0, id});
    const int rounds = 6;
    for (int k = 0; k < rounds; ++k)
        for (std::size_t j = 0; j < all.size(); ++j) {
            run->invoke(all[j], me, std::int64_t(k));
            // Each rank moves its own objects on, between its requests.
            if (all[j].key().home == me && n > 1) objs.migrate(all[j], (me + k + 1) % n);
        }
    tp.join();
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        for (auto& p : all) {
            auto r = check->call(p).get();
            EXPECT_EQ(r[0], std::int64_t(rounds) * n) << cascade::to_string(p.key());
            EXPECT_EQ(r[1], 0) << "requests out of order on " << cascade::to_string(p.key());
            EXPECT_EQ(r[2], 0) << "wrong values on " << cascade::to_string(p.key());
            EXPECT_EQ(r[3], std::int64_t(kLen));
            more->invoke(p);
        }
    }
    tp.join();
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0)
        for (auto& p : all) {
            auto r = check->call(p).get();
            EXPECT_EQ(r[0], std::int64_t(rounds) * n + 1);
            EXPECT_EQ(r[2], 0) << "wrong values after a later device task on "
                               << cascade::to_string(p.key());
        }
    tp.join();
    // Every object lives on exactly one rank.
    long here = 0;
    for (auto& p : all)
        here += objs.is_local(p) ? 1 : 0;
    long total = 0;
    MPI_Allreduce(&here, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(total, long(all.size()));
    MPI_Barrier(MPI_COMM_WORLD);
    cascade::set_object_devices(nullptr);
}

// Ends the process if the test is still running after `seconds` (a deadlock fails the test
// with a message instead of running into the CTest timeout).
class Deadline {
  public:
    Deadline(double seconds, const char* what)
        : t_([this, seconds, what] {
              std::unique_lock<std::mutex> g(mu_);
              if (!cv_.wait_for(g, std::chrono::duration<double>(seconds), [&] { return done_; })) {
                  std::fprintf(stderr, "deadline: %s after %.0f s\n", what, seconds);
                  std::fflush(stderr);
                  std::abort();
              }
          }) {}
    ~Deadline() {
        {
            std::lock_guard<std::mutex> g(mu_);
            done_ = true;
        }
        cv_.notify_one();
        t_.join();
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread t_;
};

Data<double>* g_gate = nullptr;

// A handler that runs on the communication thread (run_in_handler) submits a device task on
// its object's Data and moves the object as it ends. That task waits for a Data the host holds
// until a message reaches this rank: the migration must not wait for the task on the
// communication thread, which alone can receive that message.
TEST(ObjectsDevice, MigrationAtTheEndOfACommThreadHandlerDoesNotWaitThere) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    g_devs = &devs;
    g_sim = devs.find(DeviceKind::sim);
    ASSERT_GE(g_sim, 0);
    cascade::set_object_devices(&devs);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    if (n < 2) {
        cascade::set_object_devices(nullptr);
        GTEST_SKIP() << "needs two ranks";
    }
    Data<double> gate(devs, 1, "gate");
    g_gate = &gate;
    const mobile_ptr<Cell> p(ObjectKey{0, 0, 1});  // rank 0's first object
    // Rank 0: the device task may run now (the host gives the gate back).
    auto open = comm.make_active_msg([](int&) { g_gate->release(); }, "open");
    // Rank 1: rank 0's handler has ended; answer with `open`.
    auto ping = comm.make_active_msg([&](int& from) { open->send(from, me); }, "ping");
    auto move = objs.make_handler<Cell>(
        [&](Cell& c, int& dest) {
            g_devs->submit(add_scaled, cascade::read(gate), cascade::readwrite(c.u), 1.0, int(kLen),
                           Launch{.on = g_sim, .threads = {kLen}});
            ++c.steps;
            ping->send(dest, objs.rank());
            objs.migrate(p, dest);
        },
        {.name = "move", .run_in_handler = true});
    auto check = objs.make_handler<Cell>(
        [](Cell& c) -> std::vector<std::int64_t> {
            std::int64_t wrong = 0;
            const std::vector<double> v = c.u.to_vector();
            for (std::size_t i = 0; i < v.size(); ++i)
                if (v[i] != double(i) + double(c.steps)) ++wrong;
            return {c.steps, wrong};
        },
        {.name = "check"});
    if (me == 0) {
        std::vector<double> init(kLen);
        for (std::size_t i = 0; i < kLen; ++i)
            init[i] = double(i);
        Cell c;
        c.u = Data<double>(devs, std::span<const double>(init), "u");
        ASSERT_EQ(objs.create<Cell>(std::move(c)).key(), p.key());
        objs.pin(p);  // a balancing policy leaves it where it is
        // The host holds the gate until rank 1 answers.
        auto h = gate.request(cascade::DataAccess::write);
        h.get()[0] = 1.0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    {
        const Deadline deadline(60,
                                "the migration waited for device data on the "
                                "communication thread");
        if (me == 1) move->invoke(p, 1);
        tp.join();
    }
    EXPECT_EQ(objs.is_local(p), me == 1);
    std::uint64_t moved = objs.stats().moved_by_handler, all = 0;
    MPI_Allreduce(&moved, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all, 1u) << "the object was not moved by its handler as it ended";
    if (me == 1) {
        auto r = check->call(p).get();
        EXPECT_EQ(r[0], 1);
        EXPECT_EQ(r[1], 0) << "wrong values after the migration";
    }
    tp.join();
    MPI_Barrier(MPI_COMM_WORLD);
    g_gate = nullptr;
    cascade::set_object_devices(nullptr);
}

// A short handler that waits on device work (here a task long finished) is never run on the
// communication thread on its own, as a short handler that does not wait may be: its next wait
// could hold up the messages that the device work waits for.
TEST(ObjectsDevice, HandlerThatWaitsOnDeviceWorkStaysOffTheCommThread) {
    Communicator comm;
    Threadpool tp(2, &comm);
    Devices devs(tp, slow_sim());
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    if (n < 2) GTEST_SKIP() << "needs two ranks";
    Data<double> x(devs, 1, "x");
    const cascade::DeviceTask done = devs.submit(add_to, cascade::readwrite(x), 1.0, 1,
                                                 Launch{.on = devs.find(DeviceKind::sim)});
    done.wait();
    auto tiny = objs.make_handler<Cell>([](Cell& c) { ++c.steps; }, {.name = "tiny"});
    auto waits = objs.make_handler<Cell>(
        [&done](Cell& c) {
            done.wait();
            ++c.steps;
        },
        {.name = "waits"});
    const mobile_ptr<Cell> p(ObjectKey{0, 0, 1});
    if (me == 0) {
        ASSERT_EQ(objs.create<Cell>().key(), p.key());
        objs.pin(p);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Rank 1 calls, one at a time, while rank 0's pool is idle.
    std::uint64_t here[2] = {0, 0};
    for (int phase = 0; phase < 2; ++phase) {
        if (me == 1)
            for (int i = 0; i < 40; ++i)
                (phase == 0 ? tiny : waits)->call(p).get();
        tp.join();
        here[phase] = objs.stats().on_comm_thread;
    }
    std::uint64_t counts[2] = {here[0], here[1] - here[0]};
    MPI_Bcast(counts, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (counts[0] == 0) GTEST_SKIP() << "no short handler ran on the communication thread";
    EXPECT_EQ(counts[1], 0u) << "a handler that waits on device work ran there";
}

// A Data member written outside a migration (as a message argument) is a UsageError; so is an
// object with a Data member arriving on a rank without Devices for it.
TEST(ObjectsDevice, MisuseGivesClearErrors) {
    Threadpool tp(1);
    Devices devs(tp, slow_sim());
    std::vector<double> init{1, 2, 3};
    Cell c;
    c.u = Data<double>(devs, std::span<const double>(init), "u");
    std::vector<char> buf(cascade::wire::size_of(c) + 64);
    try {
        cascade::wire::Writer w(buf.data());
        w.put(c);
        FAIL() << "a Data written outside a migration";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("DataActiveMsg"), std::string::npos) << e.what();
    }
    // As a migration packs it: the leaving step, then the writer.
    char* end = nullptr;
    {
        cascade::detail::AfterPacking after;
        cascade::detail::LeaveArchive leave(after.fs);
        leave.visit(c);
        cascade::wire::Writer w(buf.data());
        w.put(c);
        end = w.position();
    }
    EXPECT_EQ(c.u.to_vector(), init);  // the access was given back
    cascade::set_object_devices(nullptr);
    try {
        cascade::wire::Reader r(buf.data(), std::size_t(end - buf.data()));
        (void)r.get<Cell>();
        FAIL() << "a Data arrived on a rank without Devices";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("set_object_devices"), std::string::npos) << e.what();
    }
    cascade::set_object_devices(&devs);
    cascade::wire::Reader r(buf.data(), std::size_t(end - buf.data()));
    Cell back = r.get<Cell>();
    EXPECT_EQ(back.u.to_vector(), init);
    EXPECT_EQ(back.u.name(), "u");
    EXPECT_FALSE(back.sum.valid());
    cascade::set_object_devices(nullptr);
}
