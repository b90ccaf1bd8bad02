// The donor side of the shipped policies (see detail/donate.hpp).
#include "cascade/balance/detail/donate.hpp"

#include <algorithm>
#include <numeric>

#include "cascade/balance/balancer.hpp"

namespace cascade::detail {

double donate(Balancer& b, int to, double their_load) {
    const auto objs = b.local_objects();
    const auto w = b.work_left(objs);
    const double mine = std::accumulate(w.begin(), w.end(), 0.0);
    if (mine <= their_load) return 0;
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < objs.size(); ++i)
        if (!objs[i].pinned && w[i] > 0) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](auto x, auto y) { return w[x] > w[y]; });
    const double half_gap = (mine - their_load) / 2;
    double given = 0;
    for (std::size_t i : order)
        if (given + w[i] <= half_gap && b.migrate(objs[i].key, to)) given += w[i];
    if (given > 0) return given;
    // Nothing fits in half the gap: the single object closest to it, if moving it lowers
    // the larger of the two loads (it is below the whole gap).
    std::size_t best = objs.size();
    for (std::size_t i : order)
        if (w[i] < mine - their_load &&
            (best == objs.size() || std::abs(w[i] - half_gap) < std::abs(w[best] - half_gap)))
            best = i;
    if (best != objs.size() && b.migrate(objs[best].key, to)) given = w[best];
    return given;
}

}  // namespace cascade::detail
