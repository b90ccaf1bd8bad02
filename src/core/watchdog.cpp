#include "cascade/core/detail/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/threadpool.hpp"

namespace cascade::detail {

double watchdog_limit_from_env() {
    static const double limit =
        settings::seconds("CASCADE_WATCHDOG", kDefaultWatchdogSeconds, settings::kMaxSeconds);
    return limit;
}

}  // namespace cascade::detail

namespace cascade {

// Threadpool::watchdog_fire, here with the rest of the watchdog: nothing ran and no message moved
// for the limit while join() waited. Print what this rank waits for and end the job (a stuck task
// may never return, so we cannot unwind).
void Threadpool::watchdog_fire(double quiet_seconds, double limit_seconds) {
    watchdog_report(quiet_seconds, limit_seconds);
    const std::string who = rank_prefix();
    // Give the other ranks (whose watchdogs fire about now) a moment to print theirs.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (hook_) hook_->abort_job(who + "watchdog: join() made no progress; see above");
    JoinHook::abort_job_default(who + "watchdog: join() made no progress; see above");
}

// What this rank waits for (also printed with the warning about a long task).
void Threadpool::watchdog_report(double quiet_seconds, double limit_seconds,
                                 const char* limit_name) {
    std::ostringstream os;
    const std::string who = rank_prefix();
    os << "cascade: watchdog: " << who << "Threadpool '" << opts_.name << "': join() saw no task "
       << "run and no message move for " << quiet_seconds << " s ("
       << (limit_name ? limit_name : "CASCADE_WATCHDOG") << (limit_name ? ": " : "=")
       << limit_seconds << (limit_name ? " s)\n" : ")\n");
    const std::uint64_t s = idle_state_.load();
    const int idle = static_cast<int>(static_cast<std::uint32_t>(s));
    os << "cascade: watchdog: " << who << "workers busy: " << (n_ - idle) << " of " << n_;
    if (idle < n_) os << " (a task that does not return, e.g. waiting for something?)";
    os << "; ready tasks queued: ";
    std::size_t queued = 0;
    for (int w = 0; w < n_; ++w)
        queued += queues_[w].size();
    os << queued;
    if (const long ext = external_.load(); ext != 0)
        os << "; work running outside the workers (device tasks in flight): " << ext;
    os << "\n";
    // A task that failed: join() rethrows its error once the rest ends, which it may never do
    // when the failure left work behind (a request never released, a promise never fulfilled).
    if (std::exception_ptr err = error_.peek()) {
        os << "cascade: watchdog: " << who << "a task failed (join() rethrows it at its end): ";
        try {
            std::rethrow_exception(err);
        } catch (const std::exception& e) {
            os << e.what();
        } catch (...) {
            os << "unknown exception";
        }
        os << "\n";
    }
    std::vector<std::string> names;
    const std::size_t total = taskflows_.pending(names);
    os << "cascade: watchdog: " << who << total << " task(s) waiting for promises";
    if (!names.empty()) os << "; first " << names.size() << ": ";
    for (std::size_t i = 0; i < names.size(); ++i)
        os << (i ? ", " : "") << names[i];
    os << "\n";
    if (hook_) {
        const std::string state = hook_->describe_state();
        if (!state.empty()) os << "cascade: watchdog: " << who << state << "\n";
    }
    const std::string report = os.str();
    std::fputs(report.c_str(), stderr);
    std::fflush(stderr);
}

}  // namespace cascade
