#!/usr/bin/env bash
# Builds the kernelboard image with podman (no Docker daemon needed). Usage: build.sh [TAG] (default dev) →
# localhost/kernelboard:TAG, also tagged kernelboard/<process>:TAG for each image name deploy/k8s/base uses (the
# overlays' `images:` set TAG: dev, or the release). Run from anywhere; the context is the repository root.
#   KB_IMAGE_BASE   a Debian bookworm image to build on; unset: localhost/kernelboard-base:bookworm, made by base.sh
#                   (debootstrap) when missing.
#   PIP_FIND_LINKS  a folder of wheels (as pip reads it): mounted into the build and searched too.
#   PIP_CERT        a CA bundle (as pip reads it), for HTTPS through a proxy: mounted into the build for pip.
#   KB_PODMAN_FLAGS global podman flags, e.g. "--runtime runc" (default where runc is installed: crun cannot run
#                   containers on cgroup v1/v2 hybrid machines such as these).
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-dev}
base=${KB_IMAGE_BASE:-localhost/kernelboard-base:bookworm}
if [ -z "${KB_IMAGE_BASE:-}" ] && ! podman image exists "$base"; then
    deploy/container/base.sh "$base"
fi
default_flags=""
command -v runc >/dev/null && default_flags="--runtime runc"
read -r -a flags <<<"${KB_PODMAN_FLAGS-$default_flags}"
# RUN steps get limits below the machine's: a process without CAP_SYS_RESOURCE cannot give them podman's defaults.
args=(--network host --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --build-arg "BASE=$base")
if [ -n "${PIP_FIND_LINKS:-}" ] && [ -d "$PIP_FIND_LINKS" ]; then
    args+=(-v "$PIP_FIND_LINKS:/run/wheels:ro" --build-arg WHEELS_DIR=/run/wheels)
fi
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
    args+=(-v "$PIP_CERT:/run/pip-ca.crt:ro" --build-arg PIP_CA_BUNDLE=/run/pip-ca.crt)
fi
podman "${flags[@]}" build "${args[@]}" -f deploy/container/Containerfile -t "localhost/kernelboard:$tag" .
for process in ingest scheduler verifier board relay web; do
    podman tag "localhost/kernelboard:$tag" "kernelboard/$process:$tag"
done
