// The parts of BLACS / ScaLAPACK / PBLAS the baselines call. ScaLAPACK ships no C header, so
// the Fortran routines are declared here with gfortran's calling convention: every argument
// by address, and one hidden length argument per character argument, at the end.
#pragma once

#include <cstddef>

extern "C" {
// C interface to BLACS.
void Cblacs_pinfo(int* mypnum, int* nprocs);
void Cblacs_get(int icontxt, int what, int* val);
void Cblacs_gridinit(int* icontxt, const char* order, int nprow, int npcol);
void Cblacs_gridinfo(int icontxt, int* nprow, int* npcol, int* myrow, int* mycol);
void Cblacs_gridexit(int icontxt);
void Cblacs_exit(int continue_mpi);

int numroc_(const int* n, const int* nb, const int* iproc, const int* isrcproc, const int* nprocs);
void descinit_(int* desc, const int* m, const int* n, const int* mb, const int* nb,
               const int* irsrc, const int* icsrc, const int* ictxt, const int* lld, int* info);

void pdpotrf_(const char* uplo, const int* n, double* a, const int* ia, const int* ja,
              const int* desca, int* info, std::size_t uplo_len);
void pdlaset_(const char* uplo, const int* m, const int* n, const double* alpha, const double* beta,
              double* a, const int* ia, const int* ja, const int* desca, std::size_t uplo_len);
void pdsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
             const double* a, const int* ia, const int* ja, const int* desca, const double* beta,
             double* c, const int* ic, const int* jc, const int* descc, std::size_t uplo_len,
             std::size_t trans_len);
double pdlansy_(const char* norm, const char* uplo, const int* n, const double* a, const int* ia,
                const int* ja, const int* desca, double* work, std::size_t norm_len,
                std::size_t uplo_len);
void pdgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
             const double* alpha, const double* a, const int* ia, const int* ja, const int* desca,
             const double* b, const int* ib, const int* jb, const int* descb, const double* beta,
             double* c, const int* ic, const int* jc, const int* descc, std::size_t transa_len,
             std::size_t transb_len);
}

namespace baselines {

// One process's share of an n x n matrix in 2D block-cyclic layout (nb x nb blocks, block
// (0, 0) on process (0, 0)), column-major with leading dimension lld.
struct BlockCyclicLocal {
    int n = 0, nb = 0, P = 1, Q = 1, myrow = 0, mycol = 0;
    int rows = 0, cols = 0, lld = 1;
    int desc[9] = {};
    int info = 0;  // descinit_'s verdict: 0 when the descriptor is valid

    BlockCyclicLocal(int n_, int nb_, int ctxt, int P_, int Q_, int myrow_, int mycol_)
        : n(n_), nb(nb_), P(P_), Q(Q_), myrow(myrow_), mycol(mycol_) {
        const int zero = 0;
        rows = numroc_(&n, &nb, &myrow, &zero, &P);
        cols = numroc_(&n, &nb, &mycol, &zero, &Q);
        lld = rows > 1 ? rows : 1;
        descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
    }
    std::size_t size() const { return static_cast<std::size_t>(lld) * (cols > 0 ? cols : 1); }
    // Global index of local row li / local column lj.
    int global_row(int li) const { return (li / nb * P + myrow) * nb + li % nb; }
    int global_col(int lj) const { return (lj / nb * Q + mycol) * nb + lj % nb; }
};

}  // namespace baselines
