// The balancing layer: policies that ship with Cascade and the Balancer that runs them.
#include "cascade/balance/balancer.hpp"

#include <chrono>
#include <cstdlib>

namespace cascade {

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

class NoBalancing final : public BalancePolicy {
  public:
    const char* name() const override { return "none"; }
    void balance(Balancer&) override {}
};

class Rotate final : public BalancePolicy {
  public:
    const char* name() const override { return "rotate"; }
    void balance(Balancer& b) override {
        if (b.size() < 2) return;
        for (const auto& o : b.local_objects())
            if (!o.pinned) b.migrate(o.key, (b.rank() + 1) % b.size());
    }
};

}  // namespace

std::unique_ptr<BalancePolicy> make_policy(const std::string& name) {
    if (name.empty() || name == "none") return std::make_unique<NoBalancing>();
    if (name == "rotate") return std::make_unique<Rotate>();
    throw UsageError("balance: unknown policy '" + name + "' (none, rotate)");
}

Balancer::Balancer(Objects& objs, std::unique_ptr<BalancePolicy> policy, BalanceOptions opts)
    : objs_(objs), policy_(std::move(policy)), opts_(opts), enabled_(opts.enabled) {
    if (!policy_) {
        const char* env = std::getenv("CASCADE_BALANCE");
        policy_ = make_policy(env ? env : "none");
    }
    msg_ = objs.comm().make_active_msg(
        [this](std::int32_t& source, view<char>& v) {
            policy_->on_message(*this, source, v.data(), v.size());
        },
        "balance.message");
    objs_.set_observer(this);
}

Balancer::~Balancer() {
    objs_.set_observer(nullptr);
}

void Balancer::migrate(const ObjectKey& k, int dest) {
    migrations_.fetch_add(1, std::memory_order_relaxed);
    objs_.rebalance(k, dest);
}

void Balancer::send(int dest, const char* data, std::size_t size) {
    msg_->send(dest, std::int32_t(rank()), view<char>(const_cast<char*>(data), size));
}

void Balancer::after_handler(const ObjectKey& key, double seconds) {
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
    policy_->balance(*this);
}

}  // namespace cascade
