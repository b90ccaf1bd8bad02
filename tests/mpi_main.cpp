// GoogleTest main for tests run under mpiexec: MPI is initialized once for all tests, only
// rank 0 prints, and every rank exits with the same status.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    ::testing::InitGoogleTest(&argc, argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    int failed = RUN_ALL_TESTS() != 0;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (failed) {
        // Only rank 0 prints as it goes: say here which tests failed on this rank, and why.
        const auto& ut = *::testing::UnitTest::GetInstance();
        for (int i = 0; i < ut.total_test_suite_count(); ++i) {
            const auto& suite = *ut.GetTestSuite(i);
            for (int j = 0; j < suite.total_test_count(); ++j) {
                const auto& info = *suite.GetTestInfo(j);
                const auto* res = info.result();
                if (!res || !res->Failed()) continue;
                std::fprintf(stderr, "rank %d: FAILED %s.%s\n", rank, suite.name(), info.name());
                for (int k = 0; k < res->total_part_count(); ++k) {
                    const auto& part = res->GetTestPartResult(k);
                    if (part.failed())
                        std::fprintf(stderr, "rank %d:   %s:%d: %s\n", rank,
                                     part.file_name() ? part.file_name() : "?", part.line_number(),
                                     part.message());
                }
            }
        }
        std::fprintf(stderr, "rank %d: some tests FAILED\n", rank);
    }
    MPI_Finalize();
    return any_failed;
}
