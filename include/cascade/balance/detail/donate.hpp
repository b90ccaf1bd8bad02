// What the shipped policies do when a rank asks this one for work: move objects so that the
// two loads come closer, never so that the asker ends up above this rank, and only when the
// move is worth a migration.
#pragma once

namespace cascade {
class Balancer;
struct BalanceOptions;
}  // namespace cascade

namespace cascade::detail {

/// What an asker wants from a donor.
struct Ask {
    double load = 0;     ///< the asker's queued work (seconds)
    double want = 1e30;  ///< at most this much work (its share, as far as it knows)
    double min_gap = 0;  ///< below this difference of loads nothing is worth moving
    /// The asker's mean cost of one request (Balancer::request_seconds; 0: unknown) and its
    /// accelerators (Balancer::devices; -1: unknown). Where its devices differ from the
    /// donor's, the two costs tell how much longer (or shorter) the same work takes there.
    double request_s = 0;
    int devices = -1;
    /// The asker's recent peak load (Balancer::load_level; 0: none). The donor gives only
    /// while its load is more than BalanceOptions::balanced_ratio times it.
    double level = 0;
    /// The same of the asker's horizon load (Balancer::load_level's `horizon`; 0: none). The
    /// donor gives only while its horizon load is more than balanced_ratio times it: a queue
    /// here and chains there that keep their workers busy at the same rate are balanced.
    double horizon_level = 0;
};

/// A donor's loads as the shipped policies compare them: its load and horizon load now, and
/// their floors (Balancer::load_floor; 0: unknown).
struct DonorLoads {
    double load = 0, horizon = 0;
    double floor = 0, horizon_floor = 0;
};

/// Whether a donor with loads `d` and an asker with recent peak load `level` and horizon level
/// `horizon_level` count as balanced: the donor's load is at most BalanceOptions::balanced_ratio
/// times the asker's level or its horizon load at most that times the asker's horizon level,
/// unless its floors stayed above sustained_ratio times them (an imbalance that lasts). False
/// with balanced_ratio 0.
bool balanced(const BalanceOptions& o, const DonorLoads& d, double level, double horizon_level);

/// What a donor gave.
struct Gift {
    double work = 0;  ///< seconds of queued work, as the asker will run it
    int objects = 0;  ///< objects migrated
};

/// Migrates local objects to rank `to`, if this rank's load is more than
/// BalanceOptions::balanced_ratio times the asker's recent peak load (ask.level) and its
/// horizon load (Balancer::horizon_load) more than that times the asker's horizon level
/// (ask.horizon_level), or its floors (Balancer::load_floor) more than sustained_ratio times
/// them (see balanced): largest
/// first while the asker stays at or below the donor and within `ask.want`; if none fits, the one
/// object that brings the two loads closest, if that gains at least half of `ask.min_gap`. Gives
/// only objects whose work is measured (a handler ran on them, or the type has a load function),
/// that have lived here for the Balancer's hold_s, and never the last object with queued work, nor
/// device tasks already submitted here. Work given counts at the asker as `speed` = ask.request_s /
/// this rank's request cost when their devices differ (a rank with a device runs device work
/// faster), else 1: so the donor gives at most gap / (1 + speed) of its own work (half the gap
/// between alike ranks).
Gift donate(Balancer& b, int to, const Ask& ask);

}  // namespace cascade::detail
