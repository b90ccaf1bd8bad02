// Balancer: runs a BalancePolicy over the mobile objects of one Objects (PREMA's implicit load
// balancing layer). The policy comes from the code or from
// CASCADE_BALANCE=none|rotate|diffusion|master_worker.
//
//   cascade::Objects objs(tp, comm);
//   cascade::Balancer bal(objs, cascade::make_policy("diffusion"), {.period_s = 0.002});
//   objs.pin(p);            // balancing leaves p where it is
//   bal.enable(false);      // and on again with enable(true), while running
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cascade/balance/detail/device_work.hpp"
#include "cascade/balance/policy.hpp"
#include "cascade/core/idle_hook.hpp"
#include "cascade/objects/objects.hpp"

namespace cascade {

/// Settings of a Balancer.
struct BalanceOptions {
    double period_s = 0.002;  ///< between two balancing steps on a rank
    bool enabled = true;      ///< balancing starts switched on (see Balancer::enable)
    /// Work estimate of one queued request on an object that never ran a handler, when no
    /// object of this rank did either (seconds).
    double default_request_s = 0.001;
    /// An object that came to this rank (or was created here) stays at least this long
    /// before the shipped policies give it away: no ping-pong (seconds).
    double hold_s = 0.02;
    /// The work a chain generates beyond its queued request: an object whose requests its own
    /// handler issues (ObjectLoad::chained; each step invokes the next) counts its demand
    /// (ObjectLoad::demand) times this many more of its handlers. 0: no projection.
    double horizon_handlers = 4;
    /// The work a rank's objects generate, as a whole: its workers' busy-time rate with
    /// handlers that issue requests (ObjectLoad::busy_rate x issuing) times this long, where
    /// that is more than the chains' projections (a fan-out, where each handler invokes
    /// another object, leaves each object idle between requests).
    double horizon_s = 0.02;
    /// A rank's recent peak load (Balancer::load_level): its highest load over about this
    /// long (older peaks fade exponentially; seconds).
    double level_s = 0.1;
    /// Loads within this ratio are balanced: the shipped policies move work to a rank only
    /// while the donor's load is more than this many times the asker's recent peak load (a
    /// queue that empties for a moment, chains ending a little apart are not an imbalance).
    /// 0: compare the loads of the moment only.
    double balanced_ratio = 1.5;
    /// An imbalance found goes on being moved down to this ratio: a rank that gave work within
    /// the last level_s, and whose chains' load and horizon load stayed above this many times
    /// the asker's recent peak load and horizon level for the last sustain_s (its floors:
    /// Balancer::load_floor), gives within balanced_ratio too (chains whose rates differ by
    /// a third keep their ranks apart for the rest of the run). Only the work of chains counts
    /// in the floors (objects whose requests their own handler issues, device work, loads from
    /// a load function): queues filled from elsewhere, a fan-out's, come and go with the
    /// other ranks' pace, and a rank made of them gives within balanced_ratio to nobody. A
    /// rank whose load never passed balanced_ratio times an asker's level gives nothing.
    /// 0: balanced_ratio alone.
    double sustained_ratio = 0;
    /// How long a load must stay above sustained_ratio times the asker's level (seconds).
    double sustain_s = 0.05;
};

/// Runs a BalancePolicy over the mobile objects of one Objects (see the top of this file):
/// periodic steps while handlers run, idle calls when workers find nothing to do, and the
/// policy's messages. Its members may be called from any thread.
class Balancer final : private ObjectsObserver, private IdleHook {
  public:
    /// Same point on every rank (registers a message), before the work starts. `policy`
    /// null: from CASCADE_BALANCE (default "none").
    Balancer(Objects& objs, std::unique_ptr<BalancePolicy> policy = nullptr,
             BalanceOptions opts = {});
    Balancer(const Balancer&) = delete;
    Balancer& operator=(const Balancer&) = delete;
    ~Balancer() override;

    /// Switches balancing on or off (any thread, any time). Off: no step runs and this rank
    /// moves none of its objects.
    void enable(bool on) noexcept { enabled_.store(on, std::memory_order_release); }
    /// Whether balancing is on (see enable).
    bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }
    /// The policy that decides (given, or chosen by CASCADE_BALANCE).
    BalancePolicy& policy() noexcept { return *policy_; }
    /// The options given to the constructor.
    const BalanceOptions& options() const noexcept { return opts_; }

    // ---- for policies --------------------------------------------------------------------
    /// This rank.
    int rank() const noexcept { return objs_.rank(); }
    /// The number of ranks.
    int ranks() const noexcept { return objs_.ranks(); }
    /// The objects layer being balanced.
    Objects& objects() noexcept { return objs_; }
    /// The objects living here with their loads (Objects::local_objects).
    std::vector<ObjectLoad> local_objects() const { return objs_.local_objects(); }
    /// The sum of their loads (Objects::rank_load).
    double rank_load() const { return objs_.rank_load(); }
    /// Estimated work left on each object (seconds): the user's load where the type has a
    /// load function (Objects::set_load); else its queued requests (the one running
    /// included) plus chained x demand x horizon_handlers, times its recent handler time
    /// (this rank's average, or default_request_s, for an object that never ran one); where
    /// the rank's busy-time rate with issuing handlers x horizon_s is more than the sum of
    /// those projections, the difference is shared by that rate. Only objects with a request
    /// project. Device work counts too (<cascade/balance/device.hpp>): an object's cost adds
    /// its device time per task measured here (divided by the rank's devices of that kind; an
    /// object not measured here yet: the mean of those measured here), its device tasks in
    /// flight count as work of this rank, and an object with device work counts as a chain
    /// while it has a request or a device task in flight (its next request usually comes
    /// when its device work ends). 0 for an object a balancing migration is taking away.
    std::vector<double> work_left(const std::vector<ObjectLoad>& objs) const;
    /// As above; `movable` (if given) gets the part of each that would move with the object
    /// (all but its device tasks already submitted here, which finish here), and `horizon`
    /// (if given) the sum of their horizon loads (see horizon_load).
    std::vector<double> work_left(const std::vector<ObjectLoad>& objs, std::vector<double>* movable,
                                  double* horizon = nullptr) const;
    /// The sum over the objects living here: this rank's load as the policies see it (each
    /// call also updates load_level()); `horizon` (if given) gets its horizon load.
    double work_left(double* horizon = nullptr) const;
    /// This rank's loads at once (see loads()).
    struct RankLoads {
        double load = 0;     ///< work_left()
        double horizon = 0;  ///< horizon_load()
        /// The part of `load` that stays here: all but the work passing through, the requests
        /// queued on objects whose handlers pass work on to other objects (of each object's
        /// work, the share of ObjectLoad::issuing beyond its `chained`, over `issuing`: 1 for a
        /// fan-out's object, whose requests come from other objects' handlers and go on to
        /// others; 0 for a chain's, whose two shares grow alike, and for one whose handlers
        /// issue nothing; device tasks in flight stay). Such a queue grows and drains at the
        /// pace of the ranks around it:
        /// the ranks of a ring of objects with twice as many requests queued on some as on
        /// others all stay busy, and none runs dry before the end.
        double standing = 0;
        double standing_horizon = 0;  ///< the same part of `horizon`
    };
    /// work_left(), horizon_load() and the standing part of both, from one look at the objects
    /// (it updates load_level() as work_left() does).
    RankLoads loads() const;
    /// This rank's horizon load: work_left() with each object's requests, queued and
    /// projected, counted up to 1 + horizon_handlers of them (a user's load, device tasks in
    /// flight and the rank's share of the work its handlers generate count whole). A queue of
    /// twenty requests and a chain with twenty steps to come keep a worker busy at the same
    /// rate, but only the queue's length is known: the shipped policies compare horizon loads
    /// to tell whether two ranks are balanced (a donor's against the asker's horizon level,
    /// as well as their loads: see load_level), and move work by work_left().
    double horizon_load() const;
    /// This rank's recent peak load: the highest work_left() seen over about level_s (older
    /// values fade exponentially). A rank whose queue empties for a moment, or whose chains
    /// just ended, keeps its level for a while: a donor compares its own load with it.
    /// `horizon` (if given) gets the same of horizon_load(), the horizon level: a donor gives
    /// only while its load is more than BalanceOptions::balanced_ratio times the asker's
    /// level and its horizon load more than that times the asker's horizon level.
    double load_level(double* horizon = nullptr) const;
    /// This rank's load floor: the lowest chains' part of work_left() over the last
    /// BalanceOptions::sustain_s (the work of objects whose requests their own handler issues,
    /// weighed by ObjectLoad::chained, of objects with device work and of a load function's),
    /// if this rank started a balancing migration within the last level_s (else 0; 0 until
    /// work_left() has been called over sustain_s, and always 0 with sustained_ratio 0, when
    /// no samples are kept); `horizon` (if given) gets the same of horizon_load(). A donor
    /// whose floors pass sustained_ratio times the asker's levels has an imbalance that
    /// lasts, and gives.
    double load_floor(double* horizon = nullptr) const;
    /// The mean cost of one request here (handler time plus device time per task), over the
    /// objects that ran a handler; 0 when none did. Ranks with different devices compare it
    /// to tell how fast each runs the same work (see detail/donate.hpp).
    double request_seconds() const;
    /// The same over `objs` (from local_objects()).
    double request_seconds(const std::vector<ObjectLoad>& objs) const;

    // ---- device work (counted by <cascade/balance/device.hpp>) ---------------------------
    /// The device work of the objects here: device tasks their handlers submitted, in flight
    /// and measured (shared: a task finishing after this Balancer went updates it harmlessly).
    const std::shared_ptr<detail::DeviceWork>& device_work() const noexcept { return device_work_; }
    /// Accelerators of this rank, as counted by count_devices() (0: none, or not told).
    int devices() const noexcept { return device_work_->devices(); }
    /// How long each object has lived here (seconds), as far as this Balancer has seen: from
    /// the first call that listed it (objects that arrive are seen at the next balancing step
    /// or request at the latest).
    std::vector<double> here_for(const std::vector<ObjectLoad>& objs);
    /// Objects seen arriving here so far (by here_for, which every balancing step calls;
    /// objects created here count too).
    std::uint64_t arrivals() const noexcept { return arrivals_.load(); }
    /// Moves a local object to `dest` ahead of the requests queued on it (they go with it),
    /// after the handlers running on it. False, and nothing happens, if it does not live
    /// here, is pinned, is already moving, or balancing is off.
    bool rebalance(const ObjectKey& k, int dest);
    /// Sends bytes to the policy of rank `dest` (its on_message; `dest` may be this rank).
    void send(int dest, const char* data, std::size_t size);

    /// Balancing steps run on this rank so far.
    std::uint64_t steps() const noexcept { return steps_.load(); }
    /// Calls of the policy's idle() on this rank so far.
    std::uint64_t idle_calls() const noexcept { return idle_calls_.load(); }
    /// Migrations this rank's policy started so far.
    std::uint64_t migrations() const noexcept { return migrations_.load(); }

  private:
    void after_handler(const ObjectKey& key, double seconds) override;
    long on_idle(Threadpool& tp, int worker) override;

    Objects& objs_;
    std::unique_ptr<BalancePolicy> policy_;
    BalanceOptions opts_;
    std::atomic<bool> enabled_;
    ActiveMsg<std::int32_t, view<char>>* msg_ = nullptr;
    // This balancer while it lives, null after: the message above belongs to the
    // Communicator, which outlives it, and a message a peer sent late is then dropped.
    std::shared_ptr<std::atomic<Balancer*>> alive_;
    std::mutex step_mutex_;  // one step (or idle call) at a time
    std::atomic<std::int64_t> last_step_ns_{0};
    std::atomic<std::uint64_t> steps_{0}, idle_calls_{0}, migrations_{0}, arrivals_{0};
    std::atomic<std::int64_t> gave_ns_{0};  // the last balancing migration started here
    mutable std::mutex level_mutex_;
    mutable double level_ = 0, near_level_ = 0;  // load_level() as of level_ns_
    mutable std::int64_t level_ns_ = 0;
    double level_at(double level, std::int64_t now) const;  // locked: `level` faded to now
    struct ChainLoads {
        double load = 0, near = 0;             // the chains' part of work_left() and horizon_load()
        double through = 0, through_near = 0;  // the part passing through (see RankLoads)
    };
    std::vector<double> work_left(const std::vector<ObjectLoad>& objs, std::vector<double>* movable,
                                  double* horizon, ChainLoads* chains) const;
    struct LoadSample {
        std::int64_t ns;
        double load, near;
    };
    // The chains' part of work_left() over the last sustain_s, and the one before (its value
    // at the start).
    mutable std::deque<LoadSample> samples_;
    std::mutex seen_mutex_;
    std::unordered_map<ObjectKey, std::int64_t> seen_ns_;  // local object -> first seen here
    std::shared_ptr<detail::DeviceWork> device_work_ = std::make_shared<detail::DeviceWork>();
};

}  // namespace cascade
