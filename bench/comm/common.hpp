// Shared pieces of the communication benchmarks: clocks, statistics, a tiny command line,
// one-line JSON records (rank 0 prints, the runner collects), and a spin loop without clock
// calls (calibrated on the thread CPU clock) for the distributed dependency benchmark.
#pragma once

#include <mpi.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/record.hpp"
#include "common/spin.hpp"
#include "common/stats.hpp"

namespace commbench {

using Clock = std::chrono::steady_clock;

inline double now_s() {
    return cascade_bench::now_seconds();
}

inline double thread_cpu_s() {
    return cascade_bench::thread_cpu_seconds();
}

inline double process_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Voluntary context switches of the calling thread (each nap of the joining thread in
// Threadpool::join is one when it actually sleeps) and its CPU seconds.
struct ThreadUsage {
    long nvcsw = 0, nivcsw = 0;
    double cpu = 0;
    static ThreadUsage now() {
        rusage ru{};
        getrusage(RUSAGE_THREAD, &ru);
        return {ru.ru_nvcsw, ru.ru_nivcsw,
                static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec)};
    }
    ThreadUsage operator-(const ThreadUsage& o) const {
        return {nvcsw - o.nvcsw, nivcsw - o.nivcsw, cpu - o.cpu};
    }
};

using cascade_bench::median;
using cascade_bench::quantile;
using cascade_bench::Record;
using cascade_bench::vmax;
using cascade_bench::vmin;

// --key value pairs; every key must be known to the program (checked by get*).
class Args {
  public:
    Args(int argc, char** argv) {
        for (int i = 1; i < argc; ++i) {
            std::string k = argv[i];
            if (k.rfind("--", 0) != 0 || i + 1 >= argc)
                throw std::runtime_error("expected --key value, got '" + k + "'");
            kv_[k.substr(2)] = argv[++i];
        }
    }
    std::string str(const std::string& k, const std::string& def) {
        used_.push_back(k);
        auto it = kv_.find(k);
        return it == kv_.end() ? def : it->second;
    }
    long num(const std::string& k, long def) {
        const std::string s = str(k, "");
        return s.empty() ? def : std::stol(s);
    }
    double real(const std::string& k, double def) {
        const std::string s = str(k, "");
        return s.empty() ? def : std::stod(s);
    }
    std::vector<long> list(const std::string& k, const std::vector<long>& def) {
        const std::string s = str(k, "");
        if (s.empty()) return def;
        std::vector<long> out;
        std::stringstream ss(s);
        std::string item;
        while (std::getline(ss, item, ','))
            out.push_back(std::stol(item));
        return out;
    }
    std::vector<std::string> words(const std::string& k, const std::string& def) {
        std::vector<std::string> out;
        std::stringstream ss(str(k, def));
        std::string item;
        while (std::getline(ss, item, ','))
            out.push_back(item);
        return out;
    }
    // Throws on keys no get* asked for (typos).
    void check() const {
        for (auto& [k, v] : kv_)
            if (std::find(used_.begin(), used_.end(), k) == used_.end())
                throw std::runtime_error("unknown option --" + k);
    }

  private:
    std::map<std::string, std::string> kv_;
    std::vector<std::string> used_;
};

inline double allreduce(double x, MPI_Op op) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return y;
}

using cascade_bench::spin;

// Loop iterations per microsecond on this thread: median of `trials` trials of ~`ms` ms
// each, timed with the thread CPU clock (time lost to other processes does not count).
inline double spin_rate(double ms = 2.0, int trials = 21) {
    std::uint64_t iters = 1 << 12;
    for (;;) {
        const double t0 = thread_cpu_s();
        spin(iters);
        if (thread_cpu_s() - t0 >= ms * 1e-3) break;
        iters *= 2;
    }
    std::vector<double> t;
    for (int r = 0; r < trials; ++r) {
        const double t0 = thread_cpu_s();
        spin(iters);
        t.push_back(thread_cpu_s() - t0);
    }
    return static_cast<double>(iters) / (median(t) * 1e6);
}

// Runs main_body, turning exceptions into a message and MPI_Abort.
template <class F>
int guarded_main(int argc, char** argv, const char* prog, F&& body) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rc = 0;
    try {
        Args a(argc, argv);
        rc = body(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", prog, e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return rc;
}

}  // namespace commbench
