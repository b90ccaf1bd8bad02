#include "cascade/device/msi.hpp"

namespace cascade {

const char* to_string(DataAccess a) noexcept {
    switch (a) {
        case DataAccess::read:
            return "read";
        case DataAccess::write:
            return "write";
        case DataAccess::readwrite:
            return "readwrite";
    }
    return "?";
}

const char* to_string(Msi s) noexcept {
    switch (s) {
        case Msi::invalid:
            return "I";
        case Msi::shared:
            return "S";
        case Msi::modified:
            return "M";
    }
    return "?";
}

const char* to_string(DeviceKind k) noexcept {
    switch (k) {
        case DeviceKind::any:
            return "any";
        case DeviceKind::cpu:
            return "cpu";
        case DeviceKind::opencl:
            return "opencl";
        case DeviceKind::cuda:
            return "cuda";
        case DeviceKind::sim:
            return "sim";
    }
    return "?";
}

bool msi_any_valid(std::span<const Msi> states) noexcept {
    for (Msi s : states)
        if (s != Msi::invalid) return true;
    return false;
}

namespace {
// The copy a fetch reads: the host when valid (one hop), else a Modified copy, else a Shared
// one.
int pick_source(std::span<const Msi> states) noexcept {
    if (!states.empty() && states[0] != Msi::invalid) return 0;
    for (std::size_t i = 1; i < states.size(); ++i)
        if (states[i] == Msi::modified) return static_cast<int>(i);
    for (std::size_t i = 1; i < states.size(); ++i)
        if (states[i] == Msi::shared) return static_cast<int>(i);
    return -1;
}
}  // namespace

MsiPlan msi_access(std::span<Msi> states, int space, DataAccess access) noexcept {
    MsiPlan plan;
    const auto s = static_cast<std::size_t>(space);
    if (states[s] == Msi::invalid && reads(access)) {
        plan.source = pick_source(states);
        if (plan.source < 0) return plan;  // nothing valid: the caller's error
        plan.via_host = plan.source != 0 && space != 0;
        // A Modified source is no longer the only valid copy; staging makes the host valid.
        states[static_cast<std::size_t>(plan.source)] = Msi::shared;
        if (plan.via_host) states[0] = Msi::shared;
    }
    if (writes(access)) {
        for (auto& st : states)
            st = Msi::invalid;
        states[s] = Msi::modified;
    } else if (states[s] == Msi::invalid) {
        states[s] = Msi::shared;
    }
    return plan;
}

MsiPlan msi_evict(std::span<Msi> states, int space) noexcept {
    MsiPlan plan;
    const auto s = static_cast<std::size_t>(space);
    if (space <= 0 || states[s] == Msi::invalid) {
        if (space > 0) states[s] = Msi::invalid;
        return plan;
    }
    bool other_valid = false;
    for (std::size_t i = 0; i < states.size(); ++i)
        if (i != s && states[i] != Msi::invalid) other_valid = true;
    if (states[s] == Msi::modified || !other_valid) {
        plan.write_back = true;
        plan.source = space;
        states[0] = Msi::modified;
    }
    states[s] = Msi::invalid;
    return plan;
}

}  // namespace cascade
