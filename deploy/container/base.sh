#!/usr/bin/env bash
# A Debian bookworm base image made from Debian's own archive with debootstrap, for a machine that reaches no
# container registry (the Containerfile's default base comes from one). Usage: base.sh [IMAGE]
# KB_DEBIAN_MIRROR: the archive (default deb.debian.org).
set -euo pipefail
image=${1:-localhost/kernelboard-base:bookworm}
work=$(mktemp -d /var/tmp/kb-image-base.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase bookworm "$work/rootfs" "${KB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The downloaded packages are installed: they would only weigh on every layer above.
rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
tar -C "$work/rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$image"
