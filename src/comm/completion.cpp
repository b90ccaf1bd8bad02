// Distributed completion detection: TaskTorrent's COUNT / REQUEST / CONFIRMATION / SHUTDOWN
// protocol, one epoch per join(). docs/design/completion.md states the protocol and why it is
// correct; this file follows its steps. The Communicator drives it (join.cpp).
#include "cascade/comm/detail/completion.hpp"

#include <algorithm>
#include <sstream>

namespace cascade::detail {

Completion::Completion(int rank, int ranks, SendFn send, void* ctx, ChannelsFn channels)
    : rank_(rank),
      ranks_(ranks),
      send_(send),
      ctx_(ctx),
      channels_(ranks <= comm::kChannelRanks ? channels : nullptr) {
    if (rank_ == 0) {
        const auto n = static_cast<std::size_t>(ranks_);
        if (channels_) {
            ch_sent_.assign(n * n, 0);
            ch_processed_.assign(n * n, 0);
            has_ch_.assign(n, false);
        }
        cnt_q_.assign(n, 0);
        cnt_p_.assign(n, 0);
        reported_.assign(n, false);
        quiet_.assign(n, false);
        confirmed_.assign(n, 0);
    }
}

Completion::Received Completion::on_ctrl(int source, const CtrlMsg& m) {
    if (m.epoch != epoch_) {
        // A message of a later epoch (its sender finished this one first) is kept for then;
        // one of an earlier epoch cannot matter any more.
        if (static_cast<std::int32_t>(m.epoch - epoch_) > 0) {
            early_ctrl_.emplace_back(source, m);
            return Received::later_epoch;
        }
        return Received::stale;
    }
    const auto s = static_cast<std::size_t>(source);
    switch (m.type) {
        case CtrlMsg::COUNT: {  // rank 0: latest counts of `source`; counts only grow
            // COUNTs of one rank arrive in the order it sent them (one MPI tag), so this one
            // is its latest; the counts say so too.
            const bool latest = m.a >= cnt_q_[s] && m.b >= cnt_p_[s];
            if (!reported_[s]) {
                reported_[s] = true;
                ++n_reported_;
            }
            cnt_q_[s] = std::max(cnt_q_[s], m.a);
            cnt_p_[s] = std::max(cnt_p_[s], m.b);
            const bool quiet = (m.c & CtrlMsg::kQuiet) != 0;
            if (quiet_[s] != quiet) {  // the latest COUNT says (counts only grow)
                quiet_[s] = quiet;
                n_quiet_ += quiet ? 1 : -1;
            }
            if (channels_ && latest) {  // its channel counts replace the ones before
                const bool has = (m.c & CtrlMsg::kChannels) != 0;
                if (has) {
                    const auto n = static_cast<std::size_t>(ranks_);
                    std::copy(m.ch, m.ch + n,
                              ch_sent_.begin() + static_cast<std::ptrdiff_t>(s * n));
                    std::copy(m.ch + n, m.ch + 2 * n,
                              ch_processed_.begin() + static_cast<std::ptrdiff_t>(s * n));
                }
                if (has_ch_[s] != has) {
                    has_ch_[s] = has;
                    n_ch_ += has ? 1 : -1;
                }
                ch_changed_ = true;
            }
            counts_changed_ = true;
            return Received::taken;
        }
        case CtrlMsg::REQUEST:  // keep only the latest
            if (m.c > req_tag_) {
                have_request_ = true;
                req_q_ = m.a;
                req_p_ = m.b;
                req_tag_ = m.c;
            }
            return Received::taken;
        case CtrlMsg::CONFIRM:
            confirmed_[s] = std::max(confirmed_[s], m.a);
            return Received::taken;
        case CtrlMsg::SHUTDOWN:
            shutdown_ = true;
            return Received::taken;
        default:
            return Received::unknown;
    }
}

bool Completion::step(bool idle, std::uint64_t q, std::uint64_t p, Clock::time_point now) {
    if (!idle) {
        idle_since_.reset();
    } else if (!idle_since_) {
        idle_since_ = now;
        if (!first_idle_) first_idle_ = now;
    }
    if (idle) {
        // Step 1: report changed counts to rank 0: the first time in this epoch once the
        // messages the rank expects ran (at once when it expects none: an epoch with little
        // work ends a round trip sooner), later ones once the rank has stayed idle a moment,
        // so that short gaps between tasks do not flood rank 0.
        const bool first = last_q_ == ~0ull;
        bool due = false;
        if (first) {
            due = p - base_p_ >= expect_p_;
            if (!due && now - *first_idle_ >= expect_wait_) due = expect_missed_ = true;
        } else {
            due = now - *idle_since_ >= count_delay_;
        }
        if ((q != last_q_ || p != last_p_) && due) {
            // Each further COUNT in this epoch means the last one was premature: wait
            // longer next time (a busy application idles briefly and often).
            if (!first) count_delay_ = std::min<Clock::duration>(count_delay_ * 2, kMaxCountDelay);
            last_q_ = q;
            last_p_ = p;
            CtrlMsg m{CtrlMsg::COUNT, epoch_, q, p, 0, {}};
            if (q == base_q_ && p == base_p_) m.c |= CtrlMsg::kQuiet;
            // The counts per channel, read at the same idle time as q and p: nothing changes
            // on this rank until this thread runs a message.
            if (channels_ && channels_(ctx_, m.ch, m.ch + ranks_)) m.c |= CtrlMsg::kChannels;
            send(0, m);
        }
        if (have_request_ && q == req_q_ && p == req_p_) {  // step 3: unchanged since t-
            have_request_ = false;
            send(0, CtrlMsg{CtrlMsg::CONFIRM, epoch_, req_tag_, 0, 0, {}});
        }
    }
    if (rank_ == 0 && !shutdown_) {
        // An epoch in which no rank queued or ran a message: every rank reported, while
        // idle, the counts it began the epoch with. The first message of the epoch would
        // have been queued by a rank that was busy, so before its report (which would count
        // it) or after it (busy again, so after running a message queued earlier): none was
        // queued, and an idle rank stays idle without one. Done in one round.
        if (n_reported_ == ranks_ && n_quiet_ == ranks_) {
            shut_down_all();
            return shutdown_;
        }
        // Every rank's latest COUNT carried its channel counts, and on every channel the
        // messages its sender had queued are those its receiver had processed: every message
        // queued anywhere was processed before its receiver's COUNT, so no rank runs one any
        // more and every rank stays idle (docs/design/completion.md, step 6). Done in one round.
        // Not after a REQUEST of this epoch: the CONFIRMs it may still bring would be left
        // unreceived when the epoch ends.
        if (n_reported_ == ranks_ && ch_changed_ && !requested_) {
            ch_changed_ = false;
            if (n_ch_ == ranks_ && channels_balance()) {
                shut_down_all();
                return shutdown_;
            }
        }
        // Step 2: balanced counts -> REQUEST; not while every rank's latest COUNT carries
        // its channels (step 6 ends such an epoch once they balance), unless a REQUEST went
        // out already in this epoch (then only CONFIRMs end it).
        if (n_reported_ == ranks_ && counts_changed_ && (n_ch_ < ranks_ || requested_)) {
            std::uint64_t sq = 0, sp = 0;
            for (std::size_t r = 0; r < cnt_q_.size(); ++r) {
                sq += cnt_q_[r];
                sp += cnt_p_[r];
            }
            if (sq == sp) {
                counts_changed_ = false;
                requested_ = true;
                ++tag_;
                for (int r = 0; r < ranks_; ++r) {
                    const auto s = static_cast<std::size_t>(r);
                    send(r, CtrlMsg{CtrlMsg::REQUEST, epoch_, cnt_q_[s], cnt_p_[s], tag_, {}});
                }
            }
        }
        if (tag_ > 0 && !counts_changed_ &&
            std::all_of(confirmed_.begin(), confirmed_.end(),
                        [&](std::uint64_t t) { return t == tag_; }))  // step 4: SHUTDOWN
            shut_down_all();
    }
    return shutdown_;
}

void Completion::shut_down_all() {
    for (int r = 1; r < ranks_; ++r)
        send(r, CtrlMsg{CtrlMsg::SHUTDOWN, epoch_, 0, 0, 0, {}});
    shutdown_ = true;
}

bool Completion::channels_balance() const {
    const auto n = static_cast<std::size_t>(ranks_);
    for (std::size_t from = 0; from < n; ++from)
        for (std::size_t to = 0; to < n; ++to)
            if (ch_sent_[from * n + to] != ch_processed_[to * n + from]) return false;
    return true;
}

std::optional<std::pair<int, CtrlMsg>> Completion::next_epoch(std::uint64_t queued,
                                                              std::uint64_t processed) {
    ++epoch_;
    // What to expect in the new epoch: as many messages as each of the last two ran. When
    // the wait ran out and the expected messages came later, wait longer; when fewer came,
    // expect none for a while (longer after each such epoch) and wait the least again.
    const std::uint64_t ran = processed - base_p_;
    if (expect_p_ > 0 && ran < expect_p_) {
        skip_left_ = skip_next_;
        skip_next_ = std::min(2 * skip_next_, kMaxExpectSkip);
        expect_wait_ = kExpectWait;
    } else if (expect_p_ > 0) {
        skip_next_ = 1;
        if (expect_missed_)
            expect_wait_ = std::min<Clock::duration>(2 * expect_wait_, kMaxExpectWait);
    }
    if (skip_left_ > 0) {
        --skip_left_;
        expect_p_ = 0;
    } else {
        expect_p_ = std::min(ran, last_epoch_p_);
    }
    last_epoch_p_ = ran;
    expect_missed_ = false;
    first_idle_.reset();
    base_q_ = queued;
    base_p_ = processed;
    idle_since_.reset();
    count_delay_ = kFirstCountDelay;
    last_q_ = last_p_ = ~0ull;
    have_request_ = false;
    shutdown_ = false;
    if (rank_ == 0) {
        std::fill(reported_.begin(), reported_.end(), false);
        std::fill(quiet_.begin(), quiet_.end(), false);
        n_reported_ = n_quiet_ = 0;
        counts_changed_ = false;
        std::fill(confirmed_.begin(), confirmed_.end(), 0);
        std::fill(has_ch_.begin(), has_ch_.end(), false);
        n_ch_ = 0;
        ch_changed_ = false;
        requested_ = false;
    }
    std::vector<std::pair<int, CtrlMsg>> early;  // take what arrived ahead of this epoch
    early.swap(early_ctrl_);
    for (auto& [source, m] : early)
        if (on_ctrl(source, m) == Received::unknown) return std::pair{source, m};
    return std::nullopt;
}

std::string Completion::describe() const {
    std::ostringstream os;
    os << "epoch " << epoch_;
    if (last_q_ == ~0ull) {
        os << ", no COUNT sent yet";
        if (expect_p_ > 0) os << " (expects " << expect_p_ << " message(s) first)";
    } else
        os << ", last COUNT sent (" << last_q_ << " queued, " << last_p_ << " processed)";
    if (have_request_) os << ", REQUEST " << req_tag_ << " not yet confirmable";
    if (rank_ == 0) {
        std::uint64_t sq = 0, sp = 0;
        for (std::size_t r = 0; r < cnt_q_.size(); ++r) {
            sq += cnt_q_[r];
            sp += cnt_p_[r];
        }
        os << "; rank 0 has counts from " << n_reported_ << " of " << ranks_
           << " ranks (sums: " << sq << " queued, " << sp << " processed)";
        if (n_reported_ < ranks_) {
            os << ", missing:";
            for (int r = 0; r < ranks_; ++r)
                if (!reported_[static_cast<std::size_t>(r)]) os << ' ' << r;
        }
    }
    return os.str();
}

}  // namespace cascade::detail
