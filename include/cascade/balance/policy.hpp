// BalancePolicy: how a rank decides which of its mobile objects to move where (the shape of
// PREMA's ilb::scheduler). A Balancer calls it; a policy only decides, the objects layer keeps
// every guarantee (ordering, exclusivity, exactly once, completion) whatever it asks.
//
//   struct Rotate : cascade::BalancePolicy {              // every object moves at every step
//       const char* name() const override { return "rotate"; }
//       void balance(cascade::Balancer& b) override {
//           for (const auto& o : b.local_objects())
//               if (!o.pinned) b.rebalance(o.key, (b.rank() + 1) % b.ranks());
//       }
//   };
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cascade/objects/mobile_ptr.hpp"

namespace cascade {

class Balancer;

/// How a rank decides which of its mobile objects to move where (see the top of this file).
/// Derive from it and override balance() (and idle(), notify(), on_message() as needed).
class BalancePolicy {
  public:
    virtual ~BalancePolicy() = default;
    /// For diagnostics and CASCADE_BALANCE.
    virtual const char* name() const = 0;
    /// The periodic balancing step (PREMA's dist_balance): on a worker of this rank, at most
    /// one at a time, every BalanceOptions::period_s while handlers run here. May read the
    /// loads, migrate local objects and send policy messages.
    virtual void balance(Balancer& b) = 0;
    /// A worker of this rank found nothing to do (PREMA's pop on an empty pool): the time to
    /// ask other ranks for work. Return true to be called again one period later while the
    /// rank stays idle; the rank then counts as busy (join() waits), so return false once
    /// there is nothing left to ask for. One call at a time, never during balance().
    virtual bool idle(Balancer& b) {
        (void)b;
        return false;
    }
    /// A handler ran on `key` for `seconds` (PREMA's notify): the object's load changed.
    virtual void notify(Balancer& b, const ObjectKey& key, double seconds) {
        (void)b, (void)key, (void)seconds;
    }
    /// A message another rank's policy sent with Balancer::send (communication thread).
    virtual void on_message(Balancer& b, int source, const char* data, std::size_t size) {
        (void)b, (void)source, (void)data, (void)size;
    }
};

/// Policies that ship with Cascade, by name: "none" (never moves anything), "rotate" (every
/// unpinned object moves to the next rank at every step: tests pack, unpack and ordering
/// under constant migration), "diffusion" and "master_worker" (with their default options;
/// see diffusion.hpp and master_worker.hpp). Throws UsageError for another name.
std::unique_ptr<BalancePolicy> make_policy(const std::string& name);

}  // namespace cascade
