#!/usr/bin/env bash
# Builds the mosaicdb container image with no network access: a static binary (glibc linked in with
# crt-static, so it needs no shared library) on a `scratch` base, which no registry has to provide.
#
#   deploy/build-image.sh [tag]        (default tag: mosaicdb:latest, also tagged mosaicdb:<version>)
#
# Needs the Rust toolchain and a Docker engine. The static build goes to its own target triple
# directory, so it leaves the normal build alone.
set -euo pipefail
cd "$(dirname "$0")/.."

tag="${1:-mosaicdb:latest}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
triple="$(rustc -vV | sed -n 's/^host: //p')"

echo "building the static binary for $triple" >&2
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --profile image --locked --target "$triple" --target-dir "$target_dir" --bin mosaicdb
binary="$target_dir/$triple/image/mosaicdb"
if ldd "$binary" 2>/dev/null | grep -q '=>'; then
  echo "$binary links shared libraries; a scratch image cannot run it" >&2
  exit 1
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
cp deploy/Dockerfile "$context/Dockerfile"
cp "$binary" "$context/mosaicdb"
mkdir "$context/data"
printf 'root:x:0:0:root:/:/sbin/nologin\nmosaic:x:10001:10001:mosaicdb:/data:/sbin/nologin\n' > "$context/passwd"
printf 'root:x:0:\nmosaic:x:10001:\n' > "$context/group"

echo "building image $tag" >&2
docker build --quiet --tag "$tag" --tag "mosaicdb:$version" \
  --label "org.opencontainers.image.title=mosaicdb" \
  --label "org.opencontainers.image.version=$version" \
  "$context" >/dev/null
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$tag" >&2
