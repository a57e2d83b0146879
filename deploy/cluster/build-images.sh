#!/usr/bin/env bash
# Builds the images of deploy/cluster/docker-compose.yml with no container registry:
#   mosaic-debian:bookworm   a minimal Debian 12 rootfs (debootstrap), imported with `docker import`
#   mosaic-patroni:latest    FROM it: etcd + Patroni + PostgreSQL 15 (Debian packages), Dockerfile
#   mosaicdb:latest          the server on `scratch`: deploy/build-image.sh (cargo; --with-mosaicdb)
# The Debian mirror is the one this machine's apt uses (DEBIAN_MIRROR overrides it). Needs root
# (debootstrap) and a Docker engine. A base image already there is reused (--rebuild-base: not).
set -euo pipefail
cd "$(dirname "$0")"

base=mosaic-debian:bookworm
rebuild_base=false with_mosaicdb=false
for arg in "$@"; do
  case "$arg" in
    --rebuild-base) rebuild_base=true ;;
    --with-mosaicdb) with_mosaicdb=true ;;
    *) echo "usage: $0 [--rebuild-base] [--with-mosaicdb]" >&2; exit 2 ;;
  esac
done

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources | head -n 1)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || { echo "no Debian mirror found in apt's sources: set DEBIAN_MIRROR" >&2; exit 1; }

if $rebuild_base || ! docker image inspect "$base" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || apt-get install -y --no-install-recommends debootstrap
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >&2
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --numeric-owner -c . | docker import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  echo "imported $base" >&2
fi

docker build --tag mosaic-patroni:latest .
if $with_mosaicdb; then
  ../build-image.sh mosaicdb:latest
fi
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^(mosaic-debian|mosaic-patroni|mosaicdb):' >&2
