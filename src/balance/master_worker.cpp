// The master-worker policy (see master_worker.hpp). Messages are sent after the policy's
// lock is released: sending may run incoming handlers, which take it too.
#include "cascade/balance/master_worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/detail/donate.hpp"
#include "cascade/core/log.hpp"
#include "cascade/trace/event.hpp"

namespace cascade {

using trace::now_ns;  // steady-clock nanoseconds

void MasterWorker::post(Balancer& b, Out& out) {
    for (auto& [dest, m] : out)
        b.send(dest, reinterpret_cast<const char*>(&m), sizeof m);
    out.clear();
}

void MasterWorker::notify(Balancer&, const ObjectKey&, double) {
    if (!credit_.load(std::memory_order_relaxed)) credit_.store(true, std::memory_order_release);
}

void MasterWorker::step(Balancer& b, bool from_idle) {
    if (b.ranks() < 2) return;
    double near_level = 0;
    const Balancer::RankLoads loads = b.loads();
    const double load = loads.load, near = loads.horizon;
    const double req = b.request_seconds();
    const double level = b.load_level(&near_level);
    double near_floor = 0;
    const double floor = b.load_floor(&near_floor);
    const int devices = b.devices();
    Out out;
    {
        std::lock_guard<std::mutex> g(m_);
        const int master = std::clamp(opts_.master, 0, b.ranks() - 1);
        // A rank that could not give yet (its objects had not been here for hold_s) reports
        // again once they have, whether its load changed or not: the master asks it again
        // then (a steady load, a chain's, would never report otherwise).
        const bool retry = again_ns_ > 0 && now_ns() >= again_ns_;
        const bool changed =
            reported_ < 0 || retry ||
            std::abs(load - reported_) > opts_.report * std::max(reported_, opts_.limit_s) ||
            std::abs(loads.standing - reported_standing_) >
                opts_.report * std::max(reported_standing_, opts_.limit_s);
        if (waiting_ && load >= opts_.limit_s) waiting_ = false;  // work came: no longer asking
        if (changed && !from_idle) {
            reported_ = load;
            reported_standing_ = loads.standing;
            again_ns_ = 0;
            out.push_back({master, Msg{1, b.rank(), load, 0, req, devices, level, near, near_level,
                                       floor, near_floor, loads.standing, loads.standing_horizon}});
        }
        if (!waiting_ && load < opts_.limit_s && (!from_idle || credit_.load()) &&
            !incoming_.pending(load, b.arrivals(), b.options().hold_s)) {
            credit_.store(false);
            waiting_ = true;
            reported_ = load;
            reported_standing_ = loads.standing;
            asked_load_ = load;
            out.push_back({master, Msg{2, b.rank(), load, 0, req, devices, level, near, near_level,
                                       floor, near_floor, loads.standing, loads.standing_horizon}});
        }
        // The master: a donor that refused a while ago may give now.
        if (b.rank() == master && !queue_.empty()) serve(b, out);
    }
    post(b, out);
}

void MasterWorker::balance(Balancer& b) {
    step(b, false);
}

bool MasterWorker::idle(Balancer& b) {
    // The request (if any) is on its way; the master answers with work when some rank has
    // it to spare, with no further call needed here.
    step(b, true);
    return false;
}

std::pair<double, double> MasterWorker::levels(const Balancer& b, int rank,
                                               std::int64_t now) const {
    const double level_s = b.options().level_s;
    if (!(level_s > 0)) return {0.0, 0.0};
    const double fade = std::exp(-double(now - level_ns_[rank]) * 1e-9 / level_s);
    return {level_[rank] * fade, near_level_[rank] * fade};
}

void MasterWorker::promise(int donor, int to, double to_load, double want, double level,
                           double near_level, const char* how, Out& out) {
    if (log::enabled(log::Level::debug))
        log::debug(std::string("master_worker: ") + how + ": rank " + std::to_string(donor) +
                   " (load " + std::to_string(table_[donor]) + ", near " +
                   std::to_string(near_[donor]) + ", standing " + std::to_string(standing_[donor]) +
                   ") gives rank " + std::to_string(to) + " (load " + std::to_string(table_[to]) +
                   ", level " + std::to_string(level) + ", near level " +
                   std::to_string(near_level) + ") " + std::to_string(want));
    out.push_back(
        {donor, Msg{3, to, to_load, want, request_s_[to], devices_[to], level, 0, near_level}});
    table_[donor] -= want;  // what the donor will aim at
    table_[to] += want;
    near_[donor] = std::max(0.0, near_[donor] - want), near_[to] += want;
    standing_[donor] = std::min(std::max(0.0, standing_[donor] - want), table_[donor]);
    near_standing_[donor] = std::min(std::max(0.0, near_standing_[donor] - want), near_[donor]);
    floor_[donor] = std::min(floor_[donor], table_[donor]);
    near_floor_[donor] = std::min(near_floor_[donor], near_[donor]);
    promised_[to] = want;
}

void MasterWorker::serve(const Balancer& b, Out& out) {
    const std::int64_t now = now_ns();
    // Each waiting rank once at most: one balanced with the most loaded rank goes to the
    // back of the queue, and the ranks behind it are served.
    for (std::size_t tries = queue_.size(); tries > 0 && !queue_.empty(); --tries) {
        const int r = queue_.front();
        int best = -1;
        for (int d = 0; d < int(table_.size()); ++d)
            if (d != r && refused_until_ns_[d] <= now &&
                std::find(queue_.begin(), queue_.end(), d) == queue_.end() &&
                (best < 0 || table_[d] > table_[best]))
                best = d;
        // r's recent peak load and horizon level, faded since it asked: a rank with little
        // more than r had a moment ago gives nothing (balanced, see
        // BalanceOptions::balanced_ratio), unless that lasts (sustained_ratio).
        if (best < 0 || table_[best] < opts_.limit_s || table_[best] < table_[r] + opts_.limit_s)
            return;  // nobody has work to spare: r waits
        const auto [level, near_level] = levels(b, r, now);
        if (detail::balanced(b.options(),
                             {table_[best], near_[best], floor_[best], near_floor_[best]}, level,
                             near_level)) {
            queue_.pop_front();
            queue_.push_back(r);
            continue;
        }
        // r's share: up to the mean load (half the gap to the most loaded rank would hand one
        // asker the surplus that several are waiting for).
        const double mean = std::accumulate(table_.begin(), table_.end(), 0.0) / table_.size();
        const double want = std::min(mean - table_[r], (table_[best] - table_[r]) / 2);
        if (want < opts_.limit_s / 2) return;  // the end of the work: not worth a move
        queue_.pop_front();
        promise(best, r, asked_[r], want, level, near_level, "serve", out);
    }
}

void MasterWorker::serve_early(const Balancer& b, Out& out) {
    // Chains keep their ranks' loads steady until they end, and the ranks with less run dry
    // all at once, then wait for their share in rounds; a rank whose load and horizon load
    // are under the donor's over balanced_ratio is given its share while its own work runs
    // (chains of one length end about together: their rates tell the imbalance). The donor
    // is the rank with the most standing load: requests passing through (a fan-out's, each
    // handler invoking another object) grow and drain with the pace of the ranks around, and
    // a rank with twice another's such queue is no surplus while both keep busy (a ring of
    // objects dealt round-robin); a rank that runs dry asks, and serve() gives it any work.
    if (!(b.options().balanced_ratio > 0)) return;
    const std::int64_t now = now_ns();
    int best = -1, low = -1;
    for (int d = 0; d < int(table_.size()); ++d) {
        if (std::find(queue_.begin(), queue_.end(), d) != queue_.end()) continue;
        if (refused_until_ns_[d] <= now && (best < 0 || standing_[d] > standing_[best])) best = d;
        // (A rank that never reported may have work: only those that did are compared.)
        if (promised_[d] <= 0 && level_ns_[d] > 0 && (low < 0 || table_[d] < table_[low])) low = d;
    }
    if (best < 0 || low < 0 || best == low || standing_[best] < table_[low] + opts_.limit_s) return;
    // low's recent peak loads, never under what it reported last: it reports again when its
    // load changes by `report`, so a steady load stays its level at the master as it does
    // there (the donor checks the same levels).
    auto [level, near_level] = levels(b, low, now);
    level = std::max(level, table_[low]);
    near_level = std::max(near_level, near_[low]);
    if (detail::balanced(b.options(),
                         {standing_[best], near_standing_[best], floor_[best], near_floor_[best]},
                         level, near_level))
        return;
    const double mean = std::accumulate(table_.begin(), table_.end(), 0.0) / table_.size();
    const double want = std::min(mean - table_[low], (standing_[best] - table_[low]) / 2);
    if (want < opts_.limit_s / 2) return;
    promise(best, low, table_[low], want, level, near_level, "early", out);
}

void MasterWorker::on_message(Balancer& b, int source, const char* data, std::size_t size) {
    Msg m{};
    std::memcpy(&m, data, std::min(size, sizeof m));
    // Loads are finite; kind 4 counts objects in y.
    if (source < 0 || source >= b.ranks() || m.rank < 0 || m.rank >= b.ranks() ||
        !std::isfinite(m.x) || !std::isfinite(m.y) || !std::isfinite(m.z) || !std::isfinite(m.l) ||
        !std::isfinite(m.h) || !std::isfinite(m.hl) || !std::isfinite(m.f) ||
        !std::isfinite(m.fh) || !std::isfinite(m.s) || !std::isfinite(m.sh) ||
        (m.kind == 4 && (m.y < 0 || m.y > 1e9)))
        throw WireError("master_worker: a message from rank " + std::to_string(source) +
                        " naming rank " + std::to_string(m.rank) + " (the job has " +
                        std::to_string(b.ranks()) + " ranks)");
    Out out;
    switch (m.kind) {
        case 1:    // (master) a rank's load
        case 2:    // (master) a rank asks for work
        case 5: {  // (master) a rank could not give rank m.rank what we asked
            std::lock_guard<std::mutex> g(m_);
            if (table_.empty())
                table_.assign(b.ranks(), 0.0), refused_until_ns_.assign(b.ranks(), 0),
                    asked_.assign(b.ranks(), 0.0), promised_.assign(b.ranks(), 0.0),
                    request_s_.assign(b.ranks(), 0.0), devices_.assign(b.ranks(), -1),
                    level_.assign(b.ranks(), 0.0), level_ns_.assign(b.ranks(), 0),
                    near_.assign(b.ranks(), 0.0), near_level_.assign(b.ranks(), 0.0),
                    floor_.assign(b.ranks(), 0.0), near_floor_.assign(b.ranks(), 0.0),
                    standing_.assign(b.ranks(), 0.0), near_standing_.assign(b.ranks(), 0.0);
            table_[source] = m.x;
            near_[source] = m.h;
            if (m.kind != 5) request_s_[source] = m.z, devices_[source] = m.d;
            if (m.kind != 5)
                level_[source] = m.l, near_level_[source] = m.hl, level_ns_[source] = now_ns(),
                floor_[source] = m.f, near_floor_[source] = m.fh, standing_[source] = m.s,
                near_standing_[source] = m.sh;
            else  // (its floors are no higher than its loads now)
                floor_[source] = std::min(floor_[source], m.x),
                near_floor_[source] = std::min(near_floor_[source], m.h),
                standing_[source] = std::min(m.s, m.x),
                near_standing_[source] = std::min(m.sh, m.h);
            if (m.kind == 2) asked_[source] = m.x;
            int asker = m.kind == 2 ? source : -1;
            if (m.kind == 5) {  // what it was promised never came: it waits again if still low
                table_[m.rank] = std::max(0.0, table_[m.rank] - promised_[m.rank]);
                near_[m.rank] = std::max(0.0, near_[m.rank] - promised_[m.rank]);
                if (table_[m.rank] < opts_.limit_s) asker = m.rank;
            }
            if (m.kind != 5) promised_[source] = 0;  // its own word is newer
            refused_until_ns_[source] =
                m.kind == 5 ? now_ns() + std::int64_t(b.options().hold_s * 1e9) : 0;
            if (m.kind == 1 && m.x >= opts_.limit_s)  // it has work now: no longer waiting
                queue_.erase(std::remove(queue_.begin(), queue_.end(), source), queue_.end());
            if (asker >= 0 && std::find(queue_.begin(), queue_.end(), asker) == queue_.end())
                m.kind == 5 ? queue_.push_front(asker) : queue_.push_back(asker);
            serve(b, out);
            if (m.kind == 1) serve_early(b, out);
            break;
        }
        case 3: {  // the master asks us to give rank m.rank some work
            const auto gift =
                b.enabled()
                    ? detail::donate(b, m.rank, {m.x, m.y, opts_.limit_s, m.z, m.d, m.l, m.hl})
                    : detail::Gift{};
            double near_level = 0;
            const Balancer::RankLoads now_loads = b.loads();
            const double left = now_loads.load, near = now_loads.horizon;
            if (log::enabled(log::Level::debug))
                log::debug("master_worker: asked to give rank " + std::to_string(m.rank) +
                           " (load " + std::to_string(m.x) + ", level " + std::to_string(m.l) +
                           ", near level " + std::to_string(m.hl) + "): gave " +
                           std::to_string(gift.objects) + " objects, " + std::to_string(gift.work) +
                           " s; load now " + std::to_string(left) + ", near " +
                           std::to_string(near));
            {
                std::lock_guard<std::mutex> g(m_);
                reported_ = left;
                reported_standing_ = now_loads.standing;
                if (gift.work <= 0 && left >= opts_.limit_s)
                    again_ns_ = now_ns() + std::int64_t(b.options().hold_s * 1e9);
            }
            if (gift.work > 0) {
                const double level = b.load_level(&near_level);
                double near_floor = 0;
                const double floor = b.load_floor(&near_floor);
                out.push_back({source, Msg{1, b.rank(), left, 0, b.request_seconds(), b.devices(),
                                           level, near, near_level, floor, near_floor,
                                           now_loads.standing, now_loads.standing_horizon}});
                out.push_back({m.rank, Msg{4, b.rank(), gift.work, double(gift.objects)}});
            } else {  // the master asks someone else, or keeps m.rank waiting
                out.push_back({source, Msg{5, m.rank, left, 0, 0, -1, 0, near, 0, 0, 0,
                                           now_loads.standing, now_loads.standing_horizon}});
            }
            break;
        }
        case 4: {  // work from the rank the master chose
            std::lock_guard<std::mutex> g(m_);
            waiting_ = false;
            credit_.store(true);
            incoming_.expect(m.x, int(m.y), asked_load_, b.arrivals());
            break;
        }
        default:
            break;
    }
    post(b, out);
}

}  // namespace cascade
