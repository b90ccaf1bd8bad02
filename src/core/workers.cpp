#include "cascade/core/workers.hpp"

#include <algorithm>
#include <thread>

#include "cascade/core/settings.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace cascade {

std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
#endif
    if (cpus.empty())
        for (int c = 0; c < node_cpus(); ++c)
            cpus.push_back(c);
    return cpus;
}

int node_cpus() noexcept {
#if defined(__linux__)
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 0) return static_cast<int>(n);
#endif
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int default_workers(int local_ranks) {
    if (auto n = settings::raw("CASCADE_WORKERS"))
        return static_cast<int>(settings::parse_count("CASCADE_WORKERS", *n, 1, 4096));
    const int mask = static_cast<int>(allowed_cpus().size());
    local_ranks = std::max(1, local_ranks);
    // A mask narrower than the node was set by a binding: it is this rank's share already.
    if (mask < node_cpus()) return std::max(1, mask);
    return std::max(1, mask / local_ranks);
}

int pin_offset(int mask_cpus, int node_cpus, int node_rank, int workers) noexcept {
    if (mask_cpus < 1 || mask_cpus < node_cpus || node_rank < 1 || workers < 1) return 0;
    return static_cast<int>((static_cast<long long>(node_rank) * workers) % mask_cpus);
}

bool pin_this_thread(const std::vector<int>& cpus, int i) noexcept {
#if defined(__linux__)
    if (cpus.empty() || i < 0) return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[static_cast<std::size_t>(i) % cpus.size()], &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
#else
    (void)cpus;
    (void)i;
    return false;
#endif
}

}  // namespace cascade
