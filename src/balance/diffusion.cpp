// The diffusion policy (see diffusion.hpp). Messages are sent after the policy's lock is
// released: sending may run incoming handlers, which take it too.
#include "cascade/balance/diffusion.hpp"

#include <algorithm>
#include <cstring>

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/detail/donate.hpp"

namespace cascade {

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
    for (int r = 0; r < b.size(); ++r)
        if (r != b.rank()) others.push_back(r);
    std::shuffle(others.begin(), others.end(), rng_);
    others.resize(std::min<std::size_t>(others.size(), std::max(1, opts_.neighbours)));
    neighbours_ = std::move(others);
    loads_.assign(neighbours_.size(), 0.0);
}

void Diffusion::replace_neighbour(Balancer& b, int who) {
    auto it = std::find(neighbours_.begin(), neighbours_.end(), who);
    if (it == neighbours_.end() || int(neighbours_.size()) + 1 >= b.size()) return;
    std::uniform_int_distribution<int> pick(0, b.size() - 1);
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
    sum_loads_ = 0;
    max_load_ = 0;
    my_load_ = my_load;
    credit_ = false;
    for (int n : neighbours_)
        out.push_back({n, Msg{1, 0, 0}});
}

void Diffusion::notify(Balancer&, const ObjectKey&, double) {
    // After a handler: the loads moved, an idle moment later is worth a new round.
    if (!credit_.load(std::memory_order_relaxed)) {
        empty_rounds_.store(0, std::memory_order_relaxed);
        credit_.store(true, std::memory_order_release);
    }
}

void Diffusion::balance(Balancer& b) {
    if (b.size() < 2) return;
    const double load = b.work_left();
    std::vector<std::pair<int, Msg>> out;
    {
        std::lock_guard<std::mutex> g(m_);
        if (neighbours_.empty()) draw_neighbours(b);
        if (phase_ == Phase::quiet && load < opts_.limit_s &&
            !incoming_.pending(load, b.options().hold_s))
            start_round(b, load, out);
        if (load > opts_.announce * opts_.limit_s && ++steps_ % opts_.announce_every == 0) {
            std::uniform_int_distribution<int> pick(0, b.size() - 1);
            for (int i = 0; i < opts_.neighbours; ++i) {
                const int r = pick(rng_);
                if (r != b.rank()) out.push_back({r, Msg{5, load, 0}});
            }
        }
    }
    post(b, out);
}

bool Diffusion::idle(Balancer& b) {
    if (b.size() < 2) return false;
    std::vector<std::pair<int, Msg>> out;
    bool again;
    {
        std::lock_guard<std::mutex> g(m_);
        if (phase_ != Phase::quiet) return true;  // answers on their way
        const double load = b.work_left();
        if (incoming_.pending(load, b.options().hold_s))
            return true;  // objects on their way: look again soon
        if (!credit_ || empty_rounds_ >= opts_.max_empty_rounds) return false;
        if (load >= opts_.limit_s) return false;
        start_round(b, load, out);
        again = true;
    }
    post(b, out);
    return again;
}

void Diffusion::on_message(Balancer& b, int source, const char* data, std::size_t size) {
    Msg m{};
    std::memcpy(&m, data, std::min(size, sizeof m));
    std::vector<std::pair<int, Msg>> out;
    switch (m.kind) {
        case 1:  // a neighbour wants our load
            out.push_back({source, Msg{2, b.work_left(), 0}});
            break;
        case 2: {  // a load we asked for
            std::lock_guard<std::mutex> g(m_);
            if (phase_ != Phase::polling) break;
            ++replies_;
            sum_loads_ += m.x;
            max_load_ = std::max(max_load_, m.x);
            for (std::size_t i = 0; i < neighbours_.size(); ++i)
                if (neighbours_[i] == source) loads_[i] = m.x;
            if (m.x > best_load_) best_load_ = m.x, best_rank_ = source;
            if (replies_ < int(neighbours_.size())) break;
            // Our share: up to the mean of the neighbourhood (not half of the best one's
            // load: its other neighbours ask it too).
            const double mean = (my_load_ + sum_loads_) / (replies_ + 1);
            const double want = std::min(mean - my_load_, (best_load_ - my_load_) / 2);
            if (best_rank_ >= 0 && best_load_ > opts_.limit_s &&
                best_load_ > my_load_ + opts_.limit_s && want >= opts_.limit_s / 2) {
                phase_ = Phase::asking;
                out.push_back({best_rank_, Msg{3, my_load_, want}});
            } else {  // nobody around has work: another neighbourhood next time
                phase_ = Phase::quiet;
                draw_neighbours(b);
                // Every neighbour is draining too: the end of the work, most likely. Stop
                // asking (a rank with work to spare still announces itself, see case 5).
                if (max_load_ < opts_.limit_s) empty_rounds_ = opts_.max_empty_rounds;
                credit_ = ++empty_rounds_ < opts_.max_empty_rounds;
            }
            break;
        }
        case 3: {  // give `source` some of our work
            const double given =
                b.enabled() ? detail::donate(b, source, {m.x, m.y, opts_.limit_s}) : 0.0;
            out.push_back({source, Msg{4, given, 0}});
            break;
        }
        case 5: {  // a rank with work to spare: ask it at once if we have little
            const double mine = b.work_left();
            std::lock_guard<std::mutex> g(m_);
            if (phase_ != Phase::quiet || mine >= opts_.limit_s || m.x <= mine + opts_.limit_s ||
                incoming_.pending(mine, b.options().hold_s)) {
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
            out.push_back({source, Msg{3, mine, (m.x - mine) / (opts_.neighbours + 1)}});
            break;
        }
        case 4: {  // what the most loaded neighbour gave us
            std::lock_guard<std::mutex> g(m_);
            phase_ = Phase::quiet;
            if (m.x > 0) {
                empty_rounds_ = 0;
                credit_ = true;
                incoming_.expect(m.x, my_load_);
            } else {
                replace_neighbour(b, source);
                credit_ = ++empty_rounds_ < opts_.max_empty_rounds;
            }
            break;
        }
        default:
            break;
    }
    post(b, out);
}

}  // namespace cascade
