// Shared pieces of the overhead micro-benchmarks (TaskTorrent paper, section III-A): a spin
// loop that does not read the clock, its calibration, a monitor of CPU load from other
// processes, the repeat policy, the command line, and the JSON record.
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/record.hpp"
#include "common/spin.hpp"
#include "common/stats.hpp"

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

using cascade_bench::spin;
using cascade_bench::thread_cpu_seconds;

// Loop iterations per microsecond on one thread. Trials are timed with this thread's CPU
// clock, so time spent descheduled (other processes on a busy machine) does not count; the
// median of many short trials is kept.
using cascade_bench::median;
inline double calibrate_iters_per_us() {
    std::uint64_t iters = 1 << 12;
    for (;;) {  // grow until one trial takes >= 2 ms
        const double t0 = thread_cpu_seconds();
        spin(iters);
        if (thread_cpu_seconds() - t0 >= 0.002) break;
        iters *= 2;
    }
    std::vector<double> trials;
    for (int r = 0; r < 51; ++r) {
        const double t0 = thread_cpu_seconds();
        spin(iters);
        trials.push_back(thread_cpu_seconds() - t0);
    }
    return static_cast<double>(iters) / (median(trials) * 1e6);
}

// CPU used by other processes while we measure, in CPUs (0 .. number of cores): busy time of
// the whole machine (/proc/stat) minus this process's own CPU time (getrusage).
class LoadMonitor {
  public:
    void begin() {
        busy0_ = machine_busy_seconds();
        self0_ = self_cpu_seconds();
        t0_ = Clock::now();
    }
    double end() const {
        const double wall = seconds_since(t0_);
        const double foreign = (machine_busy_seconds() - busy0_) - (self_cpu_seconds() - self0_);
        return wall > 0 ? std::max(0.0, foreign / wall) : 0.0;
    }

    static double self_cpu_seconds() {
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    }
    static double machine_busy_seconds() {
        FILE* f = std::fopen("/proc/stat", "r");
        if (!f) return 0;
        unsigned long long v[8] = {};
        const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                                    &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        std::fclose(f);
        if (got < 4) return 0;
        // user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
        const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }

  private:
    double busy0_ = 0, self0_ = 0;
    Clock::time_point t0_{};
};

// Wall time and this process's CPU time (all threads) of a timed region.
struct Timed {
    double wall = 0;
    double cpu = 0;
    double rate = 0;  // spin loop iterations per us around this repeat (set by measure)
};

class Stopwatch {
  public:
    Stopwatch() : c0_(LoadMonitor::self_cpu_seconds()), t0_(Clock::now()) {}
    Timed stop() const {
        const double wall = seconds_since(t0_);
        return {wall, LoadMonitor::self_cpu_seconds() - c0_};
    }

  private:
    double c0_;
    Clock::time_point t0_;
};

// One measurement configuration, from the command line:
//   --bench nodeps|deps|raw|idle --threads T --spin S(us) --deps E
//   --n N (nodeps, raw: tasks; deps: columns) --insertion timed|untimed|bulk
//   --repeats R: repeats kept for the median (those with little foreign load)
//   --max-attempts A: stop repeating after A runs even if fewer than R were clean
//   --iters-per-us X (0 or absent: calibrate here) --calibrate-only
struct Config {
    std::string bench = "nodeps";
    int threads = 1;
    double spin_us = 0;
    int deps = 0;
    long n = 1000;
    std::string insertion = "timed";
    int repeats = 5;
    int max_attempts = 0;       // 0: 2 * repeats
    double max_foreign = 0.15;  // CPUs of foreign load above which a repeat is not clean
    double iters_per_us = 0;
    bool calibrate_only = false;
};

inline Config parse_args(int argc, char** argv) {
    Config c;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
            return argv[++i];
        };
        if (a == "--bench")
            c.bench = value();
        else if (a == "--threads")
            c.threads = std::stoi(value());
        else if (a == "--spin")
            c.spin_us = std::stod(value());
        else if (a == "--deps")
            c.deps = std::stoi(value());
        else if (a == "--n")
            c.n = std::stol(value());
        else if (a == "--insertion")
            c.insertion = value();
        else if (a == "--repeats")
            c.repeats = std::stoi(value());
        else if (a == "--max-attempts")
            c.max_attempts = std::stoi(value());
        else if (a == "--max-foreign")
            c.max_foreign = std::stod(value());
        else if (a == "--iters-per-us")
            c.iters_per_us = std::stod(value());
        else if (a == "--calibrate-only")
            c.calibrate_only = true;
        else
            throw std::runtime_error("unknown argument " + a);
    }
    if (c.bench != "nodeps" && c.bench != "deps" && c.bench != "raw" && c.bench != "idle")
        throw std::runtime_error("--bench must be nodeps, deps, raw or idle");
    if (c.insertion != "timed" && c.insertion != "untimed" && c.insertion != "bulk")
        throw std::runtime_error("--insertion must be timed, untimed or bulk");
    if (c.threads < 1 || c.n < 1 || c.repeats < 1 || c.spin_us < 0)
        throw std::runtime_error("--threads, --n, --repeats must be >= 1, --spin >= 0");
    if (c.bench == "deps" && (c.deps < 1 || c.deps > 32))
        throw std::runtime_error("--deps must be in [1, 32] for the deps benchmark");
    if (c.bench != "deps") c.deps = 0;
    if (c.max_attempts < c.repeats) c.max_attempts = 2 * c.repeats;
    if (c.iters_per_us <= 0) c.iters_per_us = calibrate_iters_per_us();
    return c;
}

// The answer to --calibrate-only.
inline void print_calibration(const Config& c) {
    cascade_bench::Record().add("calibration", true).add("iters_per_us", c.iters_per_us).print();
}

inline std::uint64_t spin_iters(const Config& c) {
    return static_cast<std::uint64_t>(c.iters_per_us * c.spin_us + 0.5);
}

// Number of tasks a configuration runs (deps: 32 rows times n columns).
constexpr int kRows = 32;
inline long n_tasks(const Config& c) {
    return c.bench == "deps" ? kRows * c.n : c.n;
}

// The spin rate now (iterations per us on this thread), from a few 1 ms trials timed with
// the thread CPU clock. The host's clock speed drifts by a few percent over minutes; checking
// it around every repeat keeps the "spin" of the efficiency formula honest.
inline double spin_rate_now(double iters_per_us) {
    const auto iters = static_cast<std::uint64_t>(iters_per_us * 1000);
    std::vector<double> trials;
    for (int r = 0; r < 9; ++r) {
        const double t0 = thread_cpu_seconds();
        spin(iters);
        trials.push_back(thread_cpu_seconds() - t0);
    }
    return static_cast<double>(iters) / (median(trials) * 1e6);
}

struct Samples {
    std::vector<Timed> clean;     // repeats with foreign load <= max_foreign
    std::vector<Timed> all;       // every repeat
    std::vector<double> foreign;  // foreign load of every repeat (CPUs)
};

// Runs `once` (which returns the wall and CPU time of its timed region) until `repeats`
// clean runs were seen or `max_attempts` runs were made. Each repeat's spin rate is the
// mean of the rates measured just before and just after it.
template <class F>
Samples measure(const Config& c, F&& once) {
    Samples s;
    const bool track_rate = c.spin_us > 0;
    double rate_before = track_rate ? spin_rate_now(c.iters_per_us) : c.iters_per_us;
    for (int a = 0; a < c.max_attempts && static_cast<int>(s.clean.size()) < c.repeats; ++a) {
        LoadMonitor mon;
        mon.begin();
        Timed t = once();
        const double foreign = mon.end();
        const double rate_after = track_rate ? spin_rate_now(c.iters_per_us) : c.iters_per_us;
        t.rate = 0.5 * (rate_before + rate_after);
        rate_before = rate_after;
        s.all.push_back(t);
        s.foreign.push_back(foreign);
        if (foreign <= c.max_foreign) s.clean.push_back(t);
    }
    return s;
}

// One measurement as a JSON record, from the clean repeats when there are
// at least 3 of them, else from all repeats ("noisy": true):
//   seconds: median wall time of the timed region;
//   efficiency, overhead_ns: medians over the repeats, each using the spin time measured
//     around that repeat (spin_us_actual is their median); *_nominal use spin_us instead;
//   *_best: the repeat with the highest efficiency (the lowest overhead);
//   cpu_efficiency, cpu_overhead_ns: process CPU time in place of T x wall: what the runtime
//     costs in CPU (idle threads that spin count, time lost to other processes does not).
// The caller may add fields of its own, then prints the record.
inline cascade_bench::Record result_record(const char* system, const Config& c, const Samples& s) {
    const bool noisy = s.clean.size() < 3;
    const std::vector<Timed>& times = noisy ? s.all : s.clean;
    const double n = static_cast<double>(n_tasks(c));
    const double T = c.threads;
    const double iters = static_cast<double>(spin_iters(c));
    // Thread-seconds of pure spinning in one repeat, at that repeat's spin rate.
    auto work = [&](const Timed& t) { return c.spin_us > 0 ? n * iters / t.rate * 1e-6 : 0.0; };
    std::vector<double> walls, effs, ovhs, cpu_effs, cpu_ovhs, spins, all_walls;
    for (const Timed& t : times) {
        walls.push_back(t.wall);
        effs.push_back(c.spin_us > 0 ? work(t) / (T * t.wall) : 0.0);
        ovhs.push_back((T * t.wall - work(t)) / n * 1e9);
        cpu_effs.push_back(c.spin_us > 0 ? work(t) / t.cpu : 0.0);
        cpu_ovhs.push_back((t.cpu - work(t)) / n * 1e9);
        spins.push_back(c.spin_us > 0 ? iters / t.rate : 0.0);
    }
    for (const Timed& t : s.all)
        all_walls.push_back(t.wall);
    const double wall = median(walls);
    const double nominal_work = n * c.spin_us * 1e-6;
    const double tmin = *std::min_element(all_walls.begin(), all_walls.end());
    const double tmax = *std::max_element(all_walls.begin(), all_walls.end());
    const std::size_t best =
        static_cast<std::size_t>(std::min_element(ovhs.begin(), ovhs.end()) - ovhs.begin());
    double cpu_seconds = 0;
    {
        std::vector<double> cpus;
        for (const Timed& t : times)
            cpus.push_back(t.cpu);
        cpu_seconds = median(cpus);
    }
    cascade_bench::Record r;
    r.add("bench", c.bench)
        .add("system", system)
        .add("threads", c.threads)
        .add("spin_us", c.spin_us)
        .add("deps", c.deps)
        .add("insertion", c.insertion)
        .add("n_tasks", n_tasks(c))
        .add("seconds", wall)
        .add("seconds_min", tmin)
        .add("seconds_max", tmax)
        .add("repeats", static_cast<int>(times.size()))
        .add("clean", static_cast<int>(s.clean.size()))
        .add("attempts", static_cast<int>(s.all.size()))
        .add("noisy", noisy)
        .add("foreign_cpus", median(s.foreign))
        .add("efficiency", median(effs))
        .add("overhead_ns", median(ovhs))
        .add("efficiency_best", effs[best])
        .add("overhead_ns_best", ovhs[best])
        .add("efficiency_nominal", c.spin_us > 0 ? nominal_work / (T * wall) : 0.0)
        .add("overhead_ns_nominal", (T * wall - nominal_work) / n * 1e9)
        .add("spin_us_actual", median(spins))
        .add("cpu_seconds", cpu_seconds)
        .add("cpu_efficiency", median(cpu_effs))
        .add("cpu_overhead_ns", median(cpu_ovhs))
        .add("iters_per_us", c.iters_per_us);
    return r;
}

}  // namespace bench
