#!/usr/bin/env bash
# The whole suite against Debian 13 (trixie: PyTorch 2.6), on this Debian 12 machine: in a
# trixie chroot made from Debian's packages with debootstrap (minbase, about a minute), the
# checkout mounted at /vlrnn, runs the README's test command there (scripts/test.sh, the
# Slurm part skipped: no slurmd in a chroot; and the header check and the fuzzers, whose
# code is the same on both releases and uses no LibTorch but c10). Its builds live in the
# chroot (build/ and build-fuzz/ are mounted over from it), so this checkout's own builds
# stay as they are.
# The chroot is kept for the next run (VLRNN_TRIXIE_ROOT, default /var/tmp/vlrnn-trixie);
# everything it needs, scripts/install_deps.sh installs inside it. Needs root (or sudo).
# When it ends, it prints the seconds of each phase, as scripts/test.sh does.
# VLRNN_TRIXIE_COMMAND runs another command there instead (e.g. scripts/install_deps.sh:
# .ci/run makes the chroot and installs its packages so while scripts/test.sh runs, then
# runs the suite here).
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD
root=${VLRNN_TRIXIE_ROOT:-/var/tmp/vlrnn-trixie}
mirror=${VLRNN_DEBIAN_MIRROR:-http://deb.debian.org/debian}

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi

finished=""
trap 'echo "test_debian13.sh: ${finished}${SECONDS} s in all"' EXIT
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  finished+="$name $((SECONDS - start)) s, "
}

make_root() {
  [[ -x $root/usr/bin/apt-get ]] && return
  command -v debootstrap > /dev/null || {
    $sudo scripts/apt_get.sh update -q &&
      $sudo scripts/apt_get.sh install -y -q --no-install-recommends debootstrap
  }
  $sudo rm -rf "$root.partial" "$root"  # a root without apt-get is an unfinished one
  $sudo debootstrap --variant=minbase trixie "$root.partial" "$mirror"
  $sudo mv "$root.partial" "$root"
}

# In a mount namespace of its own (nothing mounted here outlives the run, whatever ends it):
# the kernel's file systems, the checkout at /vlrnn, and the chroot's build folders over
# /vlrnn/build and /vlrnn/build-fuzz; then the test command, as root in the chroot.
run_in_root() {
  $sudo mkdir -p "$root/vlrnn" "$root/var/vlrnn/build" "$root/var/vlrnn/build-fuzz"
  mkdir -p build build-fuzz  # mount points (ignored by git)
  $sudo unshare --mount --propagation private bash -euo pipefail -c '
    root=$1 source=$2
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs tmpfs "$root/tmp"
    mount --bind "$source" "$root/vlrnn"
    mount --bind "$root/var/vlrnn/build" "$root/vlrnn/build"
    mount --bind "$root/var/vlrnn/build-fuzz" "$root/vlrnn/build-fuzz"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp /etc/hosts "$root/etc/hosts"  # the host name resolves (the torchrun rendezvous)
    exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 VLRNN_SKIP_SLURM=1 VLRNN_SKIP_FUZZ=1 VLRNN_SKIP_HEADERS=1 \
      CI="${CI:-}" \
      VLRNN_TRIXIE_COMMAND="$3" \
      bash -c "cd /vlrnn && ${VLRNN_TRIXIE_COMMAND:-scripts/test.sh}"
  ' run_in_root "$root" "$source_dir" "${VLRNN_TRIXIE_COMMAND:-scripts/test.sh}"
}

phase debootstrap make_root
phase suite run_in_root
