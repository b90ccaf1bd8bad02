// The donor side of the shipped policies (see detail/donate.hpp).
#include "cascade/balance/detail/donate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cascade/balance/balancer.hpp"

namespace cascade::detail {

Gift donate(Balancer& b, int to, const Ask& ask) {
    const auto objs = b.local_objects();
    const auto w = b.work_left(objs);
    const auto here = b.here_for(objs);
    const double mine = std::accumulate(w.begin(), w.end(), 0.0);
    const double gap = mine - ask.load;
    if (gap <= std::max(ask.min_gap, 0.0)) return {};  // close enough: a move gains nothing
    std::vector<std::size_t> order;
    std::size_t with_work = 0;
    for (std::size_t i = 0; i < objs.size(); ++i) {
        if (w[i] <= 0) continue;
        ++with_work;
        const bool measured = objs[i].user_load || objs[i].recent_s > 0;
        if (!objs[i].pinned && measured && here[i] >= b.options().hold_s) order.push_back(i);
    }
    if (with_work < 2) return {};  // never give away the last queued work
    std::sort(order.begin(), order.end(), [&](auto x, auto y) { return w[x] > w[y]; });
    const double cap = std::min(gap / 2, ask.want);
    double given = 0;
    std::size_t moved = 0;
    for (std::size_t i : order)
        if (moved + 1 < with_work && given + w[i] <= cap && b.rebalance(objs[i].key, to))
            given += w[i], ++moved;
    if (given > 0) return {given, int(moved)};
    // Nothing fits: the single object closest to the cap, if moving it lowers the larger of
    // the two loads by enough (it gains min(w, gap - w)).
    std::size_t best = objs.size();
    for (std::size_t i : order)
        if (std::min(w[i], gap - w[i]) >= ask.min_gap / 2 &&
            (best == objs.size() || std::abs(w[i] - cap) < std::abs(w[best] - cap)))
            best = i;
    if (best != objs.size() && b.rebalance(objs[best].key, to)) return {w[best], 1};
    return {};
}

}  // namespace cascade::detail
