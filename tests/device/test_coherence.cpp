// Coherence and memory: thousands of random tasks on random devices (with and without a memory
// cap that forces evictions) give the same data as the same sequence run on the host; a cap of
// a few tiles is respected with no more bytes moved than the schedule needs; a task whose data
// cannot fit fails with the sizes instead of waiting forever.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cascade/device/devices.hpp"

using cascade::Data;
using cascade::DataAccess;
using cascade::Devices;
using cascade::Launch;
using cascade::Threadpool;

namespace {

CASCADE_KERNEL(mix,
               (kernel_global const unsigned int* x, kernel_global unsigned int* y, unsigned int c,
                int n),
               {
                   int i = kernel_global_id_x;
                   if (i < n) y[i] = y[i] * 3u + x[i] + c;
               });
CASCADE_KERNEL(setv, (kernel_global unsigned int* y, unsigned int c, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = c + (unsigned int)i;
});
CASCADE_KERNEL(scale, (kernel_global double* y, double a, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = y[i] * a;
});
CASCADE_KERNEL(zero, (kernel_global double* y, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = 0.0;
});
CASCADE_KERNEL(add3,
               (kernel_global const double* a, kernel_global const double* b,
                kernel_global double* c, int n),
               {
                   int i = kernel_global_id_x;
                   if (i < n) c[i] += a[i] + b[i];
               });

cascade::SimOptions fast_sim() {
    cascade::SimOptions o;
    o.latency = 2e-6;
    o.launch_latency = 1e-6;
    return o;
}

// Runs `tasks` random operations on `arrays` arrays of n elements on the devices of `devs`,
// and the same on the host; compares.
void random_sequence(Devices& devs, int arrays, int n, int tasks, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::vector<unsigned>> host(static_cast<std::size_t>(arrays),
                                            std::vector<unsigned>(static_cast<std::size_t>(n)));
    std::vector<Data<unsigned>> data;
    for (int a = 0; a < arrays; ++a) {
        std::string name = "a";  // (not "a" + ...: GCC 12 warns wrongly about that)
        name += std::to_string(a);
        data.emplace_back(devs, n, name);
    }
    const auto un = static_cast<std::size_t>(n);
    for (int k = 0; k < tasks; ++k) {
        const auto op = rng() % 10;
        const auto i = static_cast<std::size_t>(rng() % static_cast<unsigned>(arrays));
        const auto j = static_cast<std::size_t>(rng() % static_cast<unsigned>(arrays));
        const unsigned c = rng() % 1000;
        const int dev = static_cast<int>(rng() % static_cast<unsigned>(devs.size()));
        const Launch l{.on = dev, .threads = {n}};
        if (op < 6) {
            if (i == j) continue;  // x and y distinct (one is read, the other written)
            devs.submit(mix, cascade::read(data[j]), cascade::readwrite(data[i]), c, n, l);
            for (std::size_t e = 0; e < un; ++e)
                host[i][e] = host[i][e] * 3u + host[j][e] + c;
        } else if (op < 8) {
            devs.submit(setv, cascade::write(data[i]), c, n, l);
            for (std::size_t e = 0; e < un; ++e)
                host[i][e] = c + static_cast<unsigned>(e);
        } else if (op < 9) {
            auto h = data[i].request(DataAccess::readwrite).get();
            for (std::size_t e = 0; e < un; ++e)
                h[e] += 7, host[i][e] += 7;
            data[i].release();
        } else {
            auto h = data[i].request(DataAccess::read).get();
            for (std::size_t e = 0; e < un; ++e)
                ASSERT_EQ(h[e], host[i][e]) << "task " << k;
            data[i].release();
        }
    }
    for (int a = 0; a < arrays; ++a)
        ASSERT_EQ(data[static_cast<std::size_t>(a)].to_vector(), host[static_cast<std::size_t>(a)])
            << "array " << a;
}

}  // namespace

TEST(DeviceCoherence, RandomTasksOnRandomDevicesMatchTheHost) {
    for (int sims = 1; sims <= 4; ++sims) {
        Threadpool tp(2);
        Devices devs(tp, {.sim = sims, .sim_options = fast_sim()});
        random_sequence(devs, 8, 97, 1500, 1234u + static_cast<unsigned>(sims));
    }
}

TEST(DeviceCoherence, RandomTasksUnderAMemoryCapMatchTheHost) {
    Threadpool tp(2);
    // Each device holds 3 of the 8 arrays: tasks keep evicting, some copies Modified.
    const int n = 256;
    Devices devs(tp, {.sim = 3, .sim_options = fast_sim(), .memory = 3 * n * sizeof(unsigned)});
    random_sequence(devs, 8, n, 3000, 99u);
    const auto st = devs.stats();
    std::uint64_t evictions = 0, write_backs = 0;
    for (const auto& d : st.devices) {
        evictions += d.evictions;
        write_backs += d.write_backs;
        EXPECT_LE(d.memory_peak, 3 * n * sizeof(unsigned));
    }
    EXPECT_GT(evictions, 100u);
    EXPECT_GT(write_backs, 10u);
}

TEST(DeviceCoherence, EvictionUnderACapMovesOnlyWhatTheScheduleNeeds) {
    Threadpool tp(2);
    const int tile = 8192;  // doubles: 64 KiB
    const std::size_t tile_bytes = tile * sizeof(double);
    Devices devs(tp, {.cpu = false, .sim = 1, .sim_options = fast_sim(), .memory = 4 * tile_bytes});
    std::vector<Data<double>> tiles;
    std::vector<double> ones(tile, 1.0);
    for (int t = 0; t < 16; ++t)
        tiles.emplace_back(devs, std::span<const double>(ones));
    // Three updates of each tile in turn: each tile comes in once and goes out once.
    for (int t = 0; t < 16; ++t)
        for (int r = 0; r < 3; ++r)
            devs.submit(scale, cascade::readwrite(tiles[static_cast<std::size_t>(t)]), 2.0, tile,
                        Launch{.threads = {tile}});
    for (auto& t : tiles)
        for (double v : t.to_vector())
            ASSERT_EQ(v, 8.0);
    const auto st = devs.stats();
    const std::uint64_t minimum = 2 * 16 * tile_bytes;
    EXPECT_EQ(st.bytes_in + st.bytes_out, minimum);
    EXPECT_LE(st.devices[0].write_backs, 16u);
    EXPECT_LE(st.devices[0].memory_peak, 4 * tile_bytes);
}

TEST(DeviceCoherence, EvictionKeepsDataThatAWaitingTaskReads) {
    // A, B, C fill a 3-tile cap (A least recently used). After g (on C), two tasks wait at once:
    // one needs room for D, the next reads A and needs room for E. Evicting A (the least recently
    // used) would bring it back at once; B goes instead, and only D and E come in.
    Threadpool tp(2);
    const int tile = 4096;
    const std::size_t tile_bytes = tile * sizeof(double);
    Devices devs(tp, {.cpu = false, .sim = 1, .sim_options = fast_sim(), .memory = 3 * tile_bytes});
    std::vector<double> ones(tile, 1.0);
    Data<double> a(devs, std::span<const double>(ones), "A"),
        b(devs, std::span<const double>(ones), "B"), c(devs, std::span<const double>(ones), "C"),
        d(devs, std::span<const double>(ones), "D"), e(devs, std::span<const double>(ones), "E");
    const Launch all{.threads = {tile}};
    for (Data<double>* x : {&a, &b, &c}) {
        devs.submit(scale, cascade::readwrite(*x), 2.0, tile, all);
        devs.wait_all();  // one at a time: A is the least recently used
    }
    const std::uint64_t in_before = devs.stats().bytes_in;
    // g holds the device long enough for both tasks to be waiting when it ends.
    cascade::Kernel hold("hold");
    hold.cpu(
        [](cascade::KernelArgs&) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
    auto g = devs.submit(hold, cascade::readwrite(c));
    auto t4 = devs.prepare(scale, cascade::readwrite(d), 2.0, tile, all);
    auto t5 =
        devs.prepare(add3, cascade::read(a), cascade::read(a), cascade::readwrite(e), tile, all);
    t4.after(g);
    t5.after(g);
    t4.submit();
    t5.submit();
    devs.wait_all();
    EXPECT_EQ(devs.stats().bytes_in - in_before, 2 * tile_bytes);
    for (double v : e.to_vector())
        ASSERT_EQ(v, 5.0);
}

TEST(DeviceCoherence, TasksNeedingTheWholeCapStillAllRun) {
    // Every task needs 3 of the 3 tiles' room: they must take turns, never livelock.
    Threadpool tp(2);
    const int tile = 4096;
    const std::size_t tile_bytes = tile * sizeof(double);
    Devices devs(tp, {.cpu = false, .sim = 2, .sim_options = fast_sim(), .memory = 3 * tile_bytes});
    std::vector<Data<double>> d;
    std::vector<double> ones(tile, 1.0);
    for (int t = 0; t < 9; ++t)
        d.emplace_back(devs, std::span<const double>(ones));
    std::mt19937 rng(5);
    int submitted = 0;
    for (int k = 0; k < 200; ++k) {
        const auto a = rng() % 9, b = (a + 1 + rng() % 8) % 9;
        const auto c = (b + 1 + rng() % 7) % 9;
        if (c == a || c == b) continue;
        devs.submit(add3, cascade::read(d[a]), cascade::read(d[b]), cascade::readwrite(d[c]), tile,
                    Launch{.threads = {tile}});
        ++submitted;
    }
    devs.wait_all();
    EXPECT_GT(submitted, 100);
    EXPECT_EQ(devs.stats().tasks, static_cast<std::uint64_t>(submitted));
}

TEST(DeviceCoherence, DataThatCannotFitFailsWithTheSizes) {
    Threadpool tp(1);
    const int n = 1000;
    Devices devs(tp, {.cpu = false, .sim = 1, .memory = n * sizeof(double)});
    Data<double> a(devs, n, "a"), b(devs, n, "b"), c(devs, n, "c");
    auto t = devs.submit(add3, cascade::read(a), cascade::read(b), cascade::readwrite(c), n,
                         Launch{.threads = {n}, .name = "too_big"});
    try {
        t.get();
        FAIL() << "no error";
    } catch (const std::exception& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("too_big"), std::string::npos) << m;
        EXPECT_NE(m.find("sim0"), std::string::npos) << m;
        EXPECT_NE(m.find("24000 bytes"), std::string::npos) << m;
        EXPECT_NE(m.find("8000 bytes"), std::string::npos) << m;
    }
    // A task reading c fails the same way; one that overwrites it runs.
    EXPECT_THROW(devs.submit(scale, cascade::readwrite(c), 2.0, n, Launch{.threads = {n}}).get(),
                 std::runtime_error);
    devs.submit(zero, cascade::write(c), n, Launch{.threads = {n}}).get();
    EXPECT_EQ(c.to_vector()[0], 0.0);
}
