#!/usr/bin/env bash
# Puts memloop on PATH for the GitHub Action (action.yml): the release binary for this runner,
# verified against the release's sha256 file. When the release of this version has no binary for
# this runner, it says so once and leaves the build to the action, which caches what it builds:
# it writes `build=true`, `root=<install root>` and `cache-key=<runner, version, source digest>`
# to GITHUB_OUTPUT and puts <install root>/bin on GITHUB_PATH.
#
# Environment: MEMLOOP_SOURCE (the action's checkout, required), MEMLOOP_REPOSITORY (owner/name
# of the action; else taken from MEMLOOP_SOURCE's path under _actions/, else GITHUB_REPOSITORY),
# MEMLOOP_RELEASE_URL (a mirror of the release assets: <url>/<asset>), RUNNER_OS, RUNNER_ARCH,
# RUNNER_TEMP, RUNNER_TOOL_CACHE, GITHUB_PATH, GITHUB_OUTPUT as GitHub sets them.
set -euo pipefail

source_dir=${MEMLOOP_SOURCE:?MEMLOOP_SOURCE must name the action checkout}

if command -v memloop >/dev/null 2>&1; then
  echo "memloop already on PATH: $(memloop --version)"
  exit 0
fi

version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' "$source_dir/Cargo.toml")
if [ -z "$version" ]; then
  echo "::error::no [package] version in $source_dir/Cargo.toml" >&2
  exit 1
fi

case "${RUNNER_OS:-}-${RUNNER_ARCH:-}" in
  Linux-X64) target=x86_64-unknown-linux-musl ;;
  Linux-ARM64) target=aarch64-unknown-linux-musl ;;
  macOS-X64) target=x86_64-apple-darwin ;;
  macOS-ARM64) target=aarch64-apple-darwin ;;
  Windows-X64) target=x86_64-pc-windows-msvc ;;
  *) target="" ;;
esac

repository=${MEMLOOP_REPOSITORY:-}
if [ -z "$repository" ]; then
  # GitHub checks actions out to <runner>/_actions/<owner>/<name>/<ref>.
  # Windows runners give the path with backslashes.
  source_path=${source_dir//\\//}
  case "$source_path" in
    */_actions/*/*) rest=${source_path#*/_actions/}; repository=$(echo "$rest" | cut -d/ -f1-2) ;;
    *) repository=${GITHUB_REPOSITORY:-} ;;
  esac
fi
base=${MEMLOOP_RELEASE_URL:-${GITHUB_SERVER_URL:-https://github.com}/$repository/releases/download/v$version}
base=${base%/}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

# The build is keyed on what it is built from, so an unchanged action reuses its binary.
from_source() {
  echo "$1; building memloop $version from the action's source (cargo install, cached for the next runs)"
  local digest root
  digest=$(cd "$source_dir" && find Cargo.toml Cargo.lock src assets -type f -print0 | LC_ALL=C sort -z |
    xargs -0 cat | sha256_of | cut -c1-16)
  root="${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}/memloop-build"
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
      echo "build=true"
      echo "root=$root"
      echo "cache-key=memloop-${RUNNER_OS:-os}-${RUNNER_ARCH:-arch}-v$version-$digest"
    } >> "$GITHUB_OUTPUT"
  fi
  if [ -n "${GITHUB_PATH:-}" ]; then echo "$root/bin" >> "$GITHUB_PATH"; fi
}

if [ -z "$target" ]; then
  from_source "no memloop release binary for runner ${RUNNER_OS:-?} ${RUNNER_ARCH:-?}"
  exit 0
fi

name="memloop-$target-v$version"
exe=memloop
asset="$name.tar.gz"
if [ "$target" = x86_64-pc-windows-msvc ]; then exe=memloop.exe; asset="$name.zip"; fi

work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/memloop-install.XXXXXX")
status=$(curl --silent --show-error --location --retry 3 --output "$work/$asset" --write-out '%{http_code}' "$base/$asset") || {
  echo "::error::could not download $base/$asset (network?); rerun the job" >&2
  exit 1
}
case "$status" in
  200) ;;
  404) from_source "no release asset $asset at $base"; exit 0 ;;
  *) echo "::error::downloading $base/$asset answered HTTP $status; rerun the job" >&2; exit 1 ;;
esac

if ! curl --fail --silent --show-error --location --retry 3 --output "$work/$asset.sha256" "$base/$asset.sha256"; then
  echo "::error::the release has $asset but not $asset.sha256 to check it against; not installing it" >&2
  exit 1
fi
expected=$(cut -d' ' -f1 < "$work/$asset.sha256" | tr -d '\r\n')
actual=$(sha256_of "$work/$asset" | cut -d' ' -f1)
if [ -z "$expected" ] || [ "$actual" != "$expected" ]; then
  echo "::error::$asset from $base has sha256 $actual, but $asset.sha256 says ${expected:-nothing}; not installing it" >&2
  exit 1
fi

case "$asset" in
  *.zip)
    if command -v unzip >/dev/null 2>&1; then unzip -q "$work/$asset" -d "$work"; else 7z x -y -bso0 "-o$work" "$work/$asset"; fi ;;
  *) tar xzf "$work/$asset" -C "$work" ;;
esac
bin_dir="$work/$name"
if [ ! -f "$bin_dir/$exe" ]; then
  echo "::error::$asset holds no $name/$exe" >&2
  exit 1
fi
chmod +x "$bin_dir/$exe"
answered=$("$bin_dir/$exe" --version | tr -d '\r')
if [ "$answered" != "memloop $version" ]; then
  echo "::error::the binary in $asset says \"$answered\", expected \"memloop $version\"" >&2
  exit 1
fi
if [ -n "${GITHUB_PATH:-}" ]; then echo "$bin_dir" >> "$GITHUB_PATH"; fi
echo "installed $answered ($target, sha256 $actual) into $bin_dir"
