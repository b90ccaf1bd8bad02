// The diffusion policy (see diffusion.hpp). Messages are sent after the policy's lock is
// released: sending may run incoming handlers, which take it too.
#include "cascade/balance/diffusion.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/detail/donate.hpp"
#include "cascade/trace/event.hpp"

namespace cascade {

using trace::now_ns;  // steady-clock nanoseconds

double Diffusion::hint_load() {
    if (hint_rank_ < 0) return 0;
    // It drains at one second per second at least (one worker).
    const double left = hint_load_ - double(now_ns() - hint_ns_) * 1e-9;
    if (left <= 0) hint_rank_ = -1;
    return std::max(left, 0.0);
}

void Diffusion::learn(Balancer& b, int rank, double load) {
    if (rank < 0 || rank == b.rank() || load <= 0) return;
    if (rank == hint_rank_ || load >= hint_load()) {
        hint_rank_ = rank;
        hint_load_ = load;
        hint_ns_ = now_ns();
    }
}

double Diffusion::askers(const Balancer& b) const {
    // A rank sits in about as many neighbourhoods as one has members, and with few ranks
    // every other rank is one: at 2 ranks the one asker takes half the difference.
    return double(std::min(opts_.neighbours, b.ranks() - 1) + 1);
}

void Diffusion::post(Balancer& b, std::vector<std::pair<int, Msg>>& out) {
    for (auto& [dest, m] : out)
        b.send(dest, reinterpret_cast<const char*>(&m), sizeof m);
    out.clear();
}

void Diffusion::draw_neighbours(Balancer& b) {
    if (!seeded_) {
        rng_.seed(static_cast<std::uint32_t>(12345 + 7919 * b.rank()));
        seeded_ = true;
    }
    std::vector<int> others;
    for (int r = 0; r < b.ranks(); ++r)
        if (r != b.rank()) others.push_back(r);
    std::shuffle(others.begin(), others.end(), rng_);
    others.resize(std::min<std::size_t>(others.size(), std::max(1, opts_.neighbours)));
    neighbours_ = std::move(others);
    loads_.assign(neighbours_.size(), 0.0);
}

void Diffusion::replace_neighbour(Balancer& b, int who) {
    auto it = std::find(neighbours_.begin(), neighbours_.end(), who);
    if (it == neighbours_.end() || int(neighbours_.size()) + 1 >= b.ranks()) return;
    std::uniform_int_distribution<int> pick(0, b.ranks() - 1);
    for (;;) {
        const int r = pick(rng_);
        if (r != b.rank() &&
            std::find(neighbours_.begin(), neighbours_.end(), r) == neighbours_.end()) {
            *it = r;
            loads_[std::size_t(it - neighbours_.begin())] = 0;
            return;
        }
    }
}

void Diffusion::start_round(Balancer& b, double my_load, std::vector<std::pair<int, Msg>>& out) {
    if (neighbours_.empty()) draw_neighbours(b);
    phase_ = Phase::polling;
    replies_ = 0;
    best_rank_ = -1;
    best_load_ = 0;
    best_near_ = 0;
    best_floor_ = best_near_floor_ = 0;
    sum_loads_ = 0;
    max_load_ = 0;
    my_load_ = my_load;
    credit_ = false;
    for (int n : neighbours_)
        out.push_back({n, Msg{1, -1, 0, 0}});
}

void Diffusion::turn_away(const Balancer& b, int rank) {
    turned_away_.resize(std::size_t(b.ranks()), 0);
    turned_away_[std::size_t(rank)] = 1;
    any_turned_away_ = true;
}

void Diffusion::notify(Balancer&, const ObjectKey&, double) {
    // After a handler: the loads moved, an idle moment later is worth a new round.
    if (!credit_.load(std::memory_order_relaxed)) {
        empty_rounds_.store(0, std::memory_order_relaxed);
        credit_.store(true, std::memory_order_release);
    }
}

void Diffusion::balance(Balancer& b) {
    if (b.ranks() < 2) return;
    double near_floor = 0;
    const Balancer::RankLoads loads = b.loads();
    const double load = loads.load, near = loads.horizon;
    const double floor = b.load_floor(&near_floor);
    std::vector<std::pair<int, Msg>> out;
    {
        std::lock_guard<std::mutex> g(m_);
        if (neighbours_.empty()) draw_neighbours(b);
        if (phase_ == Phase::quiet && load < opts_.limit_s &&
            !incoming_.pending(load, b.arrivals(), b.options().hold_s))
            start_round(b, load, out);
        if (any_turned_away_ && load > opts_.limit_s + opts_.min_gap_s &&
            now_ns() - told_ns_ > std::int64_t(b.options().hold_s * 1e9)) {
            told_ns_ = now_ns();
            for (int r = 0; r < int(turned_away_.size()); ++r)
                if (turned_away_[std::size_t(r)])
                    out.push_back({r, Msg{5, -1, load, 0, 0, -1, 0, near, 0, floor, near_floor,
                                          loads.standing, loads.standing_horizon}});
            turned_away_.assign(turned_away_.size(), 0);
            any_turned_away_ = false;
        }
        // (A told rank that has not run dry weighs the standing loads: requests passing
        // through a fan-out's objects grow and drain with the pace of the ranks around.)
        if (load > opts_.announce * opts_.limit_s && ++steps_ % opts_.announce_every == 0) {
            std::uniform_int_distribution<int> pick(0, b.ranks() - 1);
            for (int i = 0; i < opts_.neighbours; ++i) {
                const int r = pick(rng_);
                if (r != b.rank())
                    out.push_back({r, Msg{5, -1, load, 0, 0, -1, 0, near, 0, floor, near_floor,
                                          loads.standing, loads.standing_horizon}});
            }
        }
    }
    post(b, out);
}

bool Diffusion::idle(Balancer& b) {
    // The round started here goes on by messages (the answers start the next round when one
    // was fruitless, see case 2 and 4), so the rank never waits for a later call: at the end
    // of the work an idle rank counts as idle as soon as it asked, and the job ends once the
    // answers came (a call wanted again would hold it one more period at least).
    if (b.ranks() < 2) return false;
    std::vector<std::pair<int, Msg>> out;
    {
        const double load = b.work_left();
        std::lock_guard<std::mutex> g(m_);
        if (phase_ != Phase::quiet) return false;  // answers on their way go on with it
        if (incoming_.pending(load, b.arrivals(), b.options().hold_s))
            return false;  // objects on their way: their handlers make this rank busy again
        if (!credit_ || empty_rounds_ >= opts_.max_empty_rounds) return false;
        if (load >= opts_.limit_s) return false;
        start_round(b, load, out);
    }
    post(b, out);
    return false;
}

void Diffusion::again(Balancer& b, double load, std::vector<std::pair<int, Msg>>& out) {
    if (credit_ && empty_rounds_ < opts_.max_empty_rounds && load < opts_.limit_s &&
        phase_ == Phase::quiet)
        start_round(b, load, out);
}

void Diffusion::on_message(Balancer& b, int source, const char* data, std::size_t size) {
    Msg m{};
    std::memcpy(&m, data, std::min(size, sizeof m));
    // r names a rank (-1: none), but in kind 4, where it counts objects.
    if (source < 0 || source >= b.ranks() || m.r < -1 || (m.kind != 4 && m.r >= b.ranks()) ||
        !std::isfinite(m.x) || !std::isfinite(m.y) || !std::isfinite(m.z) || !std::isfinite(m.l) ||
        !std::isfinite(m.h) || !std::isfinite(m.hl) || !std::isfinite(m.f) ||
        !std::isfinite(m.fh) || !std::isfinite(m.s) || !std::isfinite(m.sh))
        throw WireError("diffusion: a message from rank " + std::to_string(source) +
                        " naming rank " + std::to_string(m.r) + " (the job has " +
                        std::to_string(b.ranks()) + " ranks)");
    std::vector<std::pair<int, Msg>> out;
    switch (m.kind) {
        case 1: {  // a neighbour wants our load
            double near = 0, near_floor = 0;
            const double load = b.work_left(&near);
            const double floor = b.load_floor(&near_floor);
            std::lock_guard<std::mutex> g(m_);
            if (load < opts_.limit_s) turn_away(b, source);  // told when we have work to spare
            const double hint = hint_load();
            out.push_back(
                {source, hint_rank_ != source && hint > load
                             ? Msg{2, hint_rank_, load, hint, 0, -1, 0, near, 0, floor, near_floor}
                             : Msg{2, -1, load, 0, 0, -1, 0, near, 0, floor, near_floor}});
            break;
        }
        case 2: {  // a load we asked for
            const double mine = b.work_left();
            const double req = b.request_seconds();
            double near_level = 0;
            const double level = b.load_level(&near_level);
            std::lock_guard<std::mutex> g(m_);
            if (phase_ != Phase::polling) break;
            ++replies_;
            sum_loads_ += m.x;
            max_load_ = std::max(max_load_, m.x);
            for (std::size_t i = 0; i < neighbours_.size(); ++i)
                if (neighbours_[i] == source) loads_[i] = m.x;
            if (m.x > best_load_)
                best_load_ = m.x, best_near_ = m.h, best_rank_ = source, best_floor_ = m.f,
                best_near_floor_ = m.fh;
            learn(b, source, m.x);
            learn(b, m.r, m.y);
            if (replies_ < int(neighbours_.size())) break;
            // A rank heard of with more than the neighbours is asked instead (and joins the
            // neighbourhood in place of the least loaded neighbour).
            const double hint = hint_load();
            double n = replies_ + 1, sum = my_load_ + sum_loads_;
            if (hint > best_load_ && std::find(neighbours_.begin(), neighbours_.end(),
                                               hint_rank_) == neighbours_.end()) {
                // (Its horizon load is not known: its load stands for it, and it refuses if
                // balanced.)
                best_rank_ = hint_rank_, best_load_ = best_near_ = hint, sum += hint, n += 1;
                best_floor_ = best_near_floor_ = 0;
                const auto i = std::min_element(loads_.begin(), loads_.end()) - loads_.begin();
                neighbours_[i] = hint_rank_, loads_[i] = hint;
            }
            // Our share: up to the mean of the ranks we know of, and the best one's surplus
            // shared among the ranks that may ask it (not half of it at many ranks: four
            // random neighbours give a rough mean, and a rank that takes too much ends last).
            const double want = std::min(sum / n - my_load_, (best_load_ - my_load_) / askers(b));
            // Not from a rank with little more than we had a moment ago, nor one whose horizon
            // load is, unless that lasts (balanced: see BalanceOptions::balanced_ratio and
            // sustained_ratio).
            const bool balanced = detail::balanced(
                b.options(), {best_load_, best_near_, best_floor_, best_near_floor_}, level,
                near_level);
            if (best_rank_ >= 0 && best_load_ > opts_.limit_s &&
                best_load_ > my_load_ + opts_.min_gap_s && want >= opts_.min_gap_s / 3 &&
                !balanced) {
                phase_ = Phase::asking;
                out.push_back({best_rank_,
                               Msg{3, -1, my_load_, want, req, b.devices(), level, 0, near_level}});
            } else {  // nobody around has work: another neighbourhood next time
                phase_ = Phase::quiet;
                draw_neighbours(b);
                // Every neighbour drains, or the most loaded one has no more than we had a
                // moment ago, and none heard of a rank with more: the work ends about evenly
                // here, most likely. Stop asking (a rank with work to spare still announces
                // itself, see case 5).
                if (std::max(max_load_, hint) < opts_.limit_s || balanced)
                    empty_rounds_ = opts_.max_empty_rounds;
                credit_ = ++empty_rounds_ < opts_.max_empty_rounds;
                again(b, mine, out);  // another neighbourhood at once
            }
            break;
        }
        case 3: {  // give `source` some of our work
            const auto gift =
                b.enabled()
                    ? detail::donate(b, source, {m.x, m.y, opts_.min_gap_s, m.z, m.d, m.l, m.hl})
                    : detail::Gift{};
            if (gift.work <= 0 && b.enabled()) {
                // Nothing could go yet (no object here long enough, none measured): told
                // again later if we still have work to spare.
                std::lock_guard<std::mutex> g(m_);
                turn_away(b, source);
            }
            out.push_back({source, Msg{4, gift.objects, gift.work, 0}});
            break;
        }
        case 5: {  // a rank with work to spare: ask it at once if we have little
            const double mine = b.work_left();
            const double req = b.request_seconds();
            double near_level = 0;
            const double level = b.load_level(&near_level);
            const double ratio = b.options().balanced_ratio;
            std::lock_guard<std::mutex> g(m_);
            learn(b, source, m.x);
            // Little: below the limit, or less than its load and horizon load over
            // balanced_ratio (without it: under a half of its load). A rank that waits until
            // it runs dry takes its share in the last stretch of the work, from donors that
            // several such ranks ask at once; one whose chains keep its worker busy at half
            // the rate of another's asks while they run (they likely end about together).
            // Before this rank runs dry only the announcer's work to spare counts, its
            // standing loads (m.s, m.sh): what passes through its objects keeps this rank's
            // coming too. A rank that ran dry takes any work (m.x, m.h).
            const bool dry = mine < opts_.limit_s;
            const double spare = dry ? m.x : m.s, spare_near = dry ? m.h : m.sh;
            const bool balanced =
                detail::balanced(b.options(), {spare, spare_near, m.f, m.fh}, level, near_level);
            const bool little = dry || (ratio > 0 ? !balanced : 2 * mine + opts_.limit_s < spare);
            if (phase_ != Phase::quiet || !little || spare <= mine + opts_.min_gap_s || balanced ||
                incoming_.pending(mine, b.arrivals(), b.options().hold_s)) {
                // Not now: it joins our neighbourhood in place of the least loaded neighbour,
                // so that our next round asks it.
                if (neighbours_.empty() ||
                    std::find(neighbours_.begin(), neighbours_.end(), source) != neighbours_.end())
                    break;
                const auto i = std::min_element(loads_.begin(), loads_.end()) - loads_.begin();
                if (loads_[i] < m.x && phase_ == Phase::quiet)
                    neighbours_[i] = source, loads_[i] = m.x;
                break;
            }
            phase_ = Phase::asking;
            my_load_ = mine;
            // It told a neighbourhood: our share of its surplus.
            out.push_back({source, Msg{3, -1, mine, (spare - mine) / askers(b), req, b.devices(),
                                       level, 0, near_level}});
            break;
        }
        case 4: {  // what the most loaded neighbour gave us
            const double mine = b.work_left();
            std::lock_guard<std::mutex> g(m_);
            phase_ = Phase::quiet;
            if (m.x > 0) {
                empty_rounds_ = 0;
                credit_ = true;
                incoming_.expect(m.x, m.r, my_load_, b.arrivals());
            } else {
                if (source == hint_rank_) hint_rank_ = -1;  // it has nothing for us
                replace_neighbour(b, source);
                credit_ = ++empty_rounds_ < opts_.max_empty_rounds;
                again(b, mine, out);
            }
            break;
        }
        default:
            break;
    }
    post(b, out);
}

}  // namespace cascade
