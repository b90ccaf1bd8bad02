// Completion: one rank's side of distributed completion detection, TaskTorrent's COUNT /
// REQUEST / CONFIRMATION / SHUTDOWN protocol, with two ways to end an epoch after one round of
// COUNTs (every rank quiet; every channel balanced) (docs/design/completion.md states it and
// why it is correct). A state machine without MPI: the Communicator feeds it the control messages
// it receives (on_ctrl) and, at each poll of join(), whether this rank is idle with its
// counts (step); it sends what the protocol says through the function it was given. One
// epoch per join(): next_epoch() starts the next one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cascade/comm/detail/constants.hpp"

namespace cascade::detail {

/// One control message (MPI tag of its own; a COUNT with channel counts is longer).
struct CtrlMsg {
    /// COUNT(q, p, flags): a rank's counts, to rank 0; flags: kQuiet when they are still those
    /// the rank had when the epoch began (it queued and ran no message since), kChannels when
    /// `ch` holds its counts per channel. REQUEST(q, p, tag): rank 0 asks whether a rank's
    /// counts are still (q, p). CONFIRM(tag): they are. SHUTDOWN: the epoch is over.
    /// ABORT: the sender ends the job (a trace is recorded): write your events, then ABORT_ACK
    /// (both handled by the Communicator, outside the protocol).
    enum Type : std::uint32_t { COUNT = 1, REQUEST, CONFIRM, SHUTDOWN, ABORT, ABORT_ACK };
    /// COUNT's flags (in c).
    static constexpr std::uint64_t kQuiet = 1, kChannels = 2;
    std::uint32_t type;   ///< A Type.
    std::uint32_t epoch;  ///< The sender's epoch.
    std::uint64_t a, b, c;
    /// A COUNT with kChannels, of a job of n ranks: ch[d] messages the sender queued for rank
    /// d, ch[n + s] messages from rank s it processed (n <= kChannelRanks); only those 2n
    /// travel.
    std::uint64_t ch[2 * comm::kChannelRanks];
};

/// The bytes of `m` that travel, in a job of `ranks` ranks.
inline std::size_t ctrl_bytes(const CtrlMsg& m, int ranks) noexcept {
    const bool channels =
        m.type == CtrlMsg::COUNT && (m.c & CtrlMsg::kChannels) != 0 && ranks <= comm::kChannelRanks;
    return offsetof(CtrlMsg, ch) +
           (channels ? 2 * static_cast<std::size_t>(ranks) * sizeof(std::uint64_t) : 0);
}

/// The protocol's state on one rank (rank 0 also gathers the counts of all ranks).
class Completion {
  public:
    using Clock = std::chrono::steady_clock;
    /// After the first COUNT of an epoch, a rank sends the next one once it stayed idle this
    /// long; the delay doubles with each further COUNT of the epoch, up to kMaxCountDelay.
    static constexpr Clock::duration kFirstCountDelay = comm::kFirstCountDelay;
    /// The longest delay before a further COUNT.
    static constexpr Clock::duration kMaxCountDelay = comm::kMaxCountDelay;
    /// How long a rank first holds its first COUNT of an epoch back while it waits for the
    /// messages it expects (as many as it ran in each of the last two epochs), counted from
    /// the first time it was idle in the epoch.
    static constexpr Clock::duration kExpectWait = comm::kExpectWait;
    /// The wait doubles after an epoch whose expected messages came later than it, up to this.
    static constexpr Clock::duration kMaxExpectWait = comm::kMaxExpectWait;
    /// After an epoch that ran fewer messages than expected, a rank expects none for 1 epoch,
    /// after the next such epoch for 2, and so on up to this many, and its wait is
    /// kExpectWait again.
    static constexpr int kMaxExpectSkip = 64;
    /// How the protocol sends a control message (to any rank, this one included).
    using SendFn = void (*)(void* ctx, int dest, const CtrlMsg& m);
    /// How it reads this rank's counts per channel when it sends a COUNT (an idle time):
    /// `sent[d]` messages queued for rank d, `processed[s]` messages from rank s processed,
    /// for every rank; returns false when they do not add up to the totals of the COUNT
    /// (which then carries the totals alone).
    using ChannelsFn = bool (*)(void* ctx, std::uint64_t* sent, std::uint64_t* processed);

    /// The state of rank `rank` of `ranks` at the start of epoch 0; `send(ctx, dest, m)`
    /// sends a control message; `channels(ctx, ...)`, when given and ranks <=
    /// kChannelRanks, adds this rank's counts per channel to its COUNTs.
    Completion(int rank, int ranks, SendFn send, void* ctx, ChannelsFn channels = nullptr);
    /// A single rank that sends nothing: a placeholder until a Completion is assigned.
    Completion() noexcept = default;

    /// The current epoch (one per join(); AM messages carry its parity in their tag).
    std::uint32_t epoch() const noexcept { return epoch_; }
    /// SHUTDOWN received (or, on rank 0, sent) in this epoch: every rank is done.
    bool shut_down() const noexcept { return shutdown_; }

    /// What on_ctrl did with a message.
    enum class Received {
        taken,        ///< A message of this epoch, taken into the state.
        later_epoch,  ///< Of a later epoch (its sender finished this one first): kept for then.
        stale,        ///< Of an earlier epoch: ignored (it cannot matter any more).
        unknown,      ///< Not a type of the protocol: the caller ends the job.
    };
    /// A control message from `source` (COUNT, REQUEST, CONFIRM or SHUTDOWN).
    Received on_ctrl(int source, const CtrlMsg& m);

    /// One step of the protocol at a poll of join(): `idle` whether this rank is idle
    /// (Communicator::locally_idle), `queued` / `processed` its counts then, `now` the time.
    /// Sends COUNT, CONFIRM and, on rank 0, REQUEST and SHUTDOWN as the protocol says.
    /// Returns shut_down().
    bool step(bool idle, std::uint64_t queued, std::uint64_t processed, Clock::time_point now);

    /// Starts the next epoch, in which this rank's counts start at `queued` / `processed`,
    /// then takes the messages of it that arrived early. Returns the first of them of an
    /// unknown type, if any (the rest are not taken: the job ends).
    std::optional<std::pair<int, CtrlMsg>> next_epoch(std::uint64_t queued,
                                                      std::uint64_t processed);

    /// Messages this rank expects to run before its first COUNT of the current epoch.
    std::uint64_t expected() const noexcept { return expect_p_; }
    /// How long it waits for them at most.
    Clock::duration expect_wait() const noexcept { return expect_wait_; }

    /// The state, for the watchdog: epoch, last COUNT, an unconfirmed REQUEST and, on rank
    /// 0, the ranks whose counts are missing.
    std::string describe() const;

  private:
    void send(int dest, const CtrlMsg& m) { send_(ctx_, dest, m); }
    void shut_down_all();
    bool channels_balance() const;

    int rank_ = 0, ranks_ = 1;
    SendFn send_ = nullptr;
    void* ctx_ = nullptr;
    ChannelsFn channels_ = nullptr;  // null: COUNTs carry totals alone
    std::uint32_t epoch_ = 0;
    std::uint64_t last_q_ = ~0ull, last_p_ = ~0ull;  // counts last reported (COUNT)
    std::uint64_t base_q_ = 0, base_p_ = 0;          // counts when the epoch began
    bool have_request_ = false;                      // latest REQUEST not yet confirmed
    std::uint64_t req_q_ = 0, req_p_ = 0, req_tag_ = 0;
    bool shutdown_ = false;
    std::optional<Clock::time_point> idle_since_;      // idle stretch start
    Clock::duration count_delay_ = kFirstCountDelay;   // before a further COUNT
    std::vector<std::pair<int, CtrlMsg>> early_ctrl_;  // messages of a later epoch
    // Messages to run before the first COUNT of this epoch (the fewer of the last two
    // epochs'), how many the epoch before ran, the first idle time of this epoch, the wait
    // for them and whether it ran out in this epoch, and the epochs to expect none after an
    // epoch that ran fewer.
    std::uint64_t expect_p_ = 0, last_epoch_p_ = 0;
    std::optional<Clock::time_point> first_idle_;
    Clock::duration expect_wait_ = kExpectWait;
    bool expect_missed_ = false;
    int skip_left_ = 0, skip_next_ = 1;
    // Rank 0 only: each rank's latest counts, who reported in this epoch (and how many of
    // them reported quiet counts: a rank's only quiet COUNT is its first of the epoch), the
    // latest REQUEST tag and the latest tag each rank confirmed.
    std::vector<std::uint64_t> cnt_q_, cnt_p_;
    std::vector<bool> reported_, quiet_;
    int n_reported_ = 0, n_quiet_ = 0;
    bool counts_changed_ = false;
    std::uint64_t tag_ = 0;
    std::vector<std::uint64_t> confirmed_;
    // Rank 0, with channels: the latest COUNT's channel counts of each rank (row r of
    // ch_sent_: what r queued for each rank; row r of ch_processed_: what r processed from
    // each rank), whose latest COUNT carried them, and whether any came since the last check.
    std::vector<std::uint64_t> ch_sent_, ch_processed_;
    std::vector<bool> has_ch_;
    int n_ch_ = 0;
    bool ch_changed_ = false;
    // Rank 0: a REQUEST went out in this epoch (only CONFIRMs end it then).
    bool requested_ = false;
};

}  // namespace cascade::detail
