"""A small preloaded library that can hold back the candidate's own kernel launches (knockout).

Why a preloaded C library: the decoy defence asks whether forward's output depends on the
candidate's own kernels, so those kernels, and only those, must be switched off for one forward
while torch's and cuBLAS's run as usual. A wrapper around the extension's Python functions cannot
do it (a C++ function that launches a decoy kernel and returns ``at::matmul`` would count as the
candidate's work). Every ``<<<...>>>`` launch in a built extension is a dynamic call into the CUDA
runtime (``__cudaGetKernel`` once per launch site, then ``__cudaLaunchKernel`` or its per-thread
stream twin; ``cudaLaunchKernel`` for direct and legacy launches), so a library preloaded into
the runner (``LD_PRELOAD``) sees each launch first. It records which kernel handles come from a
library under the candidate's build folder (``dladdr``), and while switched on it returns
success for those without launching and counts them; everything else goes straight through. It
costs one flag test per launch when off.

Not covered: kernels started through the driver API, ``cudaLaunchKernelEx`` / cooperative
launches or CUDA graph replays; the knockout then observes no own launch and the judge says so and
falls back to the time share. ``cudarl.nvrtc`` launches are held back in Python (``knockout``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from cudarl import env
from cudarl.files import file_lock

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

typedef int status_t;
typedef struct { unsigned x, y, z; } dims_t;
typedef status_t (*launch_t)(void *, dims_t, dims_t, void **, size_t, void *);
typedef status_t (*get_kernel_t)(void **, const void *);

#define MAX_OWN 4096
static volatile int active = 0;
static volatile long skipped = 0;
static char prefix[4096] = "";
static void *own[MAX_OWN];
static int owned = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int own_address(const void *address) {
    Dl_info info;
    if (!prefix[0] || !address || !dladdr(address, &info) || !info.dli_fname) return 0;
    return strncmp(info.dli_fname, prefix, strlen(prefix)) == 0;
}

static int own_handle(void *handle) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < owned && !found; i++) found = own[i] == handle;
    pthread_mutex_unlock(&lock);
    return found;
}

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

status_t __cudaGetKernel(void **handle, const void *entry) {
    static get_kernel_t real;
    if (!real) real = (get_kernel_t)next("__cudaGetKernel");
    status_t status = real(handle, entry);
    if (status == 0 && handle && *handle && own_address(entry)) {
        pthread_mutex_lock(&lock);
        if (owned < MAX_OWN) own[owned++] = *handle;
        pthread_mutex_unlock(&lock);
    }
    return status;
}

#define HOLD_BACK(name, test)                                                              \
    status_t name(void *kernel, dims_t grid, dims_t block, void **args, size_t shared,    \
                  void *stream) {                                                          \
        static launch_t real;                                                              \
        if (active && test(kernel)) { __sync_fetch_and_add(&skipped, 1); return 0; }       \
        if (!real) real = (launch_t)next(#name);                                           \
        return real(kernel, grid, block, args, shared, stream);                            \
    }

HOLD_BACK(__cudaLaunchKernel, own_handle)
HOLD_BACK(__cudaLaunchKernel_ptsz, own_handle)
HOLD_BACK(cudaLaunchKernel, own_address)
HOLD_BACK(cudaLaunchKernel_ptsz, own_address)

void cudarl_knockout_prefix(const char *path) { strncpy(prefix, path, sizeof(prefix) - 1); }
void cudarl_knockout_switch(int on) { active = on; }
long cudarl_knockout_skipped(void) { return skipped; }
int cudarl_knockout_owned(void) { return owned; }
"""

LIBRARY_NAME = "libcudarl_launch_shim.so"


def build_shim(root: Path) -> Path | None:
    """The shim compiled once per source under ``root``; None without a working C compiler (the
    judge then says the knockout was unavailable and the time share decides), never an error:
    a tester must still judge without it."""
    try:
        return _build(root)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"cudarl: the launch shim could not be built ({exc}); own-kernel dependence falls back to the "
              "time share", flush=True)
        return None


def _build(root: Path) -> Path | None:
    compiler = shutil.which(env.get(env.CC) or "cc") or shutil.which("gcc")
    if compiler is None:
        return None
    folder = root / "launch-shim" / hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    library = folder / LIBRARY_NAME
    if library.exists():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / "build.lock"):
        if not library.exists():
            (folder / "shim.c").write_text(SOURCE)
            partial = folder / f"{LIBRARY_NAME}.{os.getpid()}"
            subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(folder / "shim.c"),
                            "-ldl", "-lpthread"], check=True, capture_output=True, timeout=120)
            partial.replace(library)
    return library


def preload_environment(library: Path | None) -> dict[str, str]:
    """The runner's extra environment: ``LD_PRELOAD`` with the shim in front."""
    if library is None:
        return {}
    current = env.get(env.LD_PRELOAD) or ""
    return {env.LD_PRELOAD: f"{library}:{current}" if current else str(library)}


class LaunchShim:
    """The runner's handle on the preloaded shim (the same copy the dynamic linker loaded)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.library = library
        self.library.cudarl_knockout_skipped.restype = ctypes.c_long

    @classmethod
    def loaded(cls) -> LaunchShim | None:
        """The shim if it was preloaded into this process, else None."""
        for entry in (env.get(env.LD_PRELOAD) or "").split(":"):
            if entry.endswith(LIBRARY_NAME):
                return cls(ctypes.CDLL(entry))
        return None

    def own_folder(self, path: Path) -> None:
        """Kernels from libraries under ``path`` (the candidate's build folder) are the candidate's."""
        self.library.cudarl_knockout_prefix(os.path.abspath(path).encode())

    def switch(self, on: bool) -> None:
        self.library.cudarl_knockout_switch(1 if on else 0)

    def skipped(self) -> int:
        return int(self.library.cudarl_knockout_skipped())

    def owned(self) -> int:
        return int(self.library.cudarl_knockout_owned())
