#!/usr/bin/env bash
# Installs OpenSAND 8.2 from the OpenSAND project's Debian 12 package repository (the
# CNES/net4sat-packages repository on GitHub, the default) or a mirror of it, after
# checking its signing key against the pinned fingerprint. One path for the opensand
# image (images/opensand/Dockerfile) and for a Debian 12 host (the netns tests), as root.
#
#   opensand/install.sh [REPO_URL]     (or OPENSAND_REPO_URL in the environment)
#
# OPENSAND_KEY_PATH, OPENSAND_KEY_FINGERPRINT, OPENSAND_SUITE, OPENSAND_COMPONENT and
# OPENSAND_VERSION may be set; their defaults are below. The packages are amd64 only.
set -euo pipefail
say() { printf 'opensand-install: %s\n' "$*" >&2; }

DEFAULT_REPO_URL=https://raw.githubusercontent.com/CNES/net4sat-packages/master
repo=${1:-${OPENSAND_REPO_URL:-$DEFAULT_REPO_URL}}
repo=${repo%/}
key_path=${OPENSAND_KEY_PATH:-gpg/net4sat.gpg.key}
# The primary key of the Net4Sat signing key; the bookworm InRelease verifies with it.
fingerprint=${OPENSAND_KEY_FINGERPRINT:-6F9F04D69C4B474C167A2FBD252D09EF62D28309}
suite=${OPENSAND_SUITE:-bookworm}
component=${OPENSAND_COMPONENT:-stable}
version=${OPENSAND_VERSION:-8.2.0}

arch=$(dpkg --print-architecture)
if [[ $arch != amd64 ]]; then
  say "OpenSAND's Debian packages are built for amd64 only; this machine is $arch. Use the satlink link (docker-compose.offline.yml in the compose stack), or an amd64 machine."
  exit 3
fi
if [[ $(id -u) -ne 0 ]]; then
  say "run as root (apt-get)"
  exit 3
fi

export DEBIAN_FRONTEND=noninteractive
need=()
for tool in curl:curl gpg:gnupg; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if ((${#need[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ca-certificates "${need[@]}" >/dev/null
fi

key=$(mktemp)
trap 'rm -f "$key"' EXIT
if ! curl -fsSL "$repo/$key_path" -o "$key"; then
  say "could not download OpenSAND's signing key from $repo/$key_path"
  exit 3
fi
got=$(gpg --show-keys --with-colons "$key" 2>/dev/null | awk -F: '$1 == "fpr" {print $10; exit}')
if [[ $got != "$fingerprint" ]]; then
  say "OpenSAND's signing key $repo/$key_path has fingerprint '${got:-none}', not the pinned $fingerprint: refusing to trust it"
  exit 3
fi
install -d -m 0755 /etc/apt/keyrings
gpg --dearmor <"$key" >/etc/apt/keyrings/opensand.gpg
chmod a+r /etc/apt/keyrings/opensand.gpg
printf 'Types: deb\nURIs: %s/%s/\nSuites: %s\nComponents: %s\nSigned-By: /etc/apt/keyrings/opensand.gpg\n' \
  "$repo" "$suite" "$suite" "$component" >/etc/apt/sources.list.d/opensand.sources
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  "opensand=$version" "opensand-core=$version" "libopensand-conf=$version" \
  "libopensand-output=$version" "libopensand-rt=$version" "libopensand-plugin=$version" \
  "libopensand-gse-encap-plugin=$version" "libopensand-rle-encap-plugin=$version" >/dev/null
opensand -V
