#!/usr/bin/env bash
# Proves that .goreleaser.yml makes what the Terraform Registry takes, without
# publishing anything: a snapshot release of HEAD (in a temporary clone)
# signed with a throwaway GPG key, then checks of every artifact. Takes 5-10 minutes on 2 cores (13 builds).
#
#   scripts/release-check.sh        (make release-check)
#
# Checked: one zip per platform holding only terraform-provider-sandbox_v<version>
# (.exe on Windows), SHA256SUMS listing every zip and the manifest (which the
# release uploads from terraform-registry-manifest.json), the sums verifying,
# a binary detached GPG signature that verifies, static Linux/FreeBSD
# binaries, and `-version` printing the version and commit set by ldflags.
#
# GoReleaser is pinned: v2.17 and later need a newer Go than Debian's
# toolchain here (v2.18 needs Go 1.27), and go install builds it once into
# bin/tools. A real release signs with an RSA key (the registry takes RSA or
# DSA keys only; GnuPG 2.4 makes ed25519 by default).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GORELEASER_VERSION=${GORELEASER_VERSION:-v2.16.0}
TOOLS=$PWD/bin/tools
GORELEASER=$TOOLS/goreleaser-$GORELEASER_VERSION
P=terraform-provider-sandbox
PLATFORMS="darwin_amd64 darwin_arm64 freebsd_386 freebsd_amd64 freebsd_arm freebsd_arm64 linux_386 linux_amd64 linux_arm linux_arm64 windows_386 windows_amd64 windows_arm64"

log() { echo "release-check: $*" >&2; }
failures=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; failures=$((failures + 1)); }

for tool in gpg jq unzip file sha256sum; do
	command -v "$tool" >/dev/null || { log "ERROR: $tool is missing (apt-get install -y gnupg jq unzip file)"; exit 1; }
done
if [ ! -x "$GORELEASER" ]; then
	log "building goreleaser $GORELEASER_VERSION into $TOOLS (once)"
	GOBIN=$TOOLS go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
	mv "$TOOLS/goreleaser" "$GORELEASER"
fi

# A clone of HEAD, as a release builds from a tagged commit: GoReleaser takes
# the commit (and the version's ldflags) from git and wants a remote to read
# them, which the clone has.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
[ -z "$(git status --porcelain)" ] || log "WARNING: uncommitted changes are not part of the check (it builds HEAD)"
git clone -q "$PWD" "$WORK/src"
cd "$WORK/src"

"$GORELEASER" check

# A throwaway signing key, gone when the script ends.
GNUPGHOME=$(mktemp -d)
export GNUPGHOME
trap 'gpgconf --kill gpg-agent 2>/dev/null || true; rm -rf "$GNUPGHOME" "$WORK"' EXIT
gpg --batch --quiet --passphrase '' --quick-gen-key 'release-check <release-check@example.invalid>' rsa3072 sign never
GPG_FINGERPRINT=$(gpg --list-keys --with-colons | awk -F: '/^fpr/ {print $10; exit}')
export GPG_FINGERPRINT

log "snapshot release (every platform)"
"$GORELEASER" release --snapshot --clean
D=$PWD/dist
V=$(jq -r .version "$D/metadata.json")
log "checking dist/ for version $V"

got=$(cd "$D" && ls "${P}_${V}"_*.zip | sed "s/^${P}_${V}_//; s/\.zip$//" | sort | xargs)
[ "$got" = "$PLATFORMS" ] && ok "13 zips: $got" || bad "zips: got '$got', want '$PLATFORMS'"
for z in "$D/${P}_${V}"_*.zip; do
	want=${P}_v${V}
	case $z in *_windows_*) want=$want.exe ;; esac
	entries=$(unzip -Z1 "$z")
	[ "$entries" = "$want" ] || bad "$(basename "$z") holds '$entries', want only $want"
	listing=$(unzip -Zl "$z") # not piped into grep -q: under pipefail, unzip's SIGPIPE would fail the test
	grep -q '^-rwx' <<<"$listing" || bad "$(basename "$z"): the binary is not executable"
done
ok "every zip holds only its binary"

S=$D/${P}_${V}_SHA256SUMS
names=$(awk '{print $2}' "$S" | sort | xargs)
want=$( (cd "$D" && ls "${P}_${V}"_*.zip && echo "${P}_${V}_manifest.json") | sort | xargs)
[ "$names" = "$want" ] && ok "SHA256SUMS lists the zips and the manifest" || bad "SHA256SUMS lists: $names"
# The release's assets: the zips, the sums, the signature and the manifest
# (release.extra_files uploads terraform-registry-manifest.json under that name).
A=$(mktemp -d)
cp "$D/${P}_${V}"_*.zip "$S" "$S.sig" "$A/"
cp terraform-registry-manifest.json "$A/${P}_${V}_manifest.json"
if (cd "$A" && sha256sum --quiet -c --strict "$(basename "$S")"); then ok "sha256sum -c"; else bad "sha256sum -c"; fi
jq -e '.version == 1 and .metadata.protocol_versions == ["6.0"]' "$A/${P}_${V}_manifest.json" >/dev/null &&
	ok "manifest: protocol 6" || bad "manifest is not version 1 with protocol_versions [\"6.0\"]"
rm -rf "$A"

if gpg --verify "$S.sig" "$S" 2>/dev/null; then ok "signature verifies"; else bad "gpg --verify $S.sig"; fi
[ "$(head -c 5 "$S.sig" | tr -d '\0')" = "-----" ] && bad "the signature is ASCII-armoured (the registry wants binary)" || ok "signature is binary"

for b in "$D"/provider_linux_*/* "$D"/provider_freebsd_*/*; do
	file -b "$b" | grep -q "statically linked" || bad "not static: $b"
done
ok "Linux and FreeBSD binaries are static"
U=$(mktemp -d)
(cd "$U" && unzip -q "$D/${P}_${V}_linux_amd64.zip")
out=$("$U/${P}_v${V}" -version)
case $out in "$P $V (commit "*) ok "-version: $out" ;; *) bad "-version printed: $out" ;; esac
rm -rf "$U"

if [ "$failures" -gt 0 ]; then
	log "$failures check(s) failed"
	exit 1
fi
log "dist/ is what the registry takes"
