// The example of the TaskTorrent paper (section II-A3), its body unchanged; around it, the
// helper functions it assumes (compute, mapping, n_deps, deps, task_2_rank), the payload
// type, and a check of the result.
#include <cstdio>
#include <vector>

#include "cascade/compat/ttor.hpp"

using namespace ttor;

// A chain of tasks 0..N-1 spread over ranks: k depends on k-1; payload carries a value.
constexpr int N = 64;
struct payload {
    long value;
};
int n_threads = 2, my_rank = 0, n_ranks = 1;
std::vector<payload> data(N);
long result = -1;

// Task k adds k to the running sum left in data[k-1] by its predecessor (stored there by the
// active message when k-1 ran on another rank).
void compute(int k) {
    data[k].value = (k == 0 ? 0 : data[k - 1].value) + k;
    if (k == N - 1) result = data[k].value;
}
int mapping(int k) {
    return k % n_threads;
}
int n_deps(int) {
    return 1;
}
std::vector<int> deps(int k) {
    return k + 1 < N ? std::vector<int>{k + 1} : std::vector<int>{};
}
int task_2_rank(int k) {
    return k % n_ranks;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    my_rank = comm_rank();
    n_ranks = comm_size();
    std::vector<int> initial_tasks;  // this rank's tasks without predecessors
    if (task_2_rank(0) == my_rank) initial_tasks.push_back(0);
    {
        /** Initialize structures */
        Communicator comm(MPI_COMM_WORLD);
        Threadpool tp(n_threads, &comm);
        Taskflow<int> tf(&tp);
        /** Create active message */
        auto am = comm.make_active_msg([&](int d, int k, payload pk) {
            data[k] = pk;
            tf.fulfill_promise(d);
        });
        /** Define Taskflow */
        tf.set_mapping(mapping);
        tf.set_indegree(n_deps);
        tf.set_run([&](int k) {
            compute(k);
            for (auto d : deps(k)) {
                int dest = task_2_rank(d);
                if (dest == my_rank) {
                    tf.fulfill_promise(d);
                } else {
                    am->send(dest, d, k, data[k]);
                }
            }
        });
        /** Start initial tasks */
        for (auto k : initial_tasks)
            tf.fulfill_promise(k);
        /** Wait for completion */
        tp.join();
    }
    int ok = 1;
    if (my_rank == task_2_rank(N - 1)) {
        ok = result == static_cast<long>(N) * (N - 1) / 2;
        std::printf("paper example: result %ld (%s)\n", result, ok ? "OK" : "WRONG");
    }
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Finalize();
    return all ? 0 : 1;
}
