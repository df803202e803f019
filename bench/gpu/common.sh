# Sourced by bench/gpu/run.sh and bench/gpu/sanitize.sh: what both do on a GPU machine. Expects
# root (the repository) and logs (a folder for the logs) to be set.

log() { echo "$(basename "$0"): $*" >&2; }

# GoogleTest and OpenBLAS unpacked by bench/gpu/fetch_deps.sh, for a machine without them.
deps=$root/.gpu-deps
if [ -d "$deps" ]; then
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi

# Executables that bench/gpu/pack_prebuilt.sh built and packed on a build machine: used when they
# load here (every library found), which saves the GPU call its compile time.
use_prebuilt() {
  local bundle=$root/.gpu-prebuilt/bundle.tar.xz unpacked=$root/.gpu-prebuilt/unpacked
  [ -f "$bundle" ] || return 1
  rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -xJf "$bundle" -C "$unpacked" || return 1
  local cuda_libs
  cuda_libs=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/*/lib \
    /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib -maxdepth 0 -type d 2>/dev/null |
    paste -sd:)
  export LD_LIBRARY_PATH="$unpacked/lib:${cuda_libs}:${LD_LIBRARY_PATH:-}"
  local t missing
  for t in "$@"; do
    [ -x "$unpacked/bin/$t" ] || { log "the bundle lacks $t"; return 1; }
    missing=$(ldd "$unpacked/bin/$t" | grep 'not found')
    [ -z "$missing" ] || { log "prebuilt $t does not load: $missing"; return 1; }
  done
  build=$unpacked
  log "using the prebuilt $* (built at commit $(cat "$unpacked/commit"))"
}

# build_targets TARGET...: the prebuilt executables when they load, else configures (the whole project when its dependencies are installed,
# else the kernels-only project in bench/gpu/CMakeLists.txt) and builds the targets; sets `build`
# to the build folder and returns non-zero, with the log's end printed, when either step fails.
build_targets() {
  use_prebuilt "$@" && return 0
  build=$root/build-gpu/project
  if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSEL_CUDA=ON \
      > "$logs/configure.log" 2>&1; then
    log "configured the whole project"
  else
    log "the whole project does not configure here (configure.log); building kernels only"
    build=$root/build-gpu/kernels
    local dep_args=()
    [ -d "$deps" ] && dep_args=(-DTESSEL_DEPS_PREFIX="$deps")
    if ! cmake -S "$root/bench/gpu" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        "${dep_args[@]}" >> "$logs/configure.log" 2>&1; then
      log "configure failed:"; tail -30 "$logs/configure.log" >&2; return 1
    fi
  fi
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  log "building $*"
  if ! cmake --build "$build" "${targets[@]}" -j16 > "$logs/build.log" 2>&1; then
    log "build failed:"; tail -40 "$logs/build.log" >&2; return 1
  fi
}

# The path of a built executable.
built() { find "$build" -name "$1" -type f -perm -u+x | head -1; }

# pack_logs ARCHIVE: every log in one file (a machine may hand back only a few files).
pack_logs() { tar -czf "$1" -C "$logs" . 2>/dev/null || log "could not pack the logs into $1"; }
