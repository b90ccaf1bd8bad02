// The Balancer: runs a policy on every rank (periodic steps after handlers, idle calls from
// the pool's idle workers) and turns its decisions into balancing migrations.
#include "cascade/balance/balancer.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/trace/event.hpp"
#include "layer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace cascade {

using trace::now_ns;  // steady-clock nanoseconds

Balancer::Balancer(Objects& objs, std::unique_ptr<BalancePolicy> policy, BalanceOptions opts)
    : objs_(objs), policy_(std::move(policy)), opts_(opts), enabled_(opts.enabled) {
    // A program's own Balancer takes over from the one CASCADE_BALANCE made (switched off:
    // its message stays registered, and it no longer hears of handlers or idle workers).
    if (Balancer* before = objs.balancer()) before->enable(false);
    if (!policy_) {
        policy_ = make_policy(std::string(detail::policy_from_env()));
    }
    alive_ = std::make_shared<std::atomic<Balancer*>>(this);
    msg_ = objs.comm().make_active_msg(
        [alive = alive_](std::int32_t& source, view<char>& v) {
            // A peer's policy may still send after this rank's Balancer is gone (its idle
            // steps outlive a join()): nothing is left to tell, the message is dropped.
            Balancer* self = alive->load(std::memory_order_acquire);
            if (!self) return;
            // The rank that sent it, as the policies are told (and index tables with).
            if (source != detail::tls_frame_source || source < 0 || source >= self->ranks())
                throw WireError("balance: a message received from rank " +
                                std::to_string(detail::tls_frame_source) + " names rank " +
                                std::to_string(source) + " as its sender");
            self->policy_->on_message(*self, source, v.data(), v.size());
        },
        "balance.message");
    objs_.set_observer(this);
    objs_.pool().set_idle_hook(this);
    objs_.set_balancer(this);
}

Balancer::~Balancer() {
    alive_->store(nullptr, std::memory_order_release);
    // Only if still the one in place (the CASCADE_BALANCE one, replaced, leaves them alone).
    if (objs_.balancer() != this) return;
    objs_.pool().set_idle_hook(nullptr);
    objs_.set_observer(nullptr);
    objs_.set_balancer(nullptr);
}

std::vector<double> Balancer::work_left(const std::vector<ObjectLoad>& objs) const {
    return work_left(objs, nullptr);
}

namespace {

// What the device work table says of each listed object: its device time per task here
// (-1: unknown) and its tasks in flight.
struct DeviceView {
    double seconds = 0;
    int in_flight = 0;
};

std::vector<DeviceView> device_view(detail::DeviceWork& dw, const std::vector<ObjectLoad>& objs,
                                    bool prune) {
    std::vector<DeviceView> v(objs.size());
    if (!dw.used()) return v;
    std::vector<ObjectKey> keys;
    keys.reserve(objs.size());
    for (const auto& o : objs)
        keys.push_back(o.key);
    double sum = 0;
    int n = 0;
    std::size_t i = 0;
    dw.visit(
        keys,
        [&](const ObjectKey&, const detail::DeviceWork::Entry* e) {
            DeviceView& d = v[i++];
            if (!e) {
                d.seconds = -1;  // not seen here: like the others, once their mean is known
                return;
            }
            d.in_flight = e->in_flight;
            if (e->seconds >= 0)
                d.seconds = e->seconds, sum += e->seconds, ++n;
            else
                d.seconds = e->in_flight > 0 || !e->handled ? -1 : 0;  // no device work here
        },
        prune);
    const double mean = n ? sum / n : 0.0;
    for (auto& d : v)
        if (d.seconds < 0) d.seconds = mean;
    return v;
}

}  // namespace

std::vector<double> Balancer::work_left(const std::vector<ObjectLoad>& objs,
                                        std::vector<double>* movable, double* horizon) const {
    return work_left(objs, movable, horizon, nullptr);
}

std::vector<double> Balancer::work_left(const std::vector<ObjectLoad>& objs,
                                        std::vector<double>* movable, double* horizon,
                                        ChainLoads* chains) const {
    double sum = 0;
    int n = 0;
    for (const auto& o : objs)
        if (o.recent_s > 0) sum += o.recent_s, ++n;
    const double fallback = n ? sum / n : opts_.default_request_s;
    const auto dev = device_view(*device_work_, objs, false);
    // Queued work and each object's projection (what it generates: a chain's next steps).
    std::vector<double> w, near_of(objs.size(), 0.0);  // near_of: each one's horizon load
    w.reserve(objs.size());
    if (movable) movable->assign(objs.size(), 0.0);
    double projected = 0, rank_rate = 0, near = 0, chain_load = 0, chain_near = 0;
    const double most = 1 + std::max(opts_.horizon_handlers, 0.0);  // requests in the horizon
    std::size_t queued = 0;
    for (std::size_t i = 0; i < objs.size(); ++i) {
        const auto& o = objs[i];
        if (o.leaving || o.user_load) {
            w.push_back(o.leaving ? 0.0 : o.load);
            if (movable) (*movable)[i] = w.back();
            near += w.back();
            near_of[i] = w.back();
            chain_load += w.back(), chain_near += w.back();  // work left, as its type says
            continue;
        }
        // A chain projects its next steps; requests from elsewhere are counted as they
        // come (queued, or in the rank's rate below). Only an object with a request
        // projects: one with none may be done, and a rank with none is idle, time to ask.
        // Device work: its time per task adds to the cost of a request, its tasks in flight
        // are this rank's work (they finish here), and it runs as a chain while active.
        const double device_s = dev[i].seconds;
        const double cost = (o.recent_s > 0 ? o.recent_s : fallback) + device_s;
        const double in_flight = double(dev[i].in_flight) * device_s;
        const bool active = o.pending > 0 || dev[i].in_flight > 0;
        const double chain = std::max(o.chained * o.demand, device_s > 0 ? 1.0 : 0.0);
        const double ahead = active ? chain * opts_.horizon_handlers * cost : 0.0;
        w.push_back(double(o.pending) * cost + ahead + in_flight);
        if (movable) (*movable)[i] = w.back() - in_flight;
        // Within the horizon: a long queue counts as many requests as a chain projects.
        const double within = std::min(double(o.pending) * cost + ahead, most * cost) + in_flight;
        near += within;
        near_of[i] = within;
        // The chains' part: an object whose requests its own handler issues (or with device
        // work) keeps its rank busy at a steady rate; requests from elsewhere (a fan-out's)
        // come and go with the other ranks' pace.
        const double own = std::clamp(std::max(o.chained, device_s > 0 ? 1.0 : 0.0), 0.0, 1.0);
        chain_load += own * w.back();
        chain_near += own * within;
        projected += ahead;
        rank_rate += o.busy_rate * o.issuing;
        queued += o.pending;
    }
    // The rank as a whole: its workers stay busy for horizon_s at their recent rate with the
    // handlers that issue requests (work flowing from object to object, each idle between
    // requests); the difference goes to the objects by their share of that rate.
    const double extra = rank_rate * opts_.horizon_s - projected;
    if (queued > 0 && extra > 0 && rank_rate > 0)
        for (std::size_t i = 0; i < objs.size(); ++i)
            if (!objs[i].leaving && !objs[i].user_load) {
                const double add = extra * objs[i].busy_rate * objs[i].issuing / rank_rate;
                w[i] += add;
                near += add;
                near_of[i] += add;
                if (movable) (*movable)[i] += add;
            }
    // The work passing through: requests queued on objects whose handlers pass work on to
    // other objects (a fan-out's flow: the share of its issuing handlers beyond its chained
    // requests; a chain's two shares grow alike from its first step), and their share of the
    // work the rank generates. Device tasks in flight finish here whatever the object does.
    double through = 0, through_near = 0;
    for (std::size_t i = 0; i < objs.size(); ++i) {
        const auto& o = objs[i];
        if (o.leaving || o.user_load || !(o.issuing > 0)) continue;
        const double pass = std::clamp((o.issuing - o.chained) / o.issuing, 0.0, 1.0);
        const double in_flight = double(dev[i].in_flight) * dev[i].seconds;
        through += pass * std::max(0.0, w[i] - in_flight);
        through_near += pass * std::max(0.0, near_of[i] - in_flight);
    }
    if (horizon) *horizon = near;
    if (chains) *chains = {chain_load, chain_near, through, through_near};
    return w;
}

double Balancer::request_seconds() const {
    return request_seconds(local_objects());
}

double Balancer::request_seconds(const std::vector<ObjectLoad>& objs) const {
    const auto dev = device_view(*device_work_, objs, false);
    double sum = 0;
    int n = 0;
    for (std::size_t i = 0; i < objs.size(); ++i)
        if (objs[i].recent_s > 0) sum += objs[i].recent_s + dev[i].seconds, ++n;
    return n ? sum / n : 0.0;
}

double Balancer::work_left(double* horizon) const {
    const RankLoads l = loads();
    if (horizon) *horizon = l.horizon;
    return l.load;
}

Balancer::RankLoads Balancer::loads() const {
    double sum = 0, near = 0;
    ChainLoads chains;
    for (double w : work_left(local_objects(), nullptr, &near, &chains))
        sum += w;
    const std::int64_t now = now_ns();
    std::lock_guard<std::mutex> g(level_mutex_);
    level_ = std::max(sum, level_at(level_, now));
    near_level_ = std::max(near, level_at(near_level_, now));
    level_ns_ = now;
    if (opts_.sustain_s > 0 && opts_.sustained_ratio > 0) {  // floors only when used
        samples_.push_back({now, chains.load, chains.near});
        const auto from = now - static_cast<std::int64_t>(opts_.sustain_s * 1e9);
        while (samples_.size() > 1 && samples_[1].ns <= from)
            samples_.pop_front();
    }
    return {sum, near, std::max(0.0, sum - chains.through),
            std::max(0.0, near - chains.through_near)};
}

double Balancer::horizon_load() const {
    double near = 0;
    work_left(&near);
    return near;
}

double Balancer::level_at(double level, std::int64_t now) const {
    if (level <= 0 || !(opts_.level_s > 0)) return 0;
    return level * std::exp(-double(now - level_ns_) * 1e-9 / opts_.level_s);
}

double Balancer::load_level(double* horizon) const {
    std::lock_guard<std::mutex> g(level_mutex_);
    const std::int64_t now = now_ns();
    if (horizon) *horizon = level_at(near_level_, now);
    return level_at(level_, now);
}

double Balancer::load_floor(double* horizon) const {
    std::lock_guard<std::mutex> g(level_mutex_);
    if (horizon) *horizon = 0;
    // Only a rank that gave work a moment ago: its imbalance was found and acted on.
    const std::int64_t now = now_ns();
    const auto gave = gave_ns_.load(std::memory_order_relaxed);
    if (gave == 0 || double(now - gave) * 1e-9 > opts_.level_s) return 0;
    const auto from = now - static_cast<std::int64_t>(opts_.sustain_s * 1e9);
    if (!(opts_.sustain_s > 0) || samples_.empty() || samples_.front().ns > from) return 0;
    double load = samples_.front().load, near = samples_.front().near;
    for (const auto& x : samples_)
        load = std::min(load, x.load), near = std::min(near, x.near);
    if (horizon) *horizon = near;
    return load;
}

std::vector<double> Balancer::here_for(const std::vector<ObjectLoad>& objs) {
    const std::int64_t now = now_ns();
    std::vector<double> here;
    here.reserve(objs.size());
    std::lock_guard<std::mutex> g(seen_mutex_);
    std::unordered_map<ObjectKey, std::int64_t> seen;  // only the objects listed now
    seen.reserve(objs.size());
    for (const auto& o : objs) {
        auto it = seen_ns_.find(o.key);
        if (it == seen_ns_.end()) arrivals_.fetch_add(1, std::memory_order_relaxed);
        const std::int64_t since = it != seen_ns_.end() ? it->second : now;
        seen.emplace(o.key, since);
        here.push_back(double(now - since) * 1e-9);
    }
    seen_ns_ = std::move(seen);
    if (device_work_->used()) device_view(*device_work_, objs, true);  // forgets objects gone
    return here;
}

bool Balancer::rebalance(const ObjectKey& k, int dest) {
    if (!enabled() || !objs_.rebalance(k, dest)) return false;
    migrations_.fetch_add(1, std::memory_order_relaxed);
    gave_ns_.store(now_ns(), std::memory_order_relaxed);
    return true;
}

void Balancer::send(int dest, const char* data, std::size_t size) {
    msg_->send(dest, std::int32_t(rank()), view<char>(const_cast<char*>(data), size));
}

void Balancer::after_handler(const ObjectKey& key, double seconds) {
    device_work_->handled(key);
    policy_->notify(*this, key, seconds);
    if (!enabled()) return;
    const std::int64_t now = now_ns();
    const auto period = static_cast<std::int64_t>(opts_.period_s * 1e9);
    std::int64_t last = last_step_ns_.load(std::memory_order_relaxed);
    if (now - last < period) return;
    std::unique_lock<std::mutex> lk(step_mutex_, std::try_to_lock);
    if (!lk.owns_lock()) return;
    if (!last_step_ns_.compare_exchange_strong(last, now)) return;
    steps_.fetch_add(1, std::memory_order_relaxed);
    if (opts_.hold_s > 0) here_for(local_objects());  // notes the objects that arrived
    policy_->balance(*this);
}

long Balancer::on_idle(Threadpool&, int) {
    if (!enabled() || ranks() < 2) return 0;
    const long period_us = std::max(1L, static_cast<long>(opts_.period_s * 1e6));
    std::unique_lock<std::mutex> lk(step_mutex_, std::try_to_lock);
    if (!lk.owns_lock()) return period_us;  // a step runs: look again later
    idle_calls_.fetch_add(1, std::memory_order_relaxed);
    return policy_->idle(*this) ? period_us : 0;
}

}  // namespace cascade
