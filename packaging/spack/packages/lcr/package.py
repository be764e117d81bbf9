# lcr's Spack recipe, kept with the sources it builds (docs/install.md, "The Spack route").
import os

try:  # Spack 1.0 and later keep the build systems in the builtin repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:  # older Spack exports them from spack.package
    pass
from spack.package import *  # noqa: F401,F403

# The recipe lives in the checkout it builds (packaging/spack/packages/lcr/package.py), so the
# checkout itself is the source: `spack install lcr@main` clones its main branch, and
# `spack develop --path <checkout> lcr@main` builds the working tree as it is.
_CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


class Lcr(CMakePackage, CudaPackage):
    """Long-context attention research platform: GOAT, PoPE, PaTH and baseline attention
    kernels on Kokkos (and CUDA tensor cores), a context-parallel ring over MPI or NCCL,
    HDF5 run files, SLURM templates and Python analysis tools."""

    git = "file://" + _CHECKOUT

    version("main", branch="main")

    variant("openmp", default=True, description="Threads in each rank: Kokkos's OpenMP backend")
    variant("nccl", default=False, description="NCCL communicator and GPU ring (needs +cuda)")
    variant("tests", default=False, description="Build the test suite (GoogleTest)")

    depends_on("c", type="build")  # find_package(HDF5) try-compiles C
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")
    depends_on("kokkos@3.4:")
    depends_on("kokkos+openmp", when="+openmp")
    depends_on("kokkos+serial", when="~openmp")
    depends_on("mpi")
    depends_on("hdf5@1.10:")  # serial or parallel (+mpi): lcr writes from one rank
    depends_on("tomlplusplus@3:")
    depends_on("cli11@2.1:")
    depends_on("spdlog")
    depends_on("fmt")
    depends_on("googletest", type="build", when="+tests")

    depends_on("cuda@12:", when="+cuda")
    depends_on("nccl", when="+nccl")
    conflicts("+nccl", when="~cuda", msg="NCCL moves device buffers: +nccl needs +cuda")
    # The tensor-core kernels use bf16 mma.sync: sm_80 and newer.
    for _arch in CudaPackage.cuda_arch_values:
        if _arch.isdigit() and int(_arch) < 80:
            conflicts(f"cuda_arch={_arch}", when="+cuda", msg="lcr's CUDA kernels need sm_80+")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU: cuda_arch=80, 90, ...")
    # GCC 12 miscompiles the mdspan View of Kokkos 4.6+ (Kokkos issue #7464) unless Kokkos
    # was built with Kokkos_ENABLE_IMPL_VIEW_LEGACY. No variant says which (Spack's kokkos
    # sets it for 4.7.00 only, an external one may have it), so lcr's configure step, which
    # reads the Kokkos it finds, is where that pair is refused, with the fix.

    def cmake_args(self):
        args = [
            self.define("Kokkos_ROOT", self.spec["kokkos"].prefix),
            self.define_from_variant("LCR_ENABLE_CUDA", "cuda"),
            self.define_from_variant("LCR_ENABLE_NCCL", "nccl"),
            self.define_from_variant("LCR_BUILD_TESTS", "tests"),
            self.define("LCR_BUILD_BENCHMARKS", False),
        ]
        if self.spec.satisfies("+cuda"):
            archs = self.spec.variants["cuda_arch"].value
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", ";".join(archs)))
        return args
