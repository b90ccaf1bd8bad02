// How the broadcast layer plugs into the layers below it when its library is linked: every
// Communicator makes its Broadcasts here (comm's detail::set_broadcasts_factory), and the
// layer's settings join the table (settings::add). Cascade::broadcast's link interface names
// cascade_layer_broadcast (-u), so a program that links the library gets this file even from
// a static archive.
#include <cstdint>
#include <memory>

#include "cascade/broadcast/detail/engine.hpp"
#include "cascade/core/settings.hpp"

namespace cascade::broadcast::detail {
namespace {

// Keep in step with the README's settings table (a test compares them).
constexpr settings::Variable kVariables[] = {
    {"CASCADE_BCAST", "1 or 0 (also on/off, true/false, yes/no)", "1",
     "broadcast detection: one payload sent from one task to several ranks travels as a tree "
     "broadcast"},
    {"CASCADE_BCAST_SHAPE", "automatic, binomial or pipelined", "automatic",
     "the tree of large broadcasts; automatic: binomial below CASCADE_BCAST_PIPELINE bytes, a "
     "pipelined chain from there"},
    {"CASCADE_BCAST_PIPELINE", "a whole number of bytes from 0 to 1099511627776", "1048576",
     "large broadcasts from this size on (and with at least 2 recipients) go as a pipelined "
     "chain when the shape is automatic"},
    {"CASCADE_BCAST_PIECE", "a whole number of bytes from 0 to 1099511627776", "0",
     "the piece size of pipelined broadcasts; 0: bytes/32 within [64 KiB, 1 MiB]"},
    {"CASCADE_BCAST_WINDOW", "a whole number of bytes from 0 to 1099511627776", "262144",
     "the bytes of pieces a node of a pipelined broadcast has in flight to its child at most "
     "(whole pieces, at least one); 0: no limit"},
};

void check() {
    settings::flag("CASCADE_BCAST", true);
    settings::choice("CASCADE_BCAST_SHAPE", 0, kShapeNames);
    settings::count("CASCADE_BCAST_PIPELINE", 0, 0, kBytesMax);
    settings::count("CASCADE_BCAST_PIECE", 0, 0, kBytesMax);
    settings::count("CASCADE_BCAST_WINDOW", 0, 0, kBytesMax);
}

std::unique_ptr<Broadcasts> make(Communicator& comm) {
    return std::make_unique<Engine>(comm);
}

[[maybe_unused]] const bool g_installed = [] {
    settings::add(kVariables, &check);
    cascade::detail::set_broadcasts_factory(&make);
    return true;
}();

}  // namespace
}  // namespace cascade::broadcast::detail

// See the top of this file.
extern "C" void cascade_layer_broadcast() noexcept {}
