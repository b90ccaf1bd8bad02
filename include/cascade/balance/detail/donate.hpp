// What the shipped policies do when a rank asks this one for work: move objects so that the
// two loads come closer, never so that the asker ends up above this rank.
#pragma once

namespace cascade {
class Balancer;
}

namespace cascade::detail {

/// Migrates local objects to rank `to`, whose load is `their_load` (seconds of queued work),
/// largest first while the asker stays at or below half the gap; if none fits, the one object
/// that brings the two loads closest, if it lowers the larger one. Returns the work given.
double donate(Balancer& b, int to, double their_load);

}  // namespace cascade::detail
