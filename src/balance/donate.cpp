// The donor side of the shipped policies (see detail/donate.hpp).
#include "cascade/balance/detail/donate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cascade/balance/balancer.hpp"

namespace cascade::detail {

namespace {

double speed(Balancer& b, const std::vector<ObjectLoad>& objs, const Ask& ask) {
    if (ask.devices < 0 || ask.devices == b.devices() || !(ask.request_s > 0)) return 1.0;
    const double mine = b.request_seconds(objs);
    if (!(mine > 0)) return 1.0;
    return std::clamp(ask.request_s / mine, 0.01, 100.0);
}

}  // namespace

bool balanced(const BalanceOptions& o, const DonorLoads& d, double level, double horizon_level) {
    if (!(o.balanced_ratio > 0)) return false;
    if (d.load > o.balanced_ratio * level && d.horizon > o.balanced_ratio * horizon_level)
        return false;
    const double s = o.sustained_ratio;
    return !(s > 0 && d.floor > s * level && d.horizon_floor > s * horizon_level);
}

Gift donate(Balancer& b, int to, const Ask& ask) {
    const auto objs = b.local_objects();
    std::vector<double> movable;
    double near = 0;
    const auto w = b.work_left(objs, &movable, &near);
    const auto here = b.here_for(objs);
    const double mine = std::accumulate(w.begin(), w.end(), 0.0);
    const double gap = mine - ask.load;
    if (gap <= std::max(ask.min_gap, 0.0)) return {};  // close enough: a move gains nothing
    const double k = speed(b, objs, ask);              // a second of ours takes k seconds there
    // Balanced already: the asker had about as much a moment ago (a queue that emptied for a
    // moment, chains that ended a little earlier there) and will again, or ends as we do.
    // Each rank's load is its own time to finish, whatever its devices. The horizon loads
    // too: a long queue here against chains there, whose steps to come are unknown, is no
    // surplus while both keep their workers busy at the same rate.
    // An imbalance that lasts (the floors over sustain_s) is moved down to sustained_ratio.
    double near_floor = 0;
    const double floor = b.load_floor(&near_floor);
    if (balanced(b.options(), {mine, near, std::min(floor, mine), std::min(near_floor, near)},
                 ask.level, ask.horizon_level))
        return {};
    std::vector<std::size_t> order;
    std::size_t with_work = 0;
    for (std::size_t i = 0; i < objs.size(); ++i) {
        if (movable[i] <= 0) continue;
        ++with_work;
        const bool measured = objs[i].user_load || objs[i].recent_s > 0;
        if (!objs[i].pinned && measured && here[i] >= b.options().hold_s) order.push_back(i);
    }
    if (with_work < 2) return {};  // never give away the last queued work
    std::sort(order.begin(), order.end(), [&](auto x, auto y) { return movable[x] > movable[y]; });
    // After giving g: this rank has mine - g, the asker ask.load + k g; no higher than us.
    const double cap = std::min(gap / (1 + k), ask.want / k);
    double given = 0;
    std::size_t moved = 0;
    for (std::size_t i : order)
        if (moved + 1 < with_work && given + movable[i] <= cap && b.rebalance(objs[i].key, to))
            given += movable[i], ++moved;
    if (given > 0) return {given * k, int(moved)};
    // Nothing fits: the single object closest to the cap, if moving it lowers the larger of
    // the two loads by enough (it gains min(w, gap - k w)).
    std::size_t best = objs.size();
    for (std::size_t i : order)
        if (std::min(movable[i], gap - k * movable[i]) >= ask.min_gap / 2 &&
            (best == objs.size() || std::abs(movable[i] - cap) < std::abs(movable[best] - cap)))
            best = i;
    if (best != objs.size() && b.rebalance(objs[best].key, to)) return {movable[best] * k, 1};
    return {};
}

}  // namespace cascade::detail
