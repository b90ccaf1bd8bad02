// Diffusion (PREMA's diffusive policy): a rank whose queued work falls below a limit asks a
// small neighbourhood of ranks for their loads, then asks the most loaded one for objects;
// the neighbourhood is redrawn at random when none has work, and a neighbour that refused
// is replaced. A rank with much more work than the limit also tells a random neighbourhood
// now and then, and a rank with work to spare tells the ranks that asked it for its load
// while it had little, or that it could not give any yet, so that ranks which went quiet
// (nothing found) ask it directly; a rank told of more than twice its own work asks at once,
// before it runs dry. A round goes on by its messages: idle() never asks to be called again.
//
//   cascade::Balancer bal(objs, std::make_unique<cascade::Diffusion>(
//                                   cascade::DiffusionOptions{.limit_s = 0.005}));
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "cascade/balance/detail/incoming.hpp"
#include "cascade/balance/policy.hpp"

namespace cascade {

/// Settings of the Diffusion policy.
struct DiffusionOptions {
    double limit_s = 0.01;  ///< below this much queued work (seconds) a rank asks for more
    /// Nothing moves between two ranks whose loads are closer than this (seconds), nor a
    /// share smaller than a third of it: not worth a migration.
    double min_gap_s = 0.01;
    int neighbours = 4;        ///< neighbourhood size (at most ranks - 1)
    int max_empty_rounds = 3;  ///< an idle rank stops asking after this many fruitless rounds
                               ///< in a row, until it runs handlers or hears of work
    /// A rank with more than announce x limit_s of work tells a random neighbourhood so
    /// (every announce_every steps).
    double announce = 4;
    int announce_every = 8;  ///< steps between two such announcements
};

/// PREMA's diffusive policy (see the top of this file).
class Diffusion final : public BalancePolicy {
  public:
    /// The policy with these settings.
    explicit Diffusion(DiffusionOptions opts = {}) : opts_(opts) {}
    const char* name() const override { return "diffusion"; }
    void balance(Balancer& b) override;
    bool idle(Balancer& b) override;
    void notify(Balancer& b, const ObjectKey& key, double seconds) override;
    void on_message(Balancer& b, int source, const char* data, std::size_t size) override;

  private:
    enum class Phase { quiet, polling, asking };
    struct Msg {
        // 1 load?, 2 load (x, horizon load h) and the most loaded rank we heard of (r, its
        // load now at most y), 3 give me work (x: my load, y: at most this much; z: my cost
        // of a request, d: my devices, l: my recent peak load, hl: my horizon level), 4 given
        // (x, in r objects), 5 I have work (x, horizon load h); in 2 and 5, f and fh: the
        // sender's load floor and horizon floor (Balancer::load_floor); in 5, s and sh: its
        // standing load and horizon load (Balancer::RankLoads), the work it has to spare for
        // a rank that has not run dry
        std::uint8_t kind;
        std::int32_t r;
        double x, y;
        double z = 0;
        std::int32_t d = -1;
        double l = 0;
        double h = 0, hl = 0;
        double f = 0, fh = 0;
        double s = 0, sh = 0;
    };
    void start_round(Balancer& b, double my_load, std::vector<std::pair<int, Msg>>& out);
    // After a fruitless round: the next one, if this rank still has credit and little work.
    void again(Balancer& b, double load, std::vector<std::pair<int, Msg>>& out);
    void draw_neighbours(Balancer& b);
    // Ranks that share one rank's surplus, with the asker: its share of it (see on_message).
    double askers(const Balancer& b) const;
    void replace_neighbour(Balancer& b, int who);
    static void post(Balancer& b, std::vector<std::pair<int, Msg>>& out);
    void learn(Balancer& b, int rank, double load);  // locked: `rank` has `load` now
    double hint_load();  // locked: what the hinted rank has left at most (0: no hint)

    DiffusionOptions opts_;
    std::mutex m_;
    std::mt19937 rng_{12345};
    bool seeded_ = false;
    std::vector<int> neighbours_;
    std::vector<double> loads_;  // each neighbour's load when last heard of
    Phase phase_ = Phase::quiet;
    int replies_ = 0;
    double best_load_ = 0, my_load_ = 0, sum_loads_ = 0, max_load_ = 0;
    double best_near_ = 0;                         // the most loaded neighbour's horizon load
    double best_floor_ = 0, best_near_floor_ = 0;  // and its floors
    // The most loaded rank heard of (announcements, replies): asked directly when it has
    // more than the neighbours, passed on in replies, so that a surplus far away is found.
    int hint_rank_ = -1;
    double hint_load_ = 0;
    std::int64_t hint_ns_ = 0;
    detail::Incoming incoming_;  // no new round until the work a donor gave us arrived
    int best_rank_ = -1;
    int steps_ = 0;
    // Something happened here since the last round (set by notify without the lock).
    std::atomic<bool> credit_{true};
    std::atomic<int> empty_rounds_{0};
    // Ranks that asked for our load while we had little (they may have gone quiet since):
    // told once we have work to spare (at the start, a rank asks before any work is queued).
    std::vector<char> turned_away_;
    bool any_turned_away_ = false;
    std::int64_t told_ns_ = 0;  // when we last told them (at most once per hold_s)
    void turn_away(const Balancer& b, int rank);  // locked
};

}  // namespace cascade
