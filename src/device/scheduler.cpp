// Where a task runs. A task asks for a device index, a kind, or any device; among the devices
// that fit and have a variant of its kernel, it goes where it is expected to finish first:
//   the device's backlog (expected seconds of the tasks admitted and waiting there)
//   + the transfers its data needs there (bytes not valid there / bandwidth + latency, twice
//     when staged through the host)
//   + the kernel's measured time on that device (a moving average; unmeasured there: its
//     mean over the devices where it was measured).
// Ties go to the device that already holds more of the task's data.
#include <limits>

#include "runtime.hpp"

namespace cascade::device::detail {

// The kernel's measured time on device d; unmeasured there: the mean of its times on the
// other devices (assume alike until measured), or 0 when measured nowhere.
double Runtime::expected_seconds(const Kernel& k, int d) const {
    const std::size_t base = static_cast<std::size_t>(k.id()) * slots.size();
    if (base + slots.size() > kernel_seconds.size()) return 0.0;
    const double own = kernel_seconds[base + static_cast<std::size_t>(d)];
    if (own >= 0) return own;
    double sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < slots.size(); ++i)
        if (kernel_seconds[base + i] >= 0) sum += kernel_seconds[base + i], ++n;
    return n ? sum / n : 0.0;
}

void Runtime::record_seconds(const Kernel& k, int d, double s) {
    const std::size_t i =
        static_cast<std::size_t>(k.id()) * slots.size() + static_cast<std::size_t>(d);
    if (i >= kernel_seconds.size())
        kernel_seconds.resize((static_cast<std::size_t>(k.id()) + 8) * slots.size(), -1.0);
    double& m = kernel_seconds[i];
    m = m < 0 ? s : 0.75 * m + 0.25 * s;
}

void Runtime::schedule(TaskState* t) {
    int best = -1;
    double best_t = std::numeric_limits<double>::infinity();
    std::size_t best_valid = 0;
    for (std::size_t d = 0; d < slots.size(); ++d) {
        const DeviceSlot& s = slots[d];
        const DeviceKind k = s.dev->kind();
        if (t->on >= 0 && static_cast<int>(d) != t->on) continue;
        if (t->want != DeviceKind::any && k != t->want) continue;
        if (!t->kernel->has_variant(k)) continue;
        const auto sp = static_cast<std::size_t>(s.dev->space);
        double transfer = 0;
        std::size_t valid = 0;
        for (const ArgSlot& a : t->args) {
            if (!a.block) continue;
            const DataBlock* b = a.block;
            if (b->states[sp] != Msi::invalid) {
                valid += b->bytes;
            } else if (reads(a.mode)) {
                // Staged through the host when only another device holds it.
                const bool staged = sp != 0 && b->states[0] == Msi::invalid;
                const Device& via = sp != 0 ? *s.dev : *slots[static_cast<std::size_t>(d)].dev;
                transfer += (staged ? 2.0 : 1.0) *
                            (via.latency() + static_cast<double>(b->bytes) / via.bandwidth());
            }
        }
        const double finish =
            s.backlog + transfer + expected_seconds(*t->kernel, static_cast<int>(d));
        if (finish < best_t - 1e-9 || (finish <= best_t + 1e-9 && valid > best_valid)) {
            best = static_cast<int>(d);
            best_t = finish;
            best_valid = valid;
        }
    }
    if (best < 0) {  // checked at submission; a device list never changes
        fail_task(
            t, std::make_exception_ptr(std::logic_error("task '" + t->name + "': no device fits")));
        return;
    }
    t->device = best;
    t->expected = expected_seconds(*t->kernel, best);
    DeviceSlot& s = slots[static_cast<std::size_t>(best)];
    s.backlog += t->expected;
    s.admit.push_back(t);
}

}  // namespace cascade::device::detail
