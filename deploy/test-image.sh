#!/usr/bin/env bash
# The container end to end, where a Docker engine is present (skipped, saying so, where none is):
# builds the image, runs it on a named volume with an API key, waits for the image's own health
# check, writes and reads a document, checks the server runs as a non-root user, stops it (it must
# exit 0 within the grace period), starts it again and reads the document back from the volume,
# then does the same through a new container on the same volume, and finally brings the compose
# file up and checks its health.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "test-image: no Docker engine here; skipping the container test"
  exit 0
fi

run_id="mosaicdb-test-$$"
tag="mosaicdb:latest"
volume="$run_id-data"
key="ci-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
grace=20

cleanup() {
  # by name: start_container runs in a command substitution, so it cannot add to an array here
  for c in $(docker ps -aq --filter "name=^$run_id-"); do docker rm -f "$c" >/dev/null 2>&1 || true; done
  docker volume rm -f "$volume" >/dev/null 2>&1 || true
  if [[ -n "${compose_project:-}" ]]; then
    MOSAIC_API_KEYS="ci:admin:$key" docker-compose -p "$compose_project" -f deploy/docker-compose.yml \
      down -v >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

fail() {
  echo "test-image: FAILED: $*" >&2
  for c in $(docker ps -aq --filter "name=^$run_id-"); do docker logs --tail 50 "$c" >&2 2>&1 || true; done
  exit 1
}

deploy/build-image.sh "$tag"

# Starts a container on the volume; prints its name.
start_container() {
  local name="$run_id-$1"
  docker run -d --name "$name" -p 127.0.0.1::8080 -v "$volume:/data" \
    -e "MOSAIC_API_KEYS=ci:admin:$key" "$tag" >/dev/null
  echo "$name"
}

# Waits until the image's HEALTHCHECK (mosaicdb health, no shell) reports healthy.
wait_healthy() {
  local c="$1" status=""
  for _ in $(seq 1 120); do
    status="$(docker inspect -f '{{.State.Health.Status}}' "$c")"
    [[ "$status" == healthy ]] && return 0
    [[ "$(docker inspect -f '{{.State.Running}}' "$c")" == true ]] || fail "$c exited"
    sleep 0.5
  done
  fail "$c did not become healthy (last status: $status)"
}

url_of() { echo "http://$(docker port "$1" 8080/tcp | head -n1)"; }

api() { # method url [body]
  curl -sS -o /tmp/"$run_id".body -w '%{http_code}' -X "$1" -H "Authorization: Bearer $key" \
    -H 'content-type: application/json' ${3:+--data "$3"} "$2"
}

# 1. Build, run, health check through the image's own HEALTHCHECK.
docker volume create "$volume" >/dev/null
c1="$(start_container first)"
# the health check runs every 10 s; ask for one now rather than wait for the interval
wait_healthy "$c1"
base="$(url_of "$c1")"

# 2. Write and read a document.
code="$(curl -sS -o /dev/null -w '%{http_code}' "$base/v1/tables")"
[[ "$code" == 401 ]] || fail "a request without a key answered $code, not 401"
code="$(api POST "$base/v1/tables" '{"name":"notes"}')"
[[ "$code" == 201 ]] || fail "creating a table answered $code: $(cat /tmp/$run_id.body)"
code="$(api PUT "$base/v1/tables/notes/documents/n1" '{"text":"kept across restarts"}')"
[[ "$code" == 200 || "$code" == 201 ]] || fail "PUT answered $code: $(cat /tmp/$run_id.body)"
read_back() {
  local code
  code="$(api GET "$1/v1/tables/notes/documents/n1")"
  [[ "$code" == 200 ]] || fail "GET answered $code: $(cat /tmp/$run_id.body)"
  grep -q '"kept across restarts"' /tmp/"$run_id".body || fail "GET returned $(cat /tmp/$run_id.body)"
}
read_back "$base"

# 3. Non-root: the image's user and the running process's real uid.
user="$(docker inspect -f '{{.Config.User}}' "$tag")"
[[ "$user" == 10001:10001 ]] || fail "the image's user is '$user'"
pid="$(docker inspect -f '{{.State.Pid}}' "$c1")"
uid="$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)"
if [[ -z "$uid" ]]; then uid="$(docker top "$c1" -o uid | tail -n1 | tr -d ' ')"; fi
[[ "$uid" == 10001 ]] || fail "the server runs as uid '$uid'"

# 4. docker stop: SIGTERM, graceful exit 0 well within the grace period (no SIGKILL).
started=$(date +%s%N)
docker stop -t "$grace" "$c1" >/dev/null
took_ms=$(( ($(date +%s%N) - started) / 1000000 ))
exit_code="$(docker inspect -f '{{.State.ExitCode}}' "$c1")"
[[ "$exit_code" == 0 ]] || fail "the server exited with $exit_code after SIGTERM (137 means it was killed)"
(( took_ms < grace * 1000 )) || fail "docker stop took ${took_ms} ms (grace ${grace}s)"
echo "test-image: docker stop took ${took_ms} ms, exit code 0"

# 5. Restart the same container: the document is read back from the volume.
docker start "$c1" >/dev/null
wait_healthy "$c1"
read_back "$(url_of "$c1")"
docker stop -t "$grace" "$c1" >/dev/null

# 6. A new container on the same volume.
c2="$(start_container second)"
wait_healthy "$c2"
read_back "$(url_of "$c2")"
docker stop -t "$grace" "$c2" >/dev/null

# 7. The compose file: parses, comes up healthy on its named volume, goes down.
if command -v docker-compose >/dev/null 2>&1; then
  compose_project="$run_id-compose"
  export MOSAIC_API_KEYS="ci:admin:$key"
  docker-compose -p "$compose_project" -f deploy/docker-compose.yml config -q
  # the compose file publishes 127.0.0.1:8080; another server on that port would clash
  if curl -s -o /dev/null "http://127.0.0.1:8080/health"; then
    echo "test-image: port 8080 is in use here; skipping the compose run"
  else
    docker-compose -p "$compose_project" -f deploy/docker-compose.yml up -d >/dev/null 2>&1
    cid="$(docker-compose -p "$compose_project" -f deploy/docker-compose.yml ps -q mosaicdb)"
    wait_healthy "$cid"
    code="$(api GET "http://127.0.0.1:8080/v1/tables")"
    [[ "$code" == 200 ]] || fail "the compose server answered $code"
  fi
else
  echo "test-image: docker-compose not installed; skipping the compose run"
fi

echo "test-image: ok (image $tag, $(docker image ls --format '{{.Size}}' "$tag"))"
