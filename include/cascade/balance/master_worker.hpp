// Master-worker (PREMA's master-worker policy): one rank, the master, keeps the table of
// every rank's load, which ranks report as it changes; a rank whose queued work falls below
// a limit asks the master, which tells the most loaded rank to send it objects, or keeps it
// waiting until a rank reports work to spare.
//
//   cascade::Balancer bal(objs, std::make_unique<cascade::MasterWorker>(
//                                   cascade::MasterWorkerOptions{.master = 0}));
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "cascade/balance/detail/incoming.hpp"
#include "cascade/balance/policy.hpp"

namespace cascade {

/// Settings of the MasterWorker policy.
struct MasterWorkerOptions {
    double limit_s = 0.01;  ///< below this much queued work (seconds) a rank asks the master
    int master = 0;         ///< the rank that keeps the load table
    double report = 0.25;   ///< a rank reports its load when it (or its standing load,
                            ///< Balancer::RankLoads) changed by this fraction
};

/// PREMA's master-worker policy (see the top of this file).
class MasterWorker final : public BalancePolicy {
  public:
    /// The policy with these settings (every rank must give the same master).
    explicit MasterWorker(MasterWorkerOptions opts = {}) : opts_(opts) {}
    const char* name() const override { return "master_worker"; }
    void balance(Balancer& b) override;
    bool idle(Balancer& b) override;
    void notify(Balancer& b, const ObjectKey& key, double seconds) override;
    void on_message(Balancer& b, int source, const char* data, std::size_t size) override;

  private:
    struct Msg {
        // 1 load report (x), 2 ask for work (x: load), 3 give `rank` work (x: its load, y: at
        // most this much), 4 work given (x, in y objects), 5 could not give `rank` work (x:
        // load); z and d: in 1 and 2 the sender's cost of a request and its devices, in 3
        // those of `rank`; l and hl: in 1 and 2 the sender's recent peak load and horizon
        // level, in 3 those of `rank`; h: in 1 and 2 the sender's horizon load; f and fh: in
        // 1 and 2 the sender's load floor and horizon floor (Balancer::load_floor); s and sh:
        // in 1, 2 and 5 the sender's standing load and horizon load (Balancer::RankLoads)
        std::uint8_t kind;
        std::int32_t rank;
        double x, y;
        double z = 0;
        std::int32_t d = -1;
        double l = 0;
        double h = 0, hl = 0;
        double f = 0, fh = 0;
        double s = 0, sh = 0;
    };
    using Out = std::vector<std::pair<int, Msg>>;
    void step(Balancer& b, bool from_idle);
    void serve(const Balancer& b, Out& out);  // master, locked: match waiting ranks with
                                              // loaded ones
    // Master, locked: the least loaded rank not waiting, if the rank with the most standing
    // load (work passing through left out) has more than balanced_ratio times its load and
    // horizon load, is given its share before it runs dry.
    void serve_early(const Balancer& b, Out& out);
    // Master, locked: tells `donor` to give rank `to` (load `to_load` when it asked, recent
    // peak loads `level` and `near_level`) `want` seconds of work, and counts it as moved.
    void promise(int donor, int to, double to_load, double want, double level, double near_level,
                 const char* how, Out& out);
    // Master, locked: a rank's recent peak load and horizon level, faded to `now`.
    std::pair<double, double> levels(const Balancer& b, int rank, std::int64_t now) const;
    static void post(Balancer& b, Out& out);

    MasterWorkerOptions opts_;
    std::mutex m_;
    // Every rank.
    bool waiting_ = false;  // asked the master, no answer yet
    double reported_ = -1;
    double reported_standing_ = 0;    // the standing load reported with it
    std::int64_t again_ns_ = 0;       // could not give: report again from then on (0: no)
    double asked_load_ = 0;           // our load when we last asked
    detail::Incoming incoming_;       // no new request until the work a donor gave us arrived
    std::atomic<bool> credit_{true};  // handlers ran since the last request
    // The master.
    std::vector<double> table_;
    std::vector<double> asked_;           // a waiting rank's load when it asked
    std::vector<double> level_;           // each rank's recent peak load (Balancer::load_level)
    std::vector<double> near_;            // each rank's horizon load (Balancer::horizon_load)
    std::vector<double> near_level_;      // and its horizon level
    std::vector<double> floor_;           // each rank's load floor (Balancer::load_floor)
    std::vector<double> near_floor_;      // and its horizon floor
    std::vector<double> standing_;        // each rank's standing load (Balancer::RankLoads)
    std::vector<double> near_standing_;   // and its standing horizon load
    std::vector<std::int64_t> level_ns_;  // when it last told it
    std::vector<double> promised_;        // work a donor was told to give it, not yet confirmed
    std::vector<double> request_s_;  // each rank's cost of a request (Balancer::request_seconds)
    std::vector<int> devices_;       // each rank's devices (Balancer::devices)
    std::vector<std::int64_t> refused_until_ns_;  // refused to give: not asked again till then
    std::deque<int> queue_;                       // ranks waiting for work
};

}  // namespace cascade
