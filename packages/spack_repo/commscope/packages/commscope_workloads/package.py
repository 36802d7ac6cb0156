# The commscope MPI workloads (halo3d, stencil2d, commgraph, ...), built from this
# checkout: spack.yaml at the repository root marks the package as `develop` with
# path workloads/, so Spack builds the local source and downloads nothing.

import glob
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage

from spack.package import *


class CommscopeWorkloads(CMakePackage):
    """C11 MPI mini-apps that exercise halo exchange, collectives and I/O patterns, and a Fortran one,
    optionally annotated with Caliper regions and Adiak metadata."""

    # No url or git: the only version is the local source, given by `develop:`.
    version("develop")

    # One variant per option of workloads/CMakeLists.txt.
    variant(
        "caliper",
        default=True,
        description="Annotate with Caliper regions and Adiak metadata (COMMSCOPE_WITH_CALIPER)",
    )

    depends_on("c", type="build")
    # fjacobi and libcommscope-mpif (workloads/CMakeLists.txt), built where the MPI has Fortran bindings.
    depends_on("fortran", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("mpi")
    # The annotations need the MPI services of Caliper (profile.mpi, comm.stats)
    # and Adiak's MPI job metadata, built against the same MPI as the workloads.
    depends_on("caliper+adiak+mpi", when="+caliper")
    depends_on("adiak+mpi", when="+caliper")

    def cmake_args(self):
        # FindMPI takes whatever mpicc is first on PATH unless told: hand it the
        # wrapper of the MPI this spec was concretized against.
        args = [
            self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
            # ON, not AUTO: a +caliper build that silently lost Caliper would
            # produce unannotated binaries under an annotated spec.
            self.define("COMMSCOPE_WITH_CALIPER", "ON" if self.spec.satisfies("+caliper") else "OFF"),
        ]
        # The Fortran workload with the same MPI's Fortran wrapper; an MPI without one (the PyPI wheels' Open MPI
        # 5 and MPICH 5) builds the C workloads alone, as setup does.
        mpifc = getattr(self.spec["mpi"], "mpifc", None)
        if mpifc and os.path.exists(mpifc):
            args.append(self.define("MPI_Fortran_COMPILER", mpifc))
            if self.spec["mpi"].name == "intel-oneapi-mpi":
                args.extend(self.intel_mpi_fortran(os.path.dirname(os.path.dirname(mpifc))))
        if self.spec.satisfies("+caliper"):
            # Caliper installs its CMake package under share/, Adiak under lib/.
            args.append(self.define("caliper_DIR", self.spec["caliper"].prefix.share.cmake.caliper))
            args.append(self.define("adiak_DIR", self.spec["adiak"].prefix.lib.cmake.adiak))
        return args

    def intel_mpi_fortran(self, root):
        """FindMPI's settings for Intel MPI with gfortran, given instead of asking its wrapper, which names a module
        folder the wheel lacks and modules for Intel's compilers (workloads/README.md, as `commscope setup` passes
        them): gfortran's modules for its major version, mpif.h, libmpifort and libmpi."""
        major = str(self.spec["fortran"].version.up_to(1))
        found = sorted(glob.glob(os.path.join(root, "include", "mpi", "gfortran", major + ".*")))
        if not found:
            return []
        return [
            self.define("MPI_Fortran_COMPILER_INCLUDE_DIRS", [found[-1], os.path.join(root, "include")]),
            self.define("MPI_Fortran_LIB_NAMES", ["mpifort", "mpi"]),
            self.define("MPI_mpifort_LIBRARY", os.path.join(root, "lib", "libmpifort.so")),
            self.define("MPI_mpi_LIBRARY", os.path.join(root, "lib", "libmpi.so")),
            # libmpifort needs libmpi but carries no path to it: the program must name it
            self.define("MPI_Fortran_LINK_FLAGS", "-Wl,--no-as-needed"),
            self.define("MPI_Fortran_COMPILE_OPTIONS", "-fallow-argument-mismatch"),
        ]
