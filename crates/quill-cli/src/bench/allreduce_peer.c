/* Open MPI's own all-reduce timings for `quill bench allreduce`: MPI_Allreduce (blocking, the
 * library's tuned algorithms) of f32 sums over the same message sizes, median of ROUNDS after a
 * warm-up, printed by rank 0 as "bytes median_seconds" lines. Compiled by
 * scripts/bench-allreduce.sh with mpicc, twice: as is, and with -DNONBLOCKING, where each
 * all-reduce is MPI_Iallreduce polled by MPI_Test, the way quill's communicator runs it (so the
 * cost of Open MPI's nonblocking collective and the cost of quill's own layer show apart). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    double *t = malloc(sizeof(double) * rounds);
    for (long bytes = 4096; bytes <= 64L << 20; bytes *= 4) {
        long n = bytes / 4;
        float *s = malloc(bytes), *r = malloc(bytes);
        for (long i = 0; i < n; i++) s[i] = (float)(i % 7);
        MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (int k = 0; k < rounds; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
#ifdef NONBLOCKING
            MPI_Request q;
            int done = 0;
            MPI_Iallreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
            while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
#else
            MPI_Allreduce(s, r, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
            t[k] = MPI_Wtime() - t0;
        }
        qsort(t, rounds, sizeof(double), cmp);
        if (rank == 0) printf("%ld %.9f\n", bytes, t[rounds / 2]);
        free(s);
        free(r);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
