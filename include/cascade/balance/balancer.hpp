// Balancer: runs a BalancePolicy over the mobile objects of one Objects (PREMA's implicit load
// balancing layer). The policy comes from the code or from CASCADE_BALANCE=none|rotate.
//
//   cascade::Objects objs(tp, comm);
//   cascade::Balancer bal(objs, cascade::make_policy("rotate"), {.period_s = 0.001});
//   objs.pin(p);            // balancing leaves p where it is
//   bal.enable(false);      // and on again with enable(true), while running
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cascade/balance/policy.hpp"
#include "cascade/objects/objects.hpp"

namespace cascade {

struct BalanceOptions {
    double period_s = 0.002;  ///< between two balancing steps on a rank
    bool enabled = true;
};

class Balancer final : private ObjectsObserver {
  public:
    /// Same point on every rank (registers a message). `policy` null: from CASCADE_BALANCE
    /// (default "none").
    Balancer(Objects& objs, std::unique_ptr<BalancePolicy> policy = nullptr,
             BalanceOptions opts = {});
    Balancer(const Balancer&) = delete;
    Balancer& operator=(const Balancer&) = delete;
    ~Balancer() override;

    /// Switches balancing on or off (any thread, any time).
    void enable(bool on) noexcept { enabled_.store(on, std::memory_order_release); }
    bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }
    BalancePolicy& policy() noexcept { return *policy_; }

    // ---- for policies --------------------------------------------------------------------
    int rank() const noexcept { return objs_.rank(); }
    int size() const noexcept { return objs_.size(); }
    Objects& objects() noexcept { return objs_; }
    /// The objects living here with their loads, and their sum.
    std::vector<ObjectLoad> local_objects() const { return objs_.local_objects(); }
    double rank_load() const { return objs_.rank_load(); }
    /// Moves an object to `dest` unless it is pinned when the request reaches it.
    void migrate(const ObjectKey& k, int dest);
    /// Sends bytes to the policy of rank `dest` (its on_message).
    void send(int dest, const char* data, std::size_t size);

    /// Balancing steps run on this rank, and migrations they asked for.
    std::uint64_t steps() const noexcept { return steps_.load(); }
    std::uint64_t migrations() const noexcept { return migrations_.load(); }

  private:
    void after_handler(const ObjectKey& key, double seconds) override;

    Objects& objs_;
    std::unique_ptr<BalancePolicy> policy_;
    BalanceOptions opts_;
    std::atomic<bool> enabled_;
    ActiveMsg<std::int32_t, view<char>>* msg_ = nullptr;
    std::mutex step_mutex_;  // one step at a time
    std::atomic<std::int64_t> last_step_ns_{0};
    std::atomic<std::uint64_t> steps_{0}, migrations_{0};
};

}  // namespace cascade
