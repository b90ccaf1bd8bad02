// The shape of a dynamic broadcast (dynamic broadcasts paper, §3.2). Only the root knows every
// recipient: it arranges them into a list, and each message of the broadcast carries the
// sub-list its receiver forwards to. Every node splits the sub-list it got by the same rule,
// so nothing else travels and no rank needs to know the others beforehand.
//
// A node holding a list of m recipients sees them at positions 1..m (itself at 0):
//   binomial   children at positions 2^j (largest first); the child at 2^j forwards to
//              positions 2^j+1 .. min(2^(j+1), m+1)-1. Everyone has the data after
//              ceil(log2(m+1)) steps. Root 0 with recipients 1..6 sends 4 {5,6}, 2 {3}, 1 {}.
//   chain      one child, position 1, which forwards to positions 2..m (the pipelined shape:
//              every node forwards each piece while the next one is arriving).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cascade::broadcast {

/// How a node splits its sub-list (see the top of this file).
enum class Shape : std::uint32_t {
    binomial = 0,  ///< Children at positions 2^j, largest first.
    pipelined = 1  ///< One child, which forwards to the rest (a chain: pipelined bodies).
};

/// One entry of a sub-list, as it travels in message headers.
struct Recipient {
    std::int32_t rank;  ///< The receiving rank.
    float priority;     ///< Its priority (higher: placed to receive earlier).
    /// Reached through an inner node: the number of the root's own messages to this rank
    /// that were queued before the broadcast (it runs the broadcast after those).
    std::uint64_t after = 0;
};

/// A child of a node: the recipient at list[at], forwarding to list[at+1 .. at+1+count).
struct Child {
    std::size_t at;     ///< Index of the child in the node's list.
    std::size_t count;  ///< Entries after it that the child forwards to.
};

/// The children of a node holding `m` recipients, in the order it sends to them.
void children(Shape shape, std::size_t m, std::vector<Child>& out);

/// steps[p]: the step at which position p (1..m) receives, counting the root's first send as
/// step 1 and each send of a node as one step (a node sends to its children one after another).
void arrival_steps(Shape shape, std::size_t m, std::vector<std::size_t>& steps);

/// The root's list: ranks placed at positions so that higher priorities get earlier arrival
/// steps. Ties keep the given order rotated left by `rotation`, so that successive broadcasts
/// make different ranks inner nodes; with equal priorities and rotation 0 the list is the
/// given order (position i+1 holds ranks[i]). `priorities` is empty or one per rank.
void arrange(Shape shape, std::span<const int> ranks, std::span<const double> priorities,
             std::size_t rotation, std::vector<Recipient>& out);

}  // namespace cascade::broadcast
