#!/usr/bin/env bash
# make js-sdk: what tests/web/test_langgraph_js.py runs, installed into the directory given
# (.cache/js-sdk): the JS LangGraph SDK tests/js/package-lock.json pins, with npm ci, once per
# lock. As root, a missing node and npm are installed with apt (Debian's nodejs and npm), the
# way make browser installs chromium; otherwise it stops with the one command to run. The SDK
# needs node 20 or newer (its packages' engines): on an x86-64 machine whose node is older
# (Debian 12's is 18), the node that tests/js/node/package-lock.json pins is installed from
# the npm registry into <dir>/node, and the test runs that one.
set -euo pipefail
cd "$(dirname "$0")/../.."
into=${1:?usage: tests/js/install.sh DIRECTORY}
need=20

fail() {
    echo "error: $*" >&2
    exit 1
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing node and npm (apt) for the JS SDK test"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
    else
        fail "the JS SDK test needs node and npm: run 'sudo apt-get install -y nodejs npm' and retry"
    fi
fi

# npm ci of the package.json and lock in $1 into $2, unless that lock is installed there.
ci() {
    local from=$1 dir=$2 stamp
    stamp="$dir/.installed-$(cksum <"$from/package-lock.json" | cut -d' ' -f1)"
    [ -f "$stamp" ] && return 0
    echo "installing $from/package-lock.json (npm ci) into $dir"
    mkdir -p "$dir"
    rm -f "$dir"/.installed-*
    cp "$from/package.json" "$from/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
        fail "npm ci of $from/package-lock.json into $dir failed (above): fix it and run 'make js-sdk'"
    touch "$stamp"
}

ci tests/js "$into"
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt "$need" ]; then
    [ "$(uname -m)" = x86_64 ] ||
        fail "the JS SDK needs node $need or newer, this is $(node --version): install one and retry"
    ci tests/js/node "$into/node"
fi
