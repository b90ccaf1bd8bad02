// Task priorities for tiled Cholesky: the bottom level of each task, i.e. the flop-weighted
// length of the longest path from the task to the end of the graph (the "upward rank" of
// list scheduling). Running the task with the longest remaining path first keeps the
// critical path potrf(k) -> trsm(k+1,k) -> syrk(k+1,k+1,k) -> potrf(k+1) moving while the
// trailing updates fill the gaps (look-ahead).
//
// Weights are kernel flops in units of nb^3: potrf 1/3, trsm 1, syrk 1, gemm 2. On the graph
// of cholesky_graph.hpp (updates of one tile chained in k) the bottom levels have a closed
// form, checked against a dynamic program over the whole graph by test_priorities.cpp:
//   potrf(k)           3(nt-1-k) - 1/3            (1/3 for the last tile)
//   trsm(i,k)          3(nt-1-k) - 2/3
//   update(i,j,k) i>j  3(nt-1-k) - (j-k) - 2/3    (gemm chain to trsm(i,j))
//   update(j,j,k)      (j-k) + potrf(j)           (syrk chain to potrf(j))
// So a priority is a function of the key alone, with no table: each rank of the distributed
// version computes the priorities of its own tasks.
#pragma once

namespace cascade::apps::cholesky_priority {

inline double potrf(int nt, int k) {
    return k == nt - 1 ? 1.0 / 3.0 : 3.0 * (nt - 1 - k) - 1.0 / 3.0;
}
inline double trsm(int nt, int /*i*/, int k) {
    return 3.0 * (nt - 1 - k) - 2.0 / 3.0;
}
inline double update(int nt, int i, int j, int k) {
    if (i == j) return (j - k) + potrf(nt, j);
    return 3.0 * (nt - 1 - k) - (j - k) - 2.0 / 3.0;
}

// Among tasks with equal bottom levels, prefer tiles nearer the diagonal: they unlock the
// next panel sooner. Bottom levels differ by multiples of 1/3, so this never reorders them.
inline double tie_break(int nt, int i, int j) {
    return -1e-3 * (i - j) / nt;
}

}  // namespace cascade::apps::cholesky_priority
