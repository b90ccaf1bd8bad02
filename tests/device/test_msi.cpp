// The MSI protocol of Data, transition by transition: every state of a copy at the accessed
// space, with the other copies in every combination that the protocol can reach, for each
// access and for eviction.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "cascade/device/msi.hpp"

using cascade::DataAccess;
using cascade::Msi;
using cascade::MsiPlan;

namespace {
constexpr Msi I = Msi::invalid, S = Msi::shared, M = Msi::modified;

std::string show(const std::vector<Msi>& v) {
    std::string s;
    for (Msi m : v)
        s += cascade::to_string(m);
    return s;
}

struct Row {
    std::vector<Msi> before;  // host, dev1, dev2
    int space;
    DataAccess access;
    std::vector<Msi> after;
    int source;
    bool via_host;
};

// The whole table for three spaces (host, two devices) over the reachable states: one M and
// the rest I, or S copies with the host among them or not (a device S with the host I arises
// only from a device's eviction order, which the runtime never produces, but the protocol must
// still handle it).
const std::vector<Row> kRows = {
    // read
    {{M, I, I}, 0, DataAccess::read, {M, I, I}, -1, false},
    {{M, I, I}, 1, DataAccess::read, {S, S, I}, 0, false},
    {{I, M, I}, 0, DataAccess::read, {S, S, I}, 1, false},
    {{I, M, I}, 1, DataAccess::read, {I, M, I}, -1, false},
    {{I, M, I}, 2, DataAccess::read, {S, S, S}, 1, true},
    {{S, S, I}, 2, DataAccess::read, {S, S, S}, 0, false},
    {{S, S, I}, 1, DataAccess::read, {S, S, I}, -1, false},
    {{I, S, S}, 0, DataAccess::read, {S, S, S}, 1, false},
    {{I, I, S}, 1, DataAccess::read, {S, S, S}, 2, true},
    {{S, S, S}, 2, DataAccess::read, {S, S, S}, -1, false},
    // write (overwrite: no fetch)
    {{M, I, I}, 1, DataAccess::write, {I, M, I}, -1, false},
    {{M, I, I}, 0, DataAccess::write, {M, I, I}, -1, false},
    {{I, M, I}, 2, DataAccess::write, {I, I, M}, -1, false},
    {{S, S, S}, 0, DataAccess::write, {M, I, I}, -1, false},
    {{S, S, I}, 1, DataAccess::write, {I, M, I}, -1, false},
    {{I, M, I}, 1, DataAccess::write, {I, M, I}, -1, false},
    // readwrite
    {{M, I, I}, 1, DataAccess::readwrite, {I, M, I}, 0, false},
    {{I, M, I}, 0, DataAccess::readwrite, {M, I, I}, 1, false},
    {{I, M, I}, 2, DataAccess::readwrite, {I, I, M}, 1, true},
    {{S, S, S}, 1, DataAccess::readwrite, {I, M, I}, -1, false},
    {{S, S, I}, 2, DataAccess::readwrite, {I, I, M}, 0, false},
    {{I, M, I}, 1, DataAccess::readwrite, {I, M, I}, -1, false},
    {{I, S, S}, 0, DataAccess::readwrite, {M, I, I}, 1, false},
};
}  // namespace

TEST(DeviceMsi, EveryAccessTransition) {
    for (const Row& r : kRows) {
        std::vector<Msi> st = r.before;
        const MsiPlan p = cascade::msi_access(st, r.space, r.access);
        const std::string what =
            show(r.before) + " " + cascade::to_string(r.access) + "@" + std::to_string(r.space);
        EXPECT_EQ(show(st), show(r.after)) << what;
        EXPECT_EQ(p.source, r.source) << what;
        EXPECT_EQ(p.via_host, r.via_host) << what;
    }
}

TEST(DeviceMsi, EveryEviction) {
    struct E {
        std::vector<Msi> before;
        int space;
        std::vector<Msi> after;
        bool write_back;
    };
    const std::vector<E> rows = {
        {{I, M, I}, 1, {M, I, I}, true},   // the only valid copy, modified: written back
        {{S, S, I}, 1, {S, I, I}, false},  // the host has it: dropped
        {{S, S, S}, 2, {S, S, I}, false},
        {{I, S, S}, 1, {I, I, S}, false},  // another device has it
        {{I, S, I}, 1, {M, I, I}, true},   // the last valid copy: written back
        {{M, I, I}, 1, {M, I, I}, false},  // nothing here: nothing to do
        {{I, I, M}, 2, {M, I, I}, true},
    };
    for (const E& r : rows) {
        std::vector<Msi> st = r.before;
        const MsiPlan p = cascade::msi_evict(st, r.space);
        const std::string what = show(r.before) + " evict@" + std::to_string(r.space);
        EXPECT_EQ(show(st), show(r.after)) << what;
        EXPECT_EQ(p.write_back, r.write_back) << what;
        EXPECT_EQ(p.source, r.write_back ? r.space : -1) << what;
    }
}

TEST(DeviceMsi, InvariantsOverAllStatesAndAccesses) {
    // From every reachable state (at most one M, and an M only alone), every access keeps
    // the invariants: the accessed copy is valid after, at most one copy is Modified and a
    // Modified copy is the only valid one, and a write leaves exactly one valid copy.
    const std::array<Msi, 3> all = {I, S, M};
    for (Msi a : all)
        for (Msi b : all)
            for (Msi c : all) {
                std::vector<Msi> st = {a, b, c};
                int m = 0, v = 0;
                for (Msi x : st)
                    m += x == M, v += x != I;
                if (v == 0 || m > 1 || (m == 1 && v > 1)) continue;  // not reachable
                for (int sp = 0; sp < 3; ++sp)
                    for (DataAccess acc :
                         {DataAccess::read, DataAccess::write, DataAccess::readwrite}) {
                        std::vector<Msi> s2 = st;
                        cascade::msi_access(s2, sp, acc);
                        int m2 = 0, v2 = 0;
                        for (Msi x : s2)
                            m2 += x == M, v2 += x != I;
                        const std::string what =
                            show(st) + " " + cascade::to_string(acc) + "@" + std::to_string(sp);
                        EXPECT_NE(s2[static_cast<std::size_t>(sp)], I) << what;
                        EXPECT_LE(m2, 1) << what;
                        if (m2 == 1) {
                            EXPECT_EQ(v2, 1) << what;
                        }
                        if (cascade::writes(acc)) {
                            EXPECT_EQ(s2[static_cast<std::size_t>(sp)], M) << what;
                        }
                    }
            }
}
