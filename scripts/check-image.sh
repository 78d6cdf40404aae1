#!/usr/bin/env bash
# Build the container image with podman and run its smoke check (the Dockerfile's `smoke`
# stage: `consultation-bot --help`, the production smoke scripts/smoke_installed.py that CI
# also runs on the wheel, the API's health check and SIGTERM), then the runtime image itself.
#
#   scripts/check-image.sh                      # base: a minimal Debian made with debootstrap
#   BASE_IMAGE=python:3.12-slim scripts/check-image.sh   # where a registry can be reached
#
# For machines that can build but not run containers, and that reach no image registry:
# the checks run as build steps (rootless or root podman, chroot isolation, vfs storage),
# and without BASE_IMAGE a base image is made locally (debootstrap, as root) once and kept
# as $LOCAL_BASE. pip inside the build uses this machine's package index settings (pip
# config and PIP_* variables: index-url, extra-index-url, trusted-host; http(s) only),
# passed as build arguments, and its `cert` CA bundle, passed as the build secret pip_cert.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-consultation-bot}
LOCAL_BASE=${LOCAL_BASE:-localhost/consultation-bot-base:debian-stable}
PODMAN=(podman --storage-driver="${STORAGE_DRIVER:-vfs}")

make_local_base() {
    local root
    root=$(mktemp -d)
    trap 'rm -rf "$root"' RETURN
    echo "== making the base image $LOCAL_BASE with debootstrap (a few minutes)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        stable "$root" http://deb.debian.org/debian >/dev/null
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
    chmod 755 "$root"  # mktemp's 0700 would become the image's /: no user but root could run
    tar -C "$root" -c . | "${PODMAN[@]}" import - "$LOCAL_BASE"
}

pip_setting() {  # pip_setting NAME: the value pip uses here (PIP_* variable, then config)
    local name=$1 env_name value
    env_name=PIP_$(echo "$name" | tr 'a-z-' 'A-Z_')
    value=${!env_name:-}
    if [ -z "$value" ]; then
        value=$(pip config list 2>/dev/null \
            | sed -n "s/^[a-z:]*\.$name='\(.*\)'$/\1/p" | tail -n 1)
    fi
    # Only addresses the build can reach: a file:// index exists on this machine only.
    local kept=()
    for item in $value; do
        case $item in file:* | /*) ;; *) kept+=("$item") ;; esac
    done
    echo "${kept[*]:-}"
}

if [ -z "${BASE_IMAGE:-}" ]; then
    BASE_IMAGE=$LOCAL_BASE
    "${PODMAN[@]}" image exists "$BASE_IMAGE" || make_local_base
fi

build_args=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
for setting in index-url extra-index-url trusted-host; do
    value=$(pip_setting "$setting")
    if [ -n "$value" ]; then
        build_args+=(--build-arg "PIP_$(echo "$setting" | tr 'a-z-' 'A-Z_')=$value")
    fi
done

cert=${PIP_CERT:-$(pip config list 2>/dev/null | sed -n "s/^[a-z:]*\.cert='\(.*\)'$/\1/p" | tail -n 1)}
if [ -n "$cert" ] && [ -s "$cert" ]; then
    build_args+=(--secret "id=pip_cert,src=$cert")
fi

build() {  # build TARGET TAG
    # docker format: the OCI format has no HEALTHCHECK, STOPSIGNAL is kept by both.
    "${PODMAN[@]}" build --format docker --isolation=chroot --network=host "${build_args[@]}" \
        --target "$1" --tag "$2" --file Dockerfile .
}

echo "== base image: $BASE_IMAGE"
echo "== building the smoke stage (its RUN step is the check)"
build smoke "$IMAGE:smoke"
echo "== building the runtime image"
build runtime "$IMAGE:latest"
"${PODMAN[@]}" image inspect "$IMAGE:latest" \
    --format 'runtime image: {{.Size}} bytes; user {{.Config.User}}; entrypoint {{.Config.Entrypoint}} {{.Config.Cmd}}; volumes {{.Config.Volumes}}; stop signal {{.Config.StopSignal}}; health check {{.Config.Healthcheck.Test}} every {{.Config.Healthcheck.Interval}}'
config=$("${PODMAN[@]}" image inspect "$IMAGE:latest" \
    --format '{{.Config.User}}|{{.Config.Entrypoint}}|{{.Config.Healthcheck.Test}}')
case $config in
    consult\|"[tini -- consultation-bot]"\|*healthcheck.py*) ;;
    *) echo "FAILED: the runtime image's user, entry point or health check: $config" >&2; exit 1 ;;
esac
echo "== image check passed"
