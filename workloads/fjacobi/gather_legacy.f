C     The field of every rank gathered to rank 0 through mpif.h (the legacy interface), in rank order.
      SUBROUTINE GATHER_LEGACY(PART, NL, WHOLE, N, RANK, NPROCS, IERR)
      IMPLICIT NONE
      INCLUDE 'mpif.h'
      INTEGER NL, N, RANK, NPROCS, IERR, I
      LOGICAL SHORT
      DOUBLE PRECISION PART(NL), WHOLE(*)
      INTEGER, ALLOCATABLE :: COUNTS(:), DISPLS(:)
      ALLOCATE (COUNTS(NPROCS), DISPLS(NPROCS))
      CALL MPI_GATHER(NL, 1, MPI_INTEGER, COUNTS, 1, MPI_INTEGER, 0,
     &                MPI_COMM_WORLD, IERR)
      SHORT = .FALSE.
      IF (RANK .EQ. 0) THEN
        DISPLS(1) = 0
        DO I = 2, NPROCS
          DISPLS(I) = DISPLS(I - 1) + COUNTS(I - 1)
        END DO
        SHORT = DISPLS(NPROCS) + COUNTS(NPROCS) .NE. N
      END IF
      CALL MPI_GATHERV(PART, NL, MPI_DOUBLE_PRECISION, WHOLE, COUNTS,
     &                 DISPLS, MPI_DOUBLE_PRECISION, 0,
     &                 MPI_COMM_WORLD, IERR)
C     Counts that do not add up to N are an error, gather or not.
      IF (SHORT) IERR = 1
      DEALLOCATE (COUNTS, DISPLS)
      END
