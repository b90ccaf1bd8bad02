// The master-worker policy (see master_worker.hpp). Messages are sent after the policy's
// lock is released: sending may run incoming handlers, which take it too.
#include "cascade/balance/master_worker.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/detail/donate.hpp"

namespace cascade {

void MasterWorker::post(Balancer& b, Out& out) {
    for (auto& [dest, m] : out)
        b.send(dest, reinterpret_cast<const char*>(&m), sizeof m);
    out.clear();
}

void MasterWorker::notify(Balancer&, const ObjectKey&, double) {
    if (!credit_.load(std::memory_order_relaxed)) credit_.store(true, std::memory_order_release);
}

void MasterWorker::step(Balancer& b, bool from_idle) {
    if (b.size() < 2) return;
    const double load = b.work_left();
    Out out;
    {
        std::lock_guard<std::mutex> g(m_);
        const int master = std::clamp(opts_.master, 0, b.size() - 1);
        const bool changed = reported_ < 0 || std::abs(load - reported_) >
                                                  opts_.report * std::max(reported_, opts_.limit_s);
        if (waiting_ && load >= opts_.limit_s) waiting_ = false;  // work came: no longer asking
        if (changed && !from_idle) {
            reported_ = load;
            out.push_back({master, Msg{1, b.rank(), load}});
        }
        if (!waiting_ && load < opts_.limit_s && (!from_idle || credit_.load())) {
            credit_.store(false);
            waiting_ = true;
            reported_ = load;
            out.push_back({master, Msg{2, b.rank(), load}});
        }
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

void MasterWorker::serve(Out& out) {
    while (!queue_.empty()) {
        const int r = queue_.front();
        int best = -1;
        for (int d = 0; d < int(table_.size()); ++d)
            if (d != r && !refused_[d] &&
                std::find(queue_.begin(), queue_.end(), d) == queue_.end() &&
                (best < 0 || table_[d] > table_[best]))
                best = d;
        if (best < 0 || table_[best] < opts_.limit_s || table_[best] < table_[r] + opts_.limit_s)
            return;  // nobody has work to spare: r waits
        queue_.pop_front();
        out.push_back({best, Msg{3, r, asked_[r]}});
        const double moved = (table_[best] - table_[r]) / 2;  // what the donor will aim at
        table_[best] -= moved;
        table_[r] += moved;
    }
}

void MasterWorker::on_message(Balancer& b, int source, const char* data, std::size_t size) {
    Msg m{};
    std::memcpy(&m, data, std::min(size, sizeof m));
    Out out;
    switch (m.kind) {
        case 1:    // (master) a rank's load
        case 2:    // (master) a rank asks for work
        case 5: {  // (master) a rank could not give rank m.rank what we asked
            std::lock_guard<std::mutex> g(m_);
            if (table_.empty())
                table_.assign(b.size(), 0.0), refused_.assign(b.size(), 0),
                    asked_.assign(b.size(), 0.0);
            table_[source] = m.x;
            if (m.kind == 2) asked_[source] = m.x;
            if (m.kind == 5) table_[m.rank] = asked_[m.rank];  // what it was promised never came
            refused_[source] = m.kind == 5;
            if (m.kind == 1 && m.x >= opts_.limit_s)  // it has work now: no longer waiting
                queue_.erase(std::remove(queue_.begin(), queue_.end(), source), queue_.end());
            const int asker = m.kind == 5 ? m.rank : m.kind == 2 ? source : -1;
            if (asker >= 0 && std::find(queue_.begin(), queue_.end(), asker) == queue_.end())
                m.kind == 5 ? queue_.push_front(asker) : queue_.push_back(asker);
            serve(out);
            break;
        }
        case 3: {  // the master asks us to give rank m.rank some work
            const double given = b.enabled() ? detail::donate(b, m.rank, m.x) : 0.0;
            const double left = b.work_left();
            {
                std::lock_guard<std::mutex> g(m_);
                reported_ = left;
            }
            if (given > 0) {
                out.push_back({source, Msg{1, b.rank(), left}});
                out.push_back({m.rank, Msg{4, b.rank(), given}});
            } else {  // the master asks someone else, or keeps m.rank waiting
                out.push_back({source, Msg{5, m.rank, left}});
            }
            break;
        }
        case 4: {  // work from the rank the master chose
            std::lock_guard<std::mutex> g(m_);
            waiting_ = false;
            credit_.store(true);
            break;
        }
        default:
            break;
    }
    post(b, out);
}

}  // namespace cascade
