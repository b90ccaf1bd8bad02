#include "cascade/broadcast/tree.hpp"

#include <algorithm>
#include <bit>

namespace cascade::broadcast {

void children(Shape shape, std::size_t m, std::vector<Child>& out) {
    out.clear();
    if (m == 0) return;
    if (shape == Shape::pipelined) {
        out.push_back(Child{0, m - 1});
        return;
    }
    // Relative index r = position; the child at mask covers [mask, min(2 mask, m+1)).
    for (std::size_t mask = std::bit_floor(m); mask > 0; mask >>= 1) {
        const std::size_t end = std::min(2 * mask, m + 1);
        out.push_back(Child{mask - 1, end - mask - 1});
    }
}

namespace {
// steps[p] for positions base+1 .. base+count, the node at base having received at step0.
void walk(Shape shape, std::size_t base, std::size_t count, std::size_t step0,
          std::vector<std::size_t>& steps) {
    std::vector<Child> ch;
    children(shape, count, ch);
    for (std::size_t k = 0; k < ch.size(); ++k) {
        const std::size_t p = base + ch[k].at + 1;
        steps[p] = step0 + k + 1;
        walk(shape, p, ch[k].count, steps[p], steps);
    }
}
}  // namespace

void arrival_steps(Shape shape, std::size_t m, std::vector<std::size_t>& steps) {
    steps.assign(m + 1, 0);
    if (shape == Shape::pipelined) {
        for (std::size_t p = 1; p <= m; ++p)
            steps[p] = p;
        return;
    }
    walk(shape, 0, m, 0, steps);
}

void arrange(Shape shape, std::span<const int> ranks, std::span<const double> priorities,
             std::size_t rotation, std::vector<Recipient>& out) {
    const std::size_t m = ranks.size();
    out.resize(m);
    if (m == 0) return;
    rotation %= m;
    // Index i of the rotated list sits at position i+1 unless priorities move it.
    auto rank_at = [&](std::size_t i) { return (i + rotation) % m; };
    auto prio_at = [&](std::size_t i) { return priorities.empty() ? 0.0 : priorities[rank_at(i)]; };
    bool uniform = true;
    for (std::size_t i = 1; i < m && uniform && !priorities.empty(); ++i)
        uniform = priorities[i] == priorities[0];
    if (uniform) {
        for (std::size_t i = 0; i < m; ++i)
            out[i] = Recipient{ranks[rank_at(i)], static_cast<float>(prio_at(i))};
        return;
    }
    thread_local std::vector<std::size_t> who, where;
    who.resize(m);
    where.resize(m);
    thread_local std::vector<std::size_t> steps;
    arrival_steps(shape, m, steps);
    auto slot_before = [&](std::size_t a, std::size_t b) {  // positions a+1, b+1
        return steps[a + 1] != steps[b + 1] ? steps[a + 1] < steps[b + 1] : a < b;
    };
    for (std::size_t i = 0; i < m; ++i)
        who[i] = where[i] = i;
    // Recipients by priority, ties by the slot their own position has; positions by slot.
    std::stable_sort(who.begin(), who.end(), [&](std::size_t a, std::size_t b) {
        const double pa = prio_at(a), pb = prio_at(b);
        return pa != pb ? pa > pb : slot_before(a, b);
    });
    std::sort(where.begin(), where.end(), slot_before);
    for (std::size_t k = 0; k < m; ++k)
        out[where[k]] = Recipient{ranks[rank_at(who[k])], static_cast<float>(prio_at(who[k]))};
}

}  // namespace cascade::broadcast
