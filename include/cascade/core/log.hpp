// Cascade's messages to stderr: one function, a level chosen by CASCADE_LOG
// (error|warn|info|debug, default warn), and a rank prefix on every line so that the output
// of many ranks interleaved by mpiexec still says who wrote what:
//   cascade: rank 3: warning: 2 message(s) arrived after the last join()
#pragma once

#include <string_view>

namespace cascade::log {

/// How much Cascade writes to stderr; each level includes the ones before it.
enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

/// The level from CASCADE_LOG (read once; a bad value is reported and the default kept).
Level level() noexcept;

/// Sets the level for the rest of the run (overrides CASCADE_LOG).
void set_level(Level l) noexcept;

/// Whether messages at level l are written.
inline bool enabled(Level l) noexcept {
    return static_cast<int>(l) <= static_cast<int>(level());
}

/// The rank named in the prefix. The Communicator sets it; before that (or without MPI) it
/// is read from the launcher's environment (Open MPI, MPICH/PMI, PMIx, Slurm), else unknown.
void set_rank(int rank) noexcept;
/// The rank named in the prefix, or -1 when unknown.
int rank() noexcept;

/// Writes msg at level l when that level is enabled: each line of msg gets the prefix
/// "cascade: rank R: <level>: " (without the rank part when it is unknown). One write
/// call, so lines of different threads do not mix.
void write(Level l, std::string_view msg) noexcept;

/// write(Level::error, msg).
inline void error(std::string_view msg) noexcept {
    write(Level::error, msg);
}
/// write(Level::warn, msg).
inline void warn(std::string_view msg) noexcept {
    write(Level::warn, msg);
}
/// write(Level::info, msg).
inline void info(std::string_view msg) noexcept {
    write(Level::info, msg);
}
/// write(Level::debug, msg).
inline void debug(std::string_view msg) noexcept {
    write(Level::debug, msg);
}

}  // namespace cascade::log
