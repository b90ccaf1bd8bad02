// The policies that ship with Cascade, by name (make_policy), and the two simplest ones.
#include <memory>

#include "cascade/balance/balancer.hpp"
#include "cascade/balance/diffusion.hpp"
#include "cascade/balance/master_worker.hpp"

namespace cascade {

namespace {

class NoBalancing final : public BalancePolicy {
  public:
    const char* name() const override { return "none"; }
    void balance(Balancer&) override {}
};

class Rotate final : public BalancePolicy {
  public:
    const char* name() const override { return "rotate"; }
    void balance(Balancer& b) override {
        if (b.ranks() < 2) return;
        for (const auto& o : b.local_objects())
            if (!o.pinned) b.rebalance(o.key, (b.rank() + 1) % b.ranks());
    }
};

}  // namespace

std::unique_ptr<BalancePolicy> make_policy(const std::string& name) {
    if (name.empty() || name == "none") return std::make_unique<NoBalancing>();
    if (name == "rotate") return std::make_unique<Rotate>();
    if (name == "diffusion") return std::make_unique<Diffusion>();
    if (name == "master_worker") return std::make_unique<MasterWorker>();
    throw UsageError("balance: unknown policy '" + name +
                     "' (none, rotate, diffusion, master_worker)");
}

}  // namespace cascade
