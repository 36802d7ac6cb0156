! fjacobi: a Fortran 2008 MPI mini-app (use mpi_f08): 1D three-point Jacobi smoothing on a block-distributed
! line, halo exchange with Irecv/Isend/Waitall, a residual Allreduce every --check-every steps. The field is
! gathered to rank 0 through gather_legacy.f (mpif.h) and compared with a serial run of the same kernel, bit for
! bit. Output contract: workloads/README.md.
! Built with -DFJACOBI_USE_MPI it takes `use mpi` instead, for a stack whose mpi_f08 module gfortran cannot read
! (Intel MPI's wheel): the same calls, each passing the error argument that `use mpi` requires and mpi_f08 allows.
module fjacobi_io
  implicit none
  integer, parameter :: dp = kind(1.0d0)
contains
  function num(x) result(s)
    ! A finite real as printf's %.9g-like text that the contract parser accepts.
    real(dp), intent(in) :: x
    character(len=:), allocatable :: s
    character(len=32) :: buf
    write (buf, '(es17.9e3)') x
    s = trim(adjustl(buf))
  end function num

  function inum(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write (buf, '(i0)') i
    s = trim(buf)
  end function inum

  pure real(dp) function initial(g)
    ! The starting value of global point g (1-based), the same on every rank count.
    integer, intent(in) :: g
    initial = real(mod(g * 7, 101), dp) / 100.0_dp
  end function initial

  subroutine sweep(u, unew, lo, hi)
    ! unew(i) = (u(i-1) + u(i) + u(i+1)) / 3 over lo..hi, in this order of operations everywhere.
    real(dp), intent(in) :: u(0:)
    real(dp), intent(inout) :: unew(0:)
    integer, intent(in) :: lo, hi
    integer :: i
    do i = lo, hi
      unew(i) = ((u(i - 1) + u(i)) + u(i + 1)) / 3.0_dp
    end do
  end subroutine sweep
end module fjacobi_io

program fjacobi
#ifdef FJACOBI_USE_MPI
  use mpi
#else
  use mpi_f08
#endif
  use fjacobi_io
  implicit none
#ifdef FJACOBI_USE_MPI
  integer :: req(4)
  character(len=*), parameter :: binding = 'mpi'
#else
  type(MPI_Request) :: req(4)
  character(len=*), parameter :: binding = 'f08'
#endif
  integer :: rank, nprocs, n, iters, check_every, nl, first, left, right, it, bad, ndiff, ierr, major, minor
  integer :: cfg(4), liblen
  real(dp), allocatable :: u(:), unew(:), whole(:), serial(:), snew(:)
  real(dp) :: t0, t1, tc, tcomp, tcomm, mine(2), sums(2), maxs(2), res, gres, lsum, gsum
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: lib

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  cfg = [0, 100000, 200, 10]
  if (rank == 0) call parse_args(cfg, nprocs)
  call MPI_Bcast(cfg, 4, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (cfg(1) /= 0) then
    call MPI_Finalize(ierr)
    if (cfg(1) < 0) stop   ! --help
    stop 2, quiet=.true.   ! every rank: the same verdict (Fortran 2018; gfortran 9 and later)
  end if
  n = cfg(2); iters = cfg(3); check_every = cfg(4)
  nl = n / nprocs + merge(1, 0, rank < mod(n, nprocs))
  first = rank * (n / nprocs) + min(rank, mod(n, nprocs)) + 1
  left = merge(MPI_PROC_NULL, rank - 1, rank == 0)
  right = merge(MPI_PROC_NULL, rank + 1, rank == nprocs - 1)
  allocate (u(0:nl + 1), unew(0:nl + 1))
  u = 0.0_dp
  do it = 1, nl
    u(it) = initial(first + it - 1)
  end do
  unew = u

  if (rank == 0) then
    call MPI_Get_library_version(lib, liblen, ierr)
    call MPI_Get_version(major, minor, ierr)
    print '(a)', 'COMMSCOPE workload=fjacobi version=0.1.0'
    print '(a)', 'MPI_LIBRARY ' // trim(first_line(lib(1:liblen)))
    print '(a)', 'MPI_VERSION ' // inum(major) // '.' // inum(minor)
    print '(a)', 'RANKS ' // inum(nprocs)
    print '(a)', 'PARAM n ' // inum(n)
    print '(a)', 'PARAM iters ' // inum(iters)
    print '(a)', 'PARAM check-every ' // inum(check_every)
    print '(a)', 'PARAM variant ' // binding
    print '(a)', 'PARAM language fortran2008'
  end if

  tcomp = 0.0_dp; tcomm = 0.0_dp; gres = 0.0_dp
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  do it = 1, iters
    tc = MPI_Wtime()
    call MPI_Irecv(u(0), 1, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, req(1), ierr)
    call MPI_Irecv(u(nl + 1), 1, MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, req(2), ierr)
    call MPI_Isend(u(1), 1, MPI_DOUBLE_PRECISION, left, 0, MPI_COMM_WORLD, req(3), ierr)
    call MPI_Isend(u(nl), 1, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, req(4), ierr)
    call MPI_Waitall(4, req, MPI_STATUSES_IGNORE, ierr)
    tcomm = tcomm + (MPI_Wtime() - tc)
    tc = MPI_Wtime()
    call sweep(u, unew, 1, nl)
    res = sum(abs(unew(1:nl) - u(1:nl)))
    u(1:nl) = unew(1:nl)
    tcomp = tcomp + (MPI_Wtime() - tc)
    if (mod(it, check_every) == 0) then
      tc = MPI_Wtime()
      call MPI_Allreduce(res, gres, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
      tcomm = tcomm + (MPI_Wtime() - tc)
    end if
  end do
  t1 = MPI_Wtime() - t0

  mine = [tcomm, tcomp]
  call MPI_Reduce(mine, sums, 2, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  call MPI_Reduce(mine, maxs, 2, MPI_DOUBLE_PRECISION, MPI_MAX, 0, MPI_COMM_WORLD, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, t1, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  lsum = sum(u(1:nl))
  call MPI_Allreduce(lsum, gsum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)

  ! Verification: the field gathered to rank 0 (mpif.h) against a serial run of the same kernel.
  allocate (whole(merge(n, 1, rank == 0)))
  call gather_legacy(u(1:nl), nl, whole, n, rank, nprocs, ierr)
  if (rank == 0) then
    allocate (serial(0:n + 1), snew(0:n + 1))
    serial = 0.0_dp
    do it = 1, n
      serial(it) = initial(it)
    end do
    snew = serial
    do it = 1, iters
      call sweep(serial, snew, 1, n)
      serial(1:n) = snew(1:n)
    end do
    ndiff = count(whole /= serial(1:n))
    bad = merge(0, 1, ndiff == 0 .and. ierr == 0)
    print '(a)', 'FOM total_time ' // num(t1) // ' s'
    print '(a)', 'FOM time_per_iter ' // num(t1 / iters) // ' s'
    print '(a)', 'FOM comm_time_avg ' // num(sums(1) / nprocs) // ' s'
    print '(a)', 'FOM comm_time_max ' // num(maxs(1)) // ' s'
    print '(a)', 'FOM compute_time_avg ' // num(sums(2) / nprocs) // ' s'
    print '(a)', 'FOM compute_time_max ' // num(maxs(2)) // ' s'
    print '(a)', 'FOM residual ' // num(gres) // ' sum'
    print '(a)', 'VERIFY field_vs_serial ' // merge('PASS', 'FAIL', bad == 0) // ' ' // inum(ndiff)
    print '(a)', 'VERIFY field_sum ' // merge('PASS', 'FAIL', abs(gsum - sum(serial(1:n))) <= &
                 1.0e-12_dp * abs(sum(serial(1:n)))) // ' ' // num(gsum)
  end if
  call MPI_Finalize(ierr)

contains

  function first_line(s) result(r)
    character(len=*), intent(in) :: s
    character(len=:), allocatable :: r
    integer :: k
    k = scan(s, achar(10))
    r = s
    if (k > 0) r = s(1:k - 1)
  end function first_line

  subroutine parse_args(cfg, nprocs)
    ! --n N (at least 2 points per rank), --iters N, --check-every N. A bad one: cfg(1) = 1, said on stderr;
    ! --help: cfg(1) = -1.
    use, intrinsic :: iso_fortran_env, only: error_unit
    integer, intent(inout) :: cfg(4)
    integer, intent(in) :: nprocs
    character(len=256) :: opt, val
    integer :: i, k, v, ios, idx
    i = 1
    do while (i <= command_argument_count())
      call get_command_argument(i, opt)
      k = index(opt, '=')
      if (k > 0) then
        val = opt(k + 1:); opt = opt(1:k - 1); i = i + 1
      else
        call get_command_argument(i + 1, val); i = i + 2
      end if
      select case (trim(opt))
      case ('--n'); idx = 2
      case ('--iters'); idx = 3
      case ('--check-every'); idx = 4
      case ('--help')
        print '(a)', 'usage: fjacobi [--n 100000] [--iters 200] [--check-every 10]'
        cfg(1) = -1; return
      case default
        write (error_unit, '(a)') 'fjacobi: error: ' // trim(opt) // ': unknown option'
        cfg(1) = 1; return
      end select
      read (val, *, iostat=ios) v
      if (ios /= 0 .or. v < 1 .or. verify(trim(val), '0123456789') /= 0) then
        write (error_unit, '(a)') 'fjacobi: error: ' // trim(opt) // ': not a positive integer: ' // trim(val)
        cfg(1) = 1; return
      end if
      cfg(idx) = v
    end do
    if (cfg(2) < 2 * nprocs) then
      write (error_unit, '(a)') 'fjacobi: error: --n: fewer than 2 points per rank'
      cfg(1) = 1
    end if
  end subroutine parse_args
end program fjacobi
