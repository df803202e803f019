# Sourced by bench/gpu/run.sh and bench/gpu/sanitize.sh: what both do on a GPU machine. Expects
# root (the repository) and logs (a folder for the logs) to be set.

log() { echo "$(basename "$0"): $*" >&2; }

# GoogleTest and OpenBLAS unpacked by bench/gpu/fetch_deps.sh, for a machine without them.
deps=$root/.gpu-deps
if [ -d "$deps" ]; then
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi

# build_targets TARGET...: configures (the whole project when its dependencies are installed,
# else the kernels-only project in bench/gpu/CMakeLists.txt) and builds the targets; sets `build`
# to the build folder and returns non-zero, with the log's end printed, when either step fails.
build_targets() {
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
