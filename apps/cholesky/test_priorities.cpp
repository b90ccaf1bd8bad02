// Checks the closed-form bottom levels of priorities.hpp against a dynamic program over the
// whole Cholesky task graph (same edges as cholesky_graph.cpp), for 1 to 40 tiles.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "priorities.hpp"

namespace prio = cascade::apps::cholesky_priority;

int main() {
    const double w_potrf = 1.0 / 3.0, w_trsm = 1.0, w_syrk = 1.0, w_gemm = 2.0;
    int errors = 0;
    auto expect = [&](const char* what, int nt, int i, int j, int k, double got, double want) {
        if (std::abs(got - want) > 1e-9 && errors++ < 10)
            std::fprintf(stderr, "nt=%d %s(%d,%d,%d): closed form %.4f, graph %.4f\n", nt, what, i,
                         j, k, got, want);
    };
    for (int nt = 1; nt <= 40; ++nt) {
        std::map<int, double> potrf;
        std::map<std::tuple<int, int>, double> trsm;
        std::map<std::tuple<int, int, int>, double> update;
        // Successors of step-k tasks are step-k tasks or step-(k+1) tasks: sweep k downwards,
        // updates first, then trsm, then potrf.
        for (int k = nt - 1; k >= 0; --k) {
            for (int i = k + 1; i < nt; ++i)
                for (int j = k + 1; j <= i; ++j) {
                    const double next = k + 1 < j ? update[{i, j, k + 1}]
                                        : i == j  ? potrf[j]
                                                  : trsm[{i, j}];
                    update[{i, j, k}] = (i == j ? w_syrk : w_gemm) + next;
                }
            for (int i = k + 1; i < nt; ++i) {
                double next = 0;
                for (int j = k + 1; j <= i; ++j)
                    next = std::max(next, update[{i, j, k}]);
                for (int r = i + 1; r < nt; ++r)
                    next = std::max(next, update[{r, i, k}]);
                trsm[{i, k}] = w_trsm + next;
            }
            double next = 0;
            for (int i = k + 1; i < nt; ++i)
                next = std::max(next, trsm[{i, k}]);
            potrf[k] = w_potrf + next;
        }
        for (auto& [k, v] : potrf)
            expect("potrf", nt, k, k, k, prio::potrf(nt, k), v);
        for (auto& [key, v] : trsm) {
            const auto [i, k] = key;
            expect("trsm", nt, i, k, k, prio::trsm(nt, i, k), v);
        }
        for (auto& [key, v] : update) {
            const auto [i, j, k] = key;
            expect("update", nt, i, j, k, prio::update(nt, i, j, k), v);
        }
    }
    if (errors) {
        std::fprintf(stderr, "test_priorities: %d mismatches\n", errors);
        return 1;
    }
    std::printf("test_priorities: closed-form bottom levels match the graph for nt = 1..40\n");
    return 0;
}
